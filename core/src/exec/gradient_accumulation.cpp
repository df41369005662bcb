// Gradient accumulation (--step-size) in the executor: how a backward pass writes the gradients.
//
// The technique as a whole:
//   - the training loop (train/trainer.cpp, train/micro_batch_stream.*) splits each update's
//     batch into micro-batches and runs one forward and backward pass per micro-batch, each
//     scaled by 1 / (the update's samples), then one optimizer step;
//   - the planner (plan/graph_plan.cpp) sizes the activations for one micro-batch, which is what
//     accumulation saves, and says per op how its backward writes each gradient
//     (GraphPlan::first_param_write, input_write): the update's first writer of a gradient
//     overwrites it, every later one adds;
//   - the executor (here) turns zero_grad() into "the next pass overwrites" instead of a pass of
//     its own over the gradients; only when the gradients are read (the norm, the optimizer step,
//     a collective) with no backward pass since zero_grad() is the whole buffer zeroed.
// Accumulating changes the update only by float rounding: tests/core/test_accumulation.cpp pins it.
#include "exec/plan_executor.hpp"

namespace trainbench {

void PlanExecutor::zero_grad() { grads_stale_ = true; }

void PlanExecutor::materialise_zero_grad() {
    if (!grads_stale_) return;
    fill_zeros(buffers_.gradients, plan_.gradient_floats());
    grads_stale_ = false;
}

}  // namespace trainbench
