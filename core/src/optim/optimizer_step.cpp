#include "optim/optimizer_step.hpp"

#include <algorithm>

#include "optim/eager_optimizer.hpp"
#include "optim/optimizer_rules.hpp"
#include "parallel/parallel_range.hpp"
#include "precision/half_float.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

// The rules themselves are optimizer_rules.hpp's, shared with the GPU. The loops are element-wise
// with no reductions, so any split of the work gives the same bits. Each reads the rule's flags
// into locals first and keeps absent state out of the loop body, so that GCC vectorises it.

namespace trainbench {
namespace {

// The fused update works through each thread's share in blocks this long (16 KiB of each of
// the parameters, gradients and each state buffer), so that a 16-bit run's updated parameters
// are still in cache when they are rounded into the working copy.
constexpr int64_t kFusedBlock = 4096;

// The gradients as a rule reads them: multiplied by the loss-scale undo x clipping factor in
// registers, never written back. Scaling the buffer in place first cost a pass of its own and a
// write of all of it every update (an fp16 MLP's, 7 MB); the trainer zeroes or overwrites the
// gradients before it reads them again, as the CUDA kernels rely on too. The product is rounded
// before the rules add anything to it, as torch's unscaled gradient is (add_weight_decay in
// optimizer_rules.hpp); `factor` is 1 where nothing scales, and x * 1.0f is x.
struct ScaledGradients {
    const float* values;
    float factor = 1.0f;
    float operator[](int64_t i) const { return values[i] * factor; }
};

// A block [begin, end) of updated parameters into the working copy: a widened range gets the
// rounded values in fp32, which its products read, and no codes, which nothing reads there; the
// rest gets codes. (Writing the codes too cost a third of the step's extra stores in an fp16
// MLP, every one of them a cache miss.)
void refresh_working_copy(const WorkingCopy& copy, const float* params, int64_t begin, int64_t end) {
    int64_t coded = begin;  // [begin, coded): coded, or inside a widened range
    for (const WidenedParameter& w : copy.widened) {
        const int64_t from = std::max(begin, w.begin), to = std::min(end, w.end);
        if (from >= to) continue;
        if (coded < from) store_16bit_serial(copy.precision, params + coded, copy.codes + coded, from - coded);
        round_to_16bit_serial(copy.precision, params + from, w.values + (from - w.begin), to - from);
        coded = std::max(coded, to);
    }
    if (coded < end) store_16bit_serial(copy.precision, params + coded, copy.codes + coded, end - coded);
}

void sgd_step(const OptimizerScalars& scalars, bool decay, float* params, ScaledGradients grads, float* momentum_buffer,
              int64_t begin, int64_t end) {
    const OptimizerScalars s = scalars;
    if (!s.use_momentum) {
#pragma omp simd
        for (int64_t i = begin; i < end; ++i) {
            float unused = 0.0f;
            params[i] = sgd_rule(params[i], grads[i], unused, decay, s);
        }
        return;
    }
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) params[i] = sgd_rule(params[i], grads[i], momentum_buffer[i], decay, s);
}

void adam_step(const OptimizerScalars& scalars, bool decay, float* params, ScaledGradients grads, float* exp_avg,
               float* exp_avg_sq, int64_t begin, int64_t end) {
    const OptimizerScalars s = scalars;
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) params[i] = adam_rule(params[i], grads[i], exp_avg[i], exp_avg_sq[i], decay, s);
}

// One loop per combination of RMSprop's optional buffers, each with the flags as constants, so
// that the loop has no branch left to keep it from vectorising.
template <bool Momentum, bool Centered>
void rmsprop_loop(const OptimizerScalars& scalars, bool decay, float* params, ScaledGradients grads,
                  const RmspropBuffers& buffers, int64_t begin, int64_t end) {
    OptimizerScalars s = scalars;
    s.use_momentum = Momentum;
    s.centered = Centered;
    float* square_avg = buffers.square_avg;
    float* momentum_buffer = buffers.momentum_buffer;
    float* grad_avg = buffers.grad_avg;
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) {
        float buf = 0.0f, average = 0.0f;
        if constexpr (Momentum) buf = momentum_buffer[i];
        if constexpr (Centered) average = grad_avg[i];
        params[i] = rmsprop_rule(params[i], grads[i], square_avg[i], buf, average, decay, s);
        if constexpr (Momentum) momentum_buffer[i] = buf;
        if constexpr (Centered) grad_avg[i] = average;
    }
}

void rmsprop_step(const OptimizerConfig& config, const OptimizerScalars& s, bool decay, float* params,
                  ScaledGradients grads, float* state, int64_t n, int64_t begin, int64_t end) {
    const RmspropBuffers buffers = rmsprop_buffers(config, state, n);
    const bool momentum = buffers.momentum_buffer != nullptr, centered = buffers.grad_avg != nullptr;
    if (momentum && centered) rmsprop_loop<true, true>(s, decay, params, grads, buffers, begin, end);
    else if (momentum) rmsprop_loop<true, false>(s, decay, params, grads, buffers, begin, end);
    else if (centered) rmsprop_loop<false, true>(s, decay, params, grads, buffers, begin, end);
    else rmsprop_loop<false, false>(s, decay, params, grads, buffers, begin, end);
}

void adagrad_step(const OptimizerScalars& scalars, bool decay, float* params, ScaledGradients grads, float* state_sum,
                  int64_t begin, int64_t end) {
    const OptimizerScalars s = scalars;
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) params[i] = adagrad_rule(params[i], grads[i], state_sum[i], decay, s);
}

