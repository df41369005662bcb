#pragma once
// --fused off: torch.optim's single-tensor Adam, AdamW and SGD as eager PyTorch runs them, a
// sequence of tensor ops (exp_avg.mul_(beta1), then .add_(grad, alpha=1 - beta1), ...), each one
// pass over one parameter tensor. Described once here for both engines: the CPU runs each op
// over its worker team (optimizer_step_eager_cpu), the GPU as one kernel
// (backend/cuda/eager_kernels.cu). Scalars are derived in double and rounded to float, as the
// one-pass rules (optim/optimizer_rules.hpp) do.
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "optim/host_device.hpp"
#include "optim/optimizer_rules.hpp"
#include "parallel/shard_range.hpp"
#include "trainbench/run_config.hpp"


namespace trainbench {

// One tensor op, element i of out (and of x, y where the op reads them), `a` its float scalar.
enum class TensorOp {
    scale,              // out.mul_(a)
    add_scaled,         // out.add_(x, alpha=a)
    add_scaled_square,  // out.addcmul_(x, x, value=a)
    copy,               // out = torch.clone(x)
    plus_scaled,        // out = y.add(x, alpha=a)
    sqrt,               // out = x.sqrt()
    divide,             // out = out / a
    add_constant,       // out.add_(a)
    addcdiv,            // out.addcdiv_(x, y, value=a)
};

template <TensorOp Op>
TRAINBENCH_HOST_DEVICE inline float tensor_op_value(const float* out, const float* x, const float* y, int64_t i,
                                                    float a) {
    if constexpr (Op == TensorOp::scale) return out[i] * a;
    if constexpr (Op == TensorOp::add_scaled) return out[i] + a * x[i];
    if constexpr (Op == TensorOp::add_scaled_square) return out[i] + a * x[i] * x[i];
    if constexpr (Op == TensorOp::copy) return x[i];
    if constexpr (Op == TensorOp::plus_scaled) return y[i] + a * x[i];
    if constexpr (Op == TensorOp::sqrt) return std::sqrt(x[i]);
    if constexpr (Op == TensorOp::divide) return out[i] / a;
    if constexpr (Op == TensorOp::add_constant) return out[i] + a;
    if constexpr (Op == TensorOp::addcdiv) return out[i] + a * x[i] / y[i];
}

// Calls f(std::integral_constant<TensorOp, op>{}), so that each op's loop or kernel is compiled
// for that op alone.
template <typename F>
void dispatch_tensor_op(TensorOp op, F&& f) {
    switch (op) {
        case TensorOp::scale: return f(std::integral_constant<TensorOp, TensorOp::scale>{});
        case TensorOp::add_scaled: return f(std::integral_constant<TensorOp, TensorOp::add_scaled>{});
        case TensorOp::add_scaled_square: return f(std::integral_constant<TensorOp, TensorOp::add_scaled_square>{});
        case TensorOp::copy: return f(std::integral_constant<TensorOp, TensorOp::copy>{});
        case TensorOp::plus_scaled: return f(std::integral_constant<TensorOp, TensorOp::plus_scaled>{});
        case TensorOp::sqrt: return f(std::integral_constant<TensorOp, TensorOp::sqrt>{});
        case TensorOp::divide: return f(std::integral_constant<TensorOp, TensorOp::divide>{});
        case TensorOp::add_constant: return f(std::integral_constant<TensorOp, TensorOp::add_constant>{});
        case TensorOp::addcdiv: return f(std::integral_constant<TensorOp, TensorOp::addcdiv>{});
    }
}

// One op over one tensor: count elements from out, x and y (x, y null where the op reads none).
struct TensorOpCall {
    TensorOp op;
    float* out;
    const float* x;
    const float* y;
    int64_t count;
    float a;
};

// Adam, AdamW and SGD have an eager form; RMSprop and Adagrad keep their one pass in both modes.
inline bool has_eager_form(const OptimizerConfig& config) {
    return config.kind == OptimizerKind::adam || config.kind == OptimizerKind::adamw ||
           config.kind == OptimizerKind::sgd;
}

// The update of params [0, n) tensor by tensor (`tensors`: their ranges), as the calls
// run(TensorOpCall) makes, in order: the gradient multiplier first (clip_grad_norm_ and
// GradScaler.unscale_ scale the gradients in place), then the optimizer's ops. Weight decay
// applies to the tensors in [0, decay_end) (-1: all). Temporaries (Adam's denom, a decayed
// gradient) live in `scratch`, two of the largest tensor. For an optimizer without an eager form,
// one_pass(config of the tensor's group, begin, end) runs its rule after the multiplier.
template <typename Run, typename OnePass>
void for_each_eager_optimizer_op(const OptimizerConfig& config, float* params, float* grads, float* state, int64_t n,
                                 double lr, double grad_multiplier, int64_t step, int64_t decay_end,
                                 const std::vector<ShardRange>& tensors, float* scratch, Run&& run,
                                 OnePass&& one_pass) {
    if (decay_end < 0 || decay_end > n) decay_end = n;
    for (const ShardRange& tensor : tensors) {
        const int64_t b = tensor.begin, count = tensor.end - tensor.begin;
        if (count <= 0) continue;
        OptimizerConfig c = config;
        if (b >= decay_end) c.weight_decay = 0.0;  // the group without decay (nanoGPT's)
        const double wd = c.resolved_weight_decay();
        float* param = params + b;
        float* grad = grads + b;
        if (grad_multiplier != 1.0) run(TensorOpCall{TensorOp::scale, grad, nullptr, nullptr, count, as_float(grad_multiplier)});
        if (!has_eager_form(c)) {
            one_pass(c, b, tensor.end);
            continue;
        }
        float* temp = scratch;
        float* temp2 = scratch + count;
        if (c.kind == OptimizerKind::sgd) {
            const float* d_p = grad;
            if (wd != 0.0) {  // d_p = grad.add(param, alpha=wd)
                run(TensorOpCall{TensorOp::plus_scaled, temp2, param, grad, count, as_float(wd)});
                d_p = temp2;
            }
            if (c.momentum != 0.0) {
                float* buf = state + b;
                const float momentum = as_float(c.momentum);
                if (step == 1) {
                    run(TensorOpCall{TensorOp::copy, buf, d_p, nullptr, count, 0.0f});
                } else {
                    run(TensorOpCall{TensorOp::scale, buf, nullptr, nullptr, count, momentum});
                    run(TensorOpCall{TensorOp::add_scaled, buf, d_p, nullptr, count, as_float(1.0 - c.dampening)});
                }
                if (c.nesterov) {  // d_p = d_p.add(buf, alpha=momentum)
                    run(TensorOpCall{TensorOp::plus_scaled, temp, buf, d_p, count, momentum});
                    d_p = temp;
                } else {
                    d_p = buf;
                }
            }
            run(TensorOpCall{TensorOp::add_scaled, param, d_p, nullptr, count, as_float(-lr)});
            continue;
        }
        float* exp_avg = state + b;
        float* exp_avg_sq = state + n + b;
        const float* g = grad;
        if (c.kind == OptimizerKind::adamw && wd != 0.0) {  // param.mul_(1 - lr wd)
            run(TensorOpCall{TensorOp::scale, param, nullptr, nullptr, count, as_float(1.0 - lr * wd)});
        } else if (wd != 0.0) {  // grad = grad.add(param, alpha=wd)
            run(TensorOpCall{TensorOp::plus_scaled, temp2, param, grad, count, as_float(wd)});
            g = temp2;
        }
        const double steps = static_cast<double>(step);
        const double bias_correction1 = 1.0 - std::pow(c.beta1, steps);
        const double bias_correction2 = 1.0 - std::pow(c.beta2, steps);
        run(TensorOpCall{TensorOp::scale, exp_avg, nullptr, nullptr, count, as_float(c.beta1)});
        run(TensorOpCall{TensorOp::add_scaled, exp_avg, g, nullptr, count, as_float(1.0 - c.beta1)});
        run(TensorOpCall{TensorOp::scale, exp_avg_sq, nullptr, nullptr, count, as_float(c.beta2)});
        run(TensorOpCall{TensorOp::add_scaled_square, exp_avg_sq, g, nullptr, count, as_float(1.0 - c.beta2)});
        // denom = (exp_avg_sq.sqrt() / sqrt(bias_correction2)).add_(eps)
        run(TensorOpCall{TensorOp::sqrt, temp, exp_avg_sq, nullptr, count, 0.0f});
        run(TensorOpCall{TensorOp::divide, temp, nullptr, nullptr, count, as_float(std::sqrt(bias_correction2))});
        run(TensorOpCall{TensorOp::add_constant, temp, nullptr, nullptr, count, as_float(c.resolved_eps())});
        run(TensorOpCall{TensorOp::addcdiv, param, exp_avg, temp, count, as_float(-(lr / bias_correction1))});
    }
}

}  // namespace trainbench
