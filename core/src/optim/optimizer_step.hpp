#pragma once
// The optimizers' update rules over flat fp32 arrays (all parameters in one allocation),
// following torch.optim's single-tensor ("foreach=False") algorithms and defaults.
#include <cstdint>
#include <span>
#include <vector>

#include "parallel/shard_range.hpp"

#include "trainbench/run_config.hpp"

namespace trainbench {

// How many parameter-sized fp32 state buffers the optimizer keeps: sgd 0 (1 with momentum),
// adam/adamw 2 (exp_avg, exp_avg_sq), rmsprop 1 (+1 momentum, +1 centered), adagrad 1.
int optimizer_state_slots(const OptimizerConfig& config);

// The value every state element starts at: Adagrad's initial_accumulator_value, else zero.
float optimizer_initial_state_value(const OptimizerConfig& config);
// Initial values of the state (adagrad's initial_accumulator_value; zeros otherwise).
// `state` holds optimizer_state_slots(config) consecutive buffers of n floats.
void optimizer_init_state(const OptimizerConfig& config, float* state, int64_t n);

// A parameter's working copy widened back to fp32, as products with fp32 operands read it
// (16-bit runs whose products multiply in fp32): flat parameters [begin, end) at `values`.
struct WidenedParameter {
    int64_t begin = 0, end = 0;
    float* values = nullptr;
};
// One update: the rule for config.kind applied with learning rate lr to the gradients times
// grad_multiplier (loss-scale undo x clipping; multiplied as the rule reads them, the buffer
// is left as it is). step is 1-based.
// Parallel over n on the engine's WorkerTeam; the result does not depend on the thread count.
// Weight decay applies to [0, decay_end) only (parameter groups as nanoGPT's: the store puts
// the decayed tensors first); decay_end -1 decays all n.
// working_copy (16-bit runs, --fused on): each block of updated parameters is also rounded
// into the working copy the products read while it is in cache, instead of in a pass of its
// own before the next forward.
struct WorkingCopy {
    Precision precision = Precision::bf16;
    uint16_t* codes = nullptr;  // indexed as params
    // Parameters whose products read them widened to fp32 (sorted by begin): they get the
    // rounded values there and not their codes, which keep what the last full rounding wrote.
    // Only parameters that nothing reads as codes belong here.
    std::span<const WidenedParameter> widened;
};
void optimizer_step_cpu(const OptimizerConfig& config, float* params, const float* grads,
                        float* state, int64_t n, double lr, double grad_multiplier,
                        int64_t step, int64_t decay_end = -1, const WorkingCopy* working_copy = nullptr);

// --fused off: the same update as torch.optim's single-tensor algorithm runs it in eager mode,
// parameter tensor by parameter tensor (`tensors`: their ranges in [0, n)), each tensor op one
// pass over the tensor on the worker team (the sequence in optim/eager_optimizer.hpp) and its
// temporaries (Adam's denom, a decayed gradient) in `scratch`. The gradient multiplier is its
// own pass first, as clip_grad_norm_ and GradScaler.unscale_ make it. RMSprop and Adagrad keep
// their one-pass rule. Equal to optimizer_step_cpu up to float rounding.
int64_t eager_optimizer_scratch_floats(const OptimizerConfig& config, int64_t largest_tensor);
void optimizer_step_eager_cpu(const OptimizerConfig& config, float* params, float* grads, float* state, int64_t n,
                              double lr, double grad_multiplier, int64_t step, int64_t decay_end,
                              const std::vector<ShardRange>& tensors, float* scratch);

// Names of the state buffers for checkpoints ("momentum_buffer", "exp_avg", ...).
const char* optimizer_state_name(const OptimizerConfig& config, int slot);

}  // namespace trainbench
