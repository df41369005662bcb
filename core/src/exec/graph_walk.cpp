#include "exec/graph_walk.hpp"

namespace trainbench {

void walk_forward(const GraphPlan& plan, OpRunner& runner, int64_t n) {
    for (size_t o = 0; o < plan.model.ops.size(); ++o) runner.forward_op(static_cast<int>(o), n);
}

void walk_backward(const GraphPlan& plan, OpRunner& runner, int64_t n, int resident_segment) {
    const ModelDesc& m = plan.model;
    for (int o = static_cast<int>(m.ops.size()) - 2; o >= 0; --o) {
        const OpDesc& op = m.ops[static_cast<size_t>(o)];
        if (op.outputs.empty() || plan.grad_offset[static_cast<size_t>(op.outputs[0])] < 0) continue;
        if (plan.checkpointing && op.segment >= 0 && op.segment != resident_segment) {
            for (size_t r = 0; r < m.ops.size(); ++r)
                if (m.ops[r].segment == op.segment) runner.forward_op(static_cast<int>(r), n);
            resident_segment = op.segment;
        }
        runner.backward_op(o, n);
        runner.backward_done(o);
    }
}

}  // namespace trainbench
