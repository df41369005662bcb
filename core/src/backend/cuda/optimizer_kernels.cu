// One fused kernel per optimizer: reads the accumulated gradient once, applies the
// grad_multiplier (loss-scale undo x clipping), updates state and fp32 parameters, and for
// mixed precision writes the refreshed 16-bit working copy in the same pass. The float
// arithmetic follows optim/optimizer_step.cpp operation by operation.
#include <cmath>
#include <type_traits>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/storage_types.cuh"

namespace trainbench::cuda {
namespace {

constexpr int kThreads = 256;

struct StepScalars {
    float grad_factor;
    bool scale_grads;
    float weight_decay;
    bool decay;
    // sgd
    float momentum, one_minus_dampening;
    bool use_momentum, first_step, nesterov;
    // adam / adamw
    bool decoupled;
    float shrink_factor, beta1, beta2, one_minus_beta1, one_minus_beta2, neg_step_size,
        bias_correction2_sqrt;
    // rmsprop
    float alpha, one_minus_alpha;
    bool centered;
    // all
    float eps, neg_lr;
};

template <typename T>
__device__ __forceinline__ void store_working_copy(void* params_16, int64_t i, float value) {
    if constexpr (!std::is_same_v<T, float>) static_cast<T*>(params_16)[i] = store_from_float<T>(value);
}

// The scaled gradient is used in registers and not written back (the CPU rule scales the
// buffer in place); the loop always zeroes the gradients before they are read again, so the
// update is the same and the kernel saves a full write of the gradient buffer.
__device__ __forceinline__ float scaled_grad(const float* grads, int64_t i, const StepScalars& s) {
    const float g = grads[i];
    return s.scale_grads ? g * s.grad_factor : g;
}

template <typename T>
__global__ void sgd_kernel(float* params, const float* grads, float* momentum_buffer, int64_t n,
                           int64_t decay_end, void* params_16, StepScalars s) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
         i += int64_t(gridDim.x) * blockDim.x) {
        float d_p = scaled_grad(grads, i, s);
        if (s.decay && i < decay_end) d_p = d_p + s.weight_decay * params[i];
        if (s.use_momentum) {
            float buf;
            if (s.first_step) {
                buf = d_p;
            } else {
                buf = momentum_buffer[i] * s.momentum;
                buf = buf + s.one_minus_dampening * d_p;
            }
            momentum_buffer[i] = buf;
            d_p = s.nesterov ? d_p + s.momentum * buf : buf;
        }
        const float p = params[i] + s.neg_lr * d_p;
        params[i] = p;
        store_working_copy<T>(params_16, i, p);
    }
}

template <typename T>
__global__ void adam_kernel(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                            int64_t n, int64_t decay_end, void* params_16, StepScalars s) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
         i += int64_t(gridDim.x) * blockDim.x) {
        const bool decay = s.decay && i < decay_end;
        float param = params[i];
        if (s.decoupled && decay) param = param * s.shrink_factor;
        float grad = scaled_grad(grads, i, s);
        if (!s.decoupled && decay) grad = grad + s.weight_decay * param;
        float m = exp_avg[i] * s.beta1;
        m = m + s.one_minus_beta1 * grad;
        float v = exp_avg_sq[i] * s.beta2;
        v = v + s.one_minus_beta2 * grad * grad;
        exp_avg[i] = m;
        exp_avg_sq[i] = v;
        const float denom = sqrtf(v) / s.bias_correction2_sqrt + s.eps;
        const float p = param + s.neg_step_size * m / denom;
        params[i] = p;
        store_working_copy<T>(params_16, i, p);
    }
}

template <typename T>
__global__ void rmsprop_kernel(float* params, const float* grads, float* square_avg,
                               float* momentum_buffer, float* grad_avg, int64_t n,
                               int64_t decay_end, void* params_16, StepScalars s) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
         i += int64_t(gridDim.x) * blockDim.x) {
        float grad = scaled_grad(grads, i, s);
        if (s.decay && i < decay_end) grad = grad + s.weight_decay * params[i];
        float sq = square_avg[i] * s.alpha;
        sq = sq + s.one_minus_alpha * grad * grad;
        square_avg[i] = sq;
        float avg;
        if (s.centered) {
            float ga = grad_avg[i] * s.alpha;
            ga = ga + s.one_minus_alpha * grad;
            grad_avg[i] = ga;
            avg = sqrtf(sq - ga * ga);
        } else {
            avg = sqrtf(sq);
        }
        avg = avg + s.eps;
        float p;
        if (s.use_momentum) {
            float buf = momentum_buffer[i] * s.momentum;
            buf = buf + grad / avg;
            momentum_buffer[i] = buf;
            p = params[i] + s.neg_lr * buf;
        } else {
            p = params[i] + s.neg_lr * grad / avg;
        }
        params[i] = p;
        store_working_copy<T>(params_16, i, p);
    }
}

