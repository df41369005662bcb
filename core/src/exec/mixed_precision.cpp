// Mixed precision (--precision bf16|fp16) in the executor: where a 16-bit run's tensors are
// widened to fp32 for a kernel and where its results are rounded into 16-bit storage.
//
// The technique as a whole:
//   - the planner (plan/graph_plan.cpp) decides which tensors are stored in 16 bits
//     (GraphPlan::stored_16bit: activations; LayerNorm's statistics stay fp32), sizes the fp32
//     stagings a kernel widens into, and keeps fp32 master weights, gradients and optimizer
//     state beside a 16-bit working copy of the weights;
//   - the executor (here) widens an op's 16-bit inputs into input stagings and rounds its
//     results from output stagings, unless a backend's kernel reads or writes the 16-bit storage
//     itself (then the backend says so at that op: "stored");
//   - the optimizer step refreshes the working copy from the master weights once per update
//     (optim/optimizer_step.cpp, the CUDA optimizer kernels; on the CPU, weights its fp32
//     products read get their widened copy instead of codes);
//   - the products round their output gradient to 16 bits (16-bit operands, fp32 accumulation,
//     as tensor cores multiply); activation gradients stay fp32;
//   - fp16 scales the loss (precision/loss_scaler.*) so that small gradients survive.
// Both backends keep these rounding points, so a CPU run and a CUDA run compute the same
// function; tests/core/test_mlp_goldens.cpp pins an MLP's weights at them bit for bit.
#include <algorithm>

#include "exec/plan_executor.hpp"

namespace trainbench {

const float* PlanExecutor::read(int t, int64_t samples, float* staging) const {
    if (!plan_.stored_16bit(t)) return tensor(t);
    widen_16bit(stored(t), staging, elements(t, samples));
    return staging;
}

const float* PlanExecutor::input(const OpDesc& op, size_t k, int64_t samples) const {
    return read(op.inputs[k], samples, buffers_.input_staging.at(k));
}

float* PlanExecutor::output(const OpDesc& op, size_t k) const {
    return plan_.stored_16bit(op.outputs[k]) ? buffers_.output_staging.at(k) : tensor(op.outputs[k]);
}

// Outputs past the second (DoRA's unscaled result) are stored by their kernels.
void PlanExecutor::store_outputs(const OpDesc& op, int64_t samples) const {
    for (size_t k = 0; k < std::min<size_t>(op.outputs.size(), buffers_.output_staging.size()); ++k)
        if (plan_.stored_16bit(op.outputs[k]))
            round_to_codes(buffers_.output_staging.at(k), stored(op.outputs[k]), elements(op.outputs[k], samples));
}

const float* PlanExecutor::saved_output(const OpDesc& op, size_t k, int64_t samples) const {
    return read(op.outputs[k], samples, buffers_.output_staging.at(k));
}

}  // namespace trainbench