// Runs config's rule over [begin, end).
void apply_rule(const OptimizerConfig& config, const OptimizerScalars& s, bool decay, float* params, ScaledGradients grads,
                float* state, int64_t n, int64_t begin, int64_t end) {
    if (begin >= end) return;
    switch (config.kind) {
        case OptimizerKind::sgd: sgd_step(s, decay, params, grads, state, begin, end); return;
        case OptimizerKind::adam:
        case OptimizerKind::adamw: adam_step(s, decay, params, grads, state, state + n, begin, end); return;
        case OptimizerKind::rmsprop: rmsprop_step(config, s, decay, params, grads, state, n, begin, end); return;
        case OptimizerKind::adagrad: adagrad_step(s, decay, params, grads, state, begin, end); return;
    }
}

}  // namespace

int optimizer_state_slots(const OptimizerConfig& config) {
    switch (config.kind) {
        case OptimizerKind::sgd: return config.momentum != 0.0 ? 1 : 0;
        case OptimizerKind::adam:
        case OptimizerKind::adamw: return 2;
        case OptimizerKind::rmsprop:
            return 1 + (config.momentum > 0.0 ? 1 : 0) + (config.centered ? 1 : 0);
        case OptimizerKind::adagrad: return 1;
    }
    throw std::logic_error("optimizer_state_slots: unknown OptimizerKind");
}

float optimizer_initial_state_value(const OptimizerConfig& config) {
    return config.kind == OptimizerKind::adagrad ? as_float(config.initial_accumulator_value) : 0.0f;
}

void optimizer_init_state(const OptimizerConfig& config, float* state, int64_t n) {
    const float initial = optimizer_initial_state_value(config);
    const int64_t total = n * optimizer_state_slots(config);
    for (int64_t i = 0; i < total; ++i) state[i] = initial;
}

void optimizer_step_cpu(const OptimizerConfig& config, float* params, const float* grads,
                        float* state, int64_t n, double lr, double grad_multiplier,
                        int64_t step, int64_t decay_end, const WorkingCopy* working_copy) {
    if (step < 1) throw std::invalid_argument("optimizer_step_cpu: step is 1-based");
    if (static_cast<unsigned>(config.kind) > static_cast<unsigned>(OptimizerKind::adagrad))
        throw std::logic_error("optimizer_step_cpu: unknown OptimizerKind");
    if (decay_end < 0 || decay_end > n) decay_end = n;
    // Element-wise rules: each slice of the flat arrays is updated independently, so the
    // result does not depend on how the work is split, nor on where the decayed group ends.
    const OptimizerScalars scalars = optimizer_scalars(config, lr, step);
    const ScaledGradients scaled{grads, as_float(grad_multiplier)};
    parallel_range(n, 8, [&](int64_t first, int64_t last) {
        for (int64_t begin = first; begin < last; begin += kFusedBlock) {
            const int64_t end = std::min(last, begin + kFusedBlock);
            apply_rule(config, scalars, scalars.decay, params, scaled, state, n, begin, std::min(end, decay_end));
            apply_rule(config, scalars, false, params, scaled, state, n, std::max(begin, decay_end), end);
            if (working_copy) refresh_working_copy(*working_copy, params, begin, end);
        }
    });
}

int64_t eager_optimizer_scratch_floats(const OptimizerConfig& config, int64_t largest_tensor) {
    return has_eager_form(config) ? 2 * largest_tensor : 0;
}

void optimizer_step_eager_cpu(const OptimizerConfig& config, float* params, float* grads, float* state, int64_t n,
                              double lr, double grad_multiplier, int64_t step, int64_t decay_end,
                              const std::vector<ShardRange>& tensors, float* scratch) {
    if (step < 1) throw std::invalid_argument("optimizer_step_eager_cpu: step is 1-based");
    // Each tensor op one pass over its tensor on the worker team.
    auto run = [](const TensorOpCall& call) {
        dispatch_tensor_op(call.op, [&](auto op) {
            parallel_range(call.count, 2, [&](int64_t first, int64_t last) {
#pragma omp simd
                for (int64_t i = first; i < last; ++i)
                    call.out[i] = tensor_op_value<decltype(op)::value>(call.out, call.x, call.y, i, call.a);
            });
        });
    };
    auto one_pass = [&](const OptimizerConfig& c, int64_t begin, int64_t end) {
        const OptimizerScalars scalars = optimizer_scalars(c, lr, step);
        apply_rule(c, scalars, scalars.decay, params, ScaledGradients{grads}, state, n, begin, end);
    };
    for_each_eager_optimizer_op(config, params, grads, state, n, lr, grad_multiplier, step, decay_end, tensors, scratch,
                                run, one_pass);
}

const char* optimizer_state_name(const OptimizerConfig& config, int slot) {
    if (slot < 0 || slot >= optimizer_state_slots(config)) {
        throw std::out_of_range("optimizer_state_name: slot " + std::to_string(slot) +
                                " out of range for " + to_string(config.kind));
    }
    switch (config.kind) {
        case OptimizerKind::sgd: return "momentum_buffer";
        case OptimizerKind::adam:
        case OptimizerKind::adamw: return slot == 0 ? "exp_avg" : "exp_avg_sq";
        case OptimizerKind::rmsprop:
            if (slot == 0) return "square_avg";
            if (slot == 1 && config.momentum > 0.0) return "momentum_buffer";
            return "grad_avg";
        case OptimizerKind::adagrad: return "sum";
    }
    throw std::logic_error("optimizer_state_name: unknown OptimizerKind");
}

}  // namespace trainbench
