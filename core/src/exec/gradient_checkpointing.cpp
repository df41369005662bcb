#include "exec/gradient_checkpointing.hpp"

namespace trainbench {

int rebuild_segment_before_backward(const GraphPlan& plan, OpRunner& runner, int o, int64_t n, int resident_segment) {
    const ModelDesc& m = plan.model;
    const int segment = m.ops[static_cast<size_t>(o)].segment;
    if (!plan.checkpointing || segment < 0 || segment == resident_segment) return resident_segment;
    for (size_t r = 0; r < m.ops.size(); ++r)
        if (m.ops[r].segment == segment) runner.forward_op(static_cast<int>(r), n);
    return segment;
}

}  // namespace trainbench
