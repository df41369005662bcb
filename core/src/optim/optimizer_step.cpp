#include "optim/optimizer_step.hpp"

#include <algorithm>

#include "optim/eager_optimizer.hpp"
#include "parallel/parallel_range.hpp"
#include "precision/half_float.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

// Each rule reproduces torch.optim's single-tensor algorithm (torch 1.13) operation by
// operation: torch evaluates every tensor op on float32 with its Python-float hyper-parameters
// cast to float, and derived scalars (bias corrections, 1 - beta, Adagrad's clr) computed in
// double first. Mirroring that order keeps our trajectories within float rounding of PyTorch's.
// The loops are element-wise with no reductions, so any split of the work gives the same bits.
// `step` counts applied updates (an update the loss scaler skips does not count), as torch's
// per-parameter step does; SGD's first step and Adam's bias corrections depend on it.

namespace trainbench {
namespace {

float as_float(double value) { return static_cast<float>(value); }

// The fused update works through each thread's share in blocks this long (16 KiB of each of
// the parameters, gradients and each state buffer), so the gradients it scales are still in
// cache when the rule reads them.
constexpr int64_t kFusedBlock = 4096;

void sgd_step(const OptimizerConfig& config, float* params, const float* grads,
              float* momentum_buffer, int64_t begin, int64_t end, double lr, int64_t step) {
    const double weight_decay_d = config.resolved_weight_decay();
    const bool decay = weight_decay_d != 0.0;
    const bool use_momentum = config.momentum != 0.0;
    // torch clones the decayed gradient into the buffer on the first step (no dampening).
    const bool first_step = step == 1;
    const bool nesterov = config.nesterov;
    const float weight_decay = as_float(weight_decay_d);
    const float momentum = as_float(config.momentum);
    const float one_minus_dampening = as_float(1.0 - config.dampening);
    const float neg_lr = as_float(-lr);
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) {
        float d_p = grads[i];
        if (decay) d_p = d_p + weight_decay * params[i];
        if (use_momentum) {
            float buf;
            if (first_step) {
                buf = d_p;
            } else {
                buf = momentum_buffer[i] * momentum;
                buf = buf + one_minus_dampening * d_p;
            }
            momentum_buffer[i] = buf;
            d_p = nesterov ? d_p + momentum * buf : buf;
        }
        params[i] = params[i] + neg_lr * d_p;
    }
}

// Adam with L2 decay folded into the gradient; AdamW instead shrinks the parameters first.
void adam_step(const OptimizerConfig& config, bool decoupled_decay, float* params,
               const float* grads, float* exp_avg, float* exp_avg_sq, int64_t begin, int64_t end,
               double lr, int64_t step) {
    const double weight_decay_d = config.resolved_weight_decay();
    const bool l2_decay = !decoupled_decay && weight_decay_d != 0.0;
    const bool shrink = decoupled_decay && weight_decay_d != 0.0;
    const float shrink_factor = as_float(1.0 - lr * weight_decay_d);
    const float weight_decay = as_float(weight_decay_d);
    const double steps = static_cast<double>(step);
    const double bias_correction1 = 1.0 - std::pow(config.beta1, steps);
    const double bias_correction2 = 1.0 - std::pow(config.beta2, steps);
    const float neg_step_size = as_float(-(lr / bias_correction1));
    const float bias_correction2_sqrt = as_float(std::sqrt(bias_correction2));
    const float beta1 = as_float(config.beta1);
    const float beta2 = as_float(config.beta2);
    const float one_minus_beta1 = as_float(1.0 - config.beta1);
    const float one_minus_beta2 = as_float(1.0 - config.beta2);
    const float eps = as_float(config.resolved_eps());
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) {
        float param = params[i];
        if (shrink) param = param * shrink_factor;
        float grad = grads[i];
        if (l2_decay) grad = grad + weight_decay * param;
        float m = exp_avg[i] * beta1;
        m = m + one_minus_beta1 * grad;
        float v = exp_avg_sq[i] * beta2;
        v = v + one_minus_beta2 * grad * grad;
        exp_avg[i] = m;
        exp_avg_sq[i] = v;
        const float denom = std::sqrt(v) / bias_correction2_sqrt + eps;
        params[i] = param + neg_step_size * m / denom;
    }
}

struct RmspropBuffers {
    float* square_avg;
    float* momentum_buffer;  // null without momentum
    float* grad_avg;         // null unless centered
};

RmspropBuffers rmsprop_buffers(const OptimizerConfig& config, float* state, int64_t n) {
    RmspropBuffers buffers{state, nullptr, nullptr};
    float* next = state + n;
    if (config.momentum > 0.0) {
        buffers.momentum_buffer = next;
        next += n;
    }
    if (config.centered) buffers.grad_avg = next;
    return buffers;
}

