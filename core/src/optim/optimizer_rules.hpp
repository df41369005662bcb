#pragma once
// The optimizers' element rules, written once for both backends: the CPU's one-pass update
// (optimizer_step.cpp) runs them in its vectorised loops, the GPU's (backend/cuda/
// optimizer_kernels.cu) in one kernel per optimizer. Each follows torch.optim's single-tensor
// algorithm (torch 1.13) operation by operation: torch evaluates every tensor op on float32 with
// its Python-float hyper-parameters cast to float, and derives its scalars (bias corrections,
// 1 - beta, Adagrad's decayed rate) in double first, as optimizer_scalars does. Mirroring that
// order keeps the trajectories within float rounding of PyTorch's.
//
// A rule takes one element's parameter and gradient (already multiplied by the loss-scale undo
// and clipping factor), reads and writes its state elements through references, and returns the
// new parameter. `decay`: the element belongs to the decayed group and the config decays. State a
// configuration does not keep (SGD without momentum, RMSprop's optional buffers) is neither read
// nor written.
#include <cmath>
#include <cstdint>

#include "optim/host_device.hpp"
#include "trainbench/run_config.hpp"

namespace trainbench {

// torch casts its Python-float hyper-parameters, and the scalars it derives from them in double,
// to float where a tensor op takes them.
inline float as_float(double value) { return static_cast<float>(value); }

// RMSprop's state: square_avg, then momentum_buffer (with momentum) and grad_avg (centered), each
// n floats, in that order (the order optimizer_state_name names them).
struct RmspropBuffers {
    float* square_avg;
    float* momentum_buffer;  // null without momentum
    float* grad_avg;         // null unless centered
};
inline RmspropBuffers rmsprop_buffers(const OptimizerConfig& config, float* state, int64_t n) {
    RmspropBuffers buffers{state, nullptr, nullptr};
    float* next = state + n;
    if (config.momentum > 0.0) {
        buffers.momentum_buffer = next;
        next += n;
    }
    if (config.centered) buffers.grad_avg = next;
    return buffers;
}

// One update's scalars, as the rules read them.
struct OptimizerScalars {
    bool decay = false;           // the config's weight decay is not zero
    float weight_decay = 0.0f;
    float eps = 0.0f;
    float neg_lr = 0.0f;          // Adagrad: minus its decayed rate
    // SGD
    bool use_momentum = false;    // SGD, RMSprop
    bool first_step = false;      // torch clones the gradient into the buffer
    bool nesterov = false;
    float momentum = 0.0f;        // SGD, RMSprop
    float one_minus_dampening = 0.0f;
    // Adam, AdamW
    bool decoupled = false;       // AdamW: shrink the parameter instead of adding to the gradient
    float shrink_factor = 1.0f;
    float beta1 = 0.0f, beta2 = 0.0f, one_minus_beta1 = 0.0f, one_minus_beta2 = 0.0f;
    float neg_step_size = 0.0f, bias_correction2_sqrt = 1.0f;
    // RMSprop
    bool centered = false;
    float alpha = 0.0f, one_minus_alpha = 0.0f;
};

// `step` counts applied updates, 1-based (an update the loss scaler skips does not count).
OptimizerScalars optimizer_scalars(const OptimizerConfig& config, double lr, int64_t step);

// The L2 weight-decay term, grad + weight_decay * param. On a CPU with FMA it is one rounding,
// what GCC (from -O2) contracts it to anyway, spelled out so that a gradient the CPU's loop
// scales as it reads it (optimizer_step.cpp) stays rounded before it is added, as torch's
// unscaled gradient is, instead of the compiler contracting that product into the sum. (Builds
// at -O1 and below, the sanitizers' among them, used to round the two terms apart; now they
// compute what Release does.) On the GPU the expression stays as written: the kernels' PTX is
// what it was before this.
TRAINBENCH_HOST_DEVICE inline float add_weight_decay(float grad, float weight_decay, float param) {
#if !defined(__CUDA_ARCH__) && (defined(__FMA__) || defined(__ARM_FEATURE_FMA))
    return std::fma(weight_decay, param, grad);
#else
    return grad + weight_decay * param;
#endif
}

TRAINBENCH_HOST_DEVICE inline float sgd_rule(float param, float grad, float& momentum_buffer, bool decay,
                                             const OptimizerScalars& s) {
    float d_p = grad;
    if (decay) d_p = add_weight_decay(d_p, s.weight_decay, param);
    if (s.use_momentum) {
        float buf;
        if (s.first_step) {
            buf = d_p;
        } else {
            buf = momentum_buffer * s.momentum;
            buf = buf + s.one_minus_dampening * d_p;
        }
        momentum_buffer = buf;
        d_p = s.nesterov ? d_p + s.momentum * buf : buf;
    }
    return param + s.neg_lr * d_p;
}

TRAINBENCH_HOST_DEVICE inline float adam_rule(float param, float grad, float& exp_avg, float& exp_avg_sq, bool decay,
                                              const OptimizerScalars& s) {
    if (s.decoupled && decay) param = param * s.shrink_factor;
    if (!s.decoupled && decay) grad = add_weight_decay(grad, s.weight_decay, param);
    float m = exp_avg * s.beta1;
    m = m + s.one_minus_beta1 * grad;
    float v = exp_avg_sq * s.beta2;
    v = v + s.one_minus_beta2 * grad * grad;
    exp_avg = m;
    exp_avg_sq = v;
    const float denom = std::sqrt(v) / s.bias_correction2_sqrt + s.eps;
    return param + s.neg_step_size * m / denom;
}

TRAINBENCH_HOST_DEVICE inline float rmsprop_rule(float param, float grad, float& square_avg, float& momentum_buffer,
                                                 float& grad_avg, bool decay, const OptimizerScalars& s) {
    if (decay) grad = add_weight_decay(grad, s.weight_decay, param);
    float sq = square_avg * s.alpha;
    sq = sq + s.one_minus_alpha * grad * grad;
    square_avg = sq;
    float avg;
    if (s.centered) {
        float ga = grad_avg * s.alpha;
        ga = ga + s.one_minus_alpha * grad;
        grad_avg = ga;
        avg = std::sqrt(sq - ga * ga);
    } else {
        avg = std::sqrt(sq);
    }
    avg = avg + s.eps;
    if (s.use_momentum) {
        float buf = momentum_buffer * s.momentum;
        buf = buf + grad / avg;
        momentum_buffer = buf;
        return param + s.neg_lr * buf;
    }
    return param + s.neg_lr * grad / avg;
}

TRAINBENCH_HOST_DEVICE inline float adagrad_rule(float param, float grad, float& sum, bool decay,
                                                 const OptimizerScalars& s) {
    if (decay) grad = add_weight_decay(grad, s.weight_decay, param);
    const float total = sum + grad * grad;
    sum = total;
    const float std_dev = std::sqrt(total) + s.eps;
    return param + s.neg_lr * grad / std_dev;
}

}  // namespace trainbench
