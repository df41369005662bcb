#include "exec/graph_walk.hpp"

#include "exec/gradient_checkpointing.hpp"

namespace trainbench {

void walk_forward(const GraphPlan& plan, OpRunner& runner, int64_t n) {
    for (size_t o = 0; o < plan.model.ops.size(); ++o) runner.forward_op(static_cast<int>(o), n);
}

void walk_backward(const GraphPlan& plan, OpRunner& runner, int64_t n, int resident_segment) {
    const ModelDesc& m = plan.model;
    for (int o = static_cast<int>(m.ops.size()) - 2; o >= 0; --o) {
        const OpDesc& op = m.ops[static_cast<size_t>(o)];
        if (op.outputs.empty() || plan.grad_offset[static_cast<size_t>(op.outputs[0])] < 0) continue;
        resident_segment = rebuild_segment_before_backward(plan, runner, o, n, resident_segment);
        runner.backward_op(o, n);
        runner.backward_done(o);
    }
}

}  // namespace trainbench