void rmsprop_step(const OptimizerConfig& config, float* params, const float* grads,
                  float* state, int64_t n, int64_t begin, int64_t end, double lr) {
    const RmspropBuffers buffers = rmsprop_buffers(config, state, n);
    float* square_avg = buffers.square_avg;
    float* momentum_buffer = buffers.momentum_buffer;
    float* grad_avg = buffers.grad_avg;
    const double weight_decay_d = config.resolved_weight_decay();
    const bool decay = weight_decay_d != 0.0;
    const bool centered = config.centered;
    const bool use_momentum = config.momentum > 0.0;
    const float weight_decay = as_float(weight_decay_d);
    const float alpha = as_float(config.alpha);
    const float one_minus_alpha = as_float(1.0 - config.alpha);
    const float eps = as_float(config.resolved_eps());
    const float momentum = as_float(config.momentum);
    const float neg_lr = as_float(-lr);
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) {
        float grad = grads[i];
        if (decay) grad = grad + weight_decay * params[i];
        float sq = square_avg[i] * alpha;
        sq = sq + one_minus_alpha * grad * grad;
        square_avg[i] = sq;
        float avg;
        if (centered) {
            float ga = grad_avg[i] * alpha;
            ga = ga + one_minus_alpha * grad;
            grad_avg[i] = ga;
            avg = std::sqrt(sq - ga * ga);
        } else {
            avg = std::sqrt(sq);
        }
        avg = avg + eps;
        if (use_momentum) {
            float buf = momentum_buffer[i] * momentum;
            buf = buf + grad / avg;
            momentum_buffer[i] = buf;
            params[i] = params[i] + neg_lr * buf;
        } else {
            params[i] = params[i] + neg_lr * grad / avg;
        }
    }
}

void adagrad_step(const OptimizerConfig& config, float* params, const float* grads,
                  float* state_sum, int64_t begin, int64_t end, double lr, int64_t step) {
    const double weight_decay_d = config.resolved_weight_decay();
    const bool decay = weight_decay_d != 0.0;
    const float weight_decay = as_float(weight_decay_d);
    const double clr = lr / (1.0 + static_cast<double>(step - 1) * config.lr_decay);
    const float neg_clr = as_float(-clr);
    const float eps = as_float(config.resolved_eps());
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) {
        float grad = grads[i];
        if (decay) grad = grad + weight_decay * params[i];
        const float sum = state_sum[i] + grad * grad;
        state_sum[i] = sum;
        const float std_dev = std::sqrt(sum) + eps;
        params[i] = params[i] + neg_clr * grad / std_dev;
    }
}

void scale_in_place(float* values, int64_t begin, int64_t end, double multiplier) {
    const float factor = as_float(multiplier);
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) values[i] = values[i] * factor;
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

void optimizer_init_state(const OptimizerConfig& config, float* state, int64_t n) {
    const float initial = config.kind == OptimizerKind::adagrad
                              ? as_float(config.initial_accumulator_value)
                              : 0.0f;
    const int64_t total = n * optimizer_state_slots(config);
    for (int64_t i = 0; i < total; ++i) state[i] = initial;
}

void optimizer_step_cpu(const OptimizerConfig& config, float* params, float* grads,
                        float* state, int64_t n, double lr, double grad_multiplier,
                        int64_t step, int64_t decay_end, const WorkingCopy* working_copy) {
    if (step < 1) throw std::invalid_argument("optimizer_step_cpu: step is 1-based");
    if (static_cast<unsigned>(config.kind) > static_cast<unsigned>(OptimizerKind::adagrad))
        throw std::logic_error("optimizer_step_cpu: unknown OptimizerKind");
    if (decay_end < 0 || decay_end > n) decay_end = n;
    OptimizerConfig no_decay = config;
    no_decay.weight_decay = 0.0;
    // Element-wise rules: each slice of the flat arrays is updated independently, so the
    // result does not depend on how the work is split, nor on where the decayed group ends.
    auto rule = [&](const OptimizerConfig& c, int64_t begin, int64_t end) {
        if (begin >= end) return;
        switch (c.kind) {
            case OptimizerKind::sgd: sgd_step(c, params, grads, state, begin, end, lr, step); return;
            case OptimizerKind::adam: adam_step(c, false, params, grads, state, state + n, begin, end, lr, step); return;
            case OptimizerKind::adamw: adam_step(c, true, params, grads, state, state + n, begin, end, lr, step); return;
            case OptimizerKind::rmsprop: rmsprop_step(c, params, grads, state, n, begin, end, lr); return;
            case OptimizerKind::adagrad: adagrad_step(c, params, grads, state, begin, end, lr, step); return;
        }
    };
    // One pass: each block's gradients are scaled (loss-scale undo, clipping) and applied while
    // they are in cache.
    parallel_range(n, 8, [&](int64_t first, int64_t last) {
        for (int64_t begin = first; begin < last; begin += kFusedBlock) {
            const int64_t end = std::min(last, begin + kFusedBlock);
            if (grad_multiplier != 1.0) scale_in_place(grads, begin, end, grad_multiplier);
            rule(config, begin, std::min(end, decay_end));
            rule(no_decay, std::max(begin, decay_end), end);
            if (working_copy)
                store_16bit_serial(working_copy->precision, params + begin, working_copy->codes + begin, end - begin);
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
        if (c.kind == OptimizerKind::rmsprop) rmsprop_step(c, params, grads, state, n, begin, end, lr);
        else adagrad_step(c, params, grads, state, begin, end, lr, step);
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