template <typename T>
__global__ void adagrad_kernel(float* params, const float* grads, float* state_sum, int64_t n,
                               int64_t decay_end, void* params_16, StepScalars s) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
         i += int64_t(gridDim.x) * blockDim.x) {
        float grad = scaled_grad(grads, i, s);
        if (s.decay && i < decay_end) grad = grad + s.weight_decay * params[i];
        const float sum = state_sum[i] + grad * grad;
        state_sum[i] = sum;
        const float std_dev = sqrtf(sum) + s.eps;
        // neg_lr holds -clr here (Adagrad's decayed rate).
        const float p = params[i] + s.neg_lr * grad / std_dev;
        params[i] = p;
        store_working_copy<T>(params_16, i, p);
    }
}

float as_float(double value) { return static_cast<float>(value); }

StepScalars step_scalars(const OptimizerConfig& config, double lr, double grad_multiplier,
                         int64_t step) {
    StepScalars s{};
    s.grad_factor = as_float(grad_multiplier);
    s.scale_grads = grad_multiplier != 1.0;
    const double weight_decay = config.resolved_weight_decay();
    s.weight_decay = as_float(weight_decay);
    s.decay = weight_decay != 0.0;
    s.eps = as_float(config.resolved_eps());
    s.neg_lr = as_float(-lr);
    switch (config.kind) {
        case OptimizerKind::sgd:
            s.use_momentum = config.momentum != 0.0;
            s.first_step = step == 1;
            s.nesterov = config.nesterov;
            s.momentum = as_float(config.momentum);
            s.one_minus_dampening = as_float(1.0 - config.dampening);
            break;
        case OptimizerKind::adam:
        case OptimizerKind::adamw: {
            s.decoupled = config.kind == OptimizerKind::adamw;
            s.shrink_factor = as_float(1.0 - lr * weight_decay);
            const double steps = static_cast<double>(step);
            const double bias_correction1 = 1.0 - std::pow(config.beta1, steps);
            const double bias_correction2 = 1.0 - std::pow(config.beta2, steps);
            s.neg_step_size = as_float(-(lr / bias_correction1));
            s.bias_correction2_sqrt = as_float(std::sqrt(bias_correction2));
            s.beta1 = as_float(config.beta1);
            s.beta2 = as_float(config.beta2);
            s.one_minus_beta1 = as_float(1.0 - config.beta1);
            s.one_minus_beta2 = as_float(1.0 - config.beta2);
            break;
        }
        case OptimizerKind::rmsprop:
            s.centered = config.centered;
            s.use_momentum = config.momentum > 0.0;
            s.momentum = as_float(config.momentum);
            s.alpha = as_float(config.alpha);
            s.one_minus_alpha = as_float(1.0 - config.alpha);
            break;
        case OptimizerKind::adagrad:
            s.neg_lr = as_float(-(lr / (1.0 + static_cast<double>(step - 1) * config.lr_decay)));
            break;
    }
    return s;
}

}  // namespace

void optimizer_step_device(const OptimizerConfig& config, const OptimizerLaunch& launch,
                           double lr, double grad_multiplier, int64_t step, cudaStream_t stream) {
    if (launch.n == 0) return;
    if (step < 1) throw Error("optimizer step count must start at 1");
    const StepScalars s = step_scalars(config, lr, grad_multiplier, step);
    const unsigned blocks = grid_for(launch.n, kThreads, 132 * 16);
    const int64_t n = launch.n;
    const int64_t decay_end = launch.decay_end < 0 || launch.decay_end > n ? n : launch.decay_end;
    float* state = launch.state;
    const StorageType type = launch.params_16 ? launch.type_16 : StorageType::f32;
    dispatch_storage(type, [&]<typename T>() {
        switch (config.kind) {
            case OptimizerKind::sgd:
                sgd_kernel<T><<<blocks, kThreads, 0, stream>>>(launch.params, launch.grads, state,
                                                               n, decay_end, launch.params_16, s);
                break;
            case OptimizerKind::adam:
            case OptimizerKind::adamw:
                adam_kernel<T><<<blocks, kThreads, 0, stream>>>(launch.params, launch.grads, state,
                                                                state + n, n, decay_end, launch.params_16, s);
                break;
            case OptimizerKind::rmsprop: {
                // Slot order as optim/optimizer_step.cpp: square_avg, [momentum_buffer], [grad_avg].
                float* next = state + n;
                float* momentum_buffer = nullptr;
                if (config.momentum > 0.0) {
                    momentum_buffer = next;
                    next += n;
                }
                float* grad_avg = config.centered ? next : nullptr;
                rmsprop_kernel<T><<<blocks, kThreads, 0, stream>>>(
                    launch.params, launch.grads, state, momentum_buffer, grad_avg, n, decay_end,
                    launch.params_16, s);
                break;
            }
            case OptimizerKind::adagrad:
                adagrad_kernel<T><<<blocks, kThreads, 0, stream>>>(launch.params, launch.grads,
                                                                   state, n, decay_end, launch.params_16, s);
                break;
        }
    });
    TRAINBENCH_CUDA_CHECK_LAUNCH();
}

}  // namespace trainbench::cuda
