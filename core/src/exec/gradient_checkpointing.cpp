#include "exec/gradient_checkpointing.hpp"

namespace trainbench {

// plan/graph_plan.cpp's rebuilt_segments counts the segments this rebuilds: keep the two rules one.
int rebuild_segment_before_backward(const GraphPlan& plan, OpRunner& runner, int o, int64_t n, int resident_segment) {
    const ModelDesc& m = plan.model;
    const int segment = m.ops[static_cast<size_t>(o)].segment;
    // A segment that dropped nothing keeps its tensors: rebuilding it would only redo its work,
    // and would mark the slots as holding it when they still hold another segment's tensors.
    if (!plan.checkpointing || !plan.rebuildable(segment) || segment == resident_segment) return resident_segment;
    for (size_t r = 0; r < m.ops.size(); ++r)
        if (m.ops[r].segment == segment) runner.forward_op(static_cast<int>(r), n);
    return segment;
}

}  // namespace trainbench
