// One fused kernel per optimizer: reads the accumulated gradient once, applies the
// grad_multiplier (loss-scale undo x clipping), runs the optimizer's element rule
// (optim/optimizer_rules.hpp, the CPU's too) and, for mixed precision, writes the refreshed
// 16-bit working copy in the same pass.
#include <type_traits>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/storage_types.cuh"
#include "optim/optimizer_rules.hpp"

namespace trainbench::cuda {
namespace {

constexpr int kThreads = 256;

// The gradient multiplier, applied in registers.
struct GradScale {
    float factor;
    bool scales;
};

template <typename T>
__device__ __forceinline__ void store_working_copy(void* params_16, int64_t i, float value) {
    if constexpr (!std::is_same_v<T, float>) static_cast<T*>(params_16)[i] = store_from_float<T>(value);
}

// The scaled gradient is used in registers and not written back, as on the CPU
// (optim/optimizer_step.cpp); the loop always zeroes the gradients before they are read again,
// so the kernel saves a full write of the gradient buffer.
__device__ __forceinline__ float scaled_grad(const float* grads, int64_t i, GradScale scale) {
    const float g = grads[i];
    return scale.scales ? g * scale.factor : g;
}

#define TRAINBENCH_FOR_EACH_ELEMENT(i, n) \
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)

template <typename T>
__global__ void sgd_kernel(float* params, const float* grads, float* momentum_buffer, int64_t n, int64_t decay_end,
                           void* params_16, GradScale scale, OptimizerScalars s) {
    TRAINBENCH_FOR_EACH_ELEMENT(i, n) {
        float buf = s.use_momentum ? momentum_buffer[i] : 0.0f;
        const float p = sgd_rule(params[i], scaled_grad(grads, i, scale), buf, s.decay && i < decay_end, s);
        if (s.use_momentum) momentum_buffer[i] = buf;
        params[i] = p;
        store_working_copy<T>(params_16, i, p);
    }
}

template <typename T>
__global__ void adam_kernel(float* params, const float* grads, float* exp_avg, float* exp_avg_sq, int64_t n,
                            int64_t decay_end, void* params_16, GradScale scale, OptimizerScalars s) {
    TRAINBENCH_FOR_EACH_ELEMENT(i, n) {
        float m = exp_avg[i], v = exp_avg_sq[i];
        const float p = adam_rule(params[i], scaled_grad(grads, i, scale), m, v, s.decay && i < decay_end, s);
        exp_avg[i] = m;
        exp_avg_sq[i] = v;
        params[i] = p;
        store_working_copy<T>(params_16, i, p);
    }
}

template <typename T>
__global__ void rmsprop_kernel(float* params, const float* grads, float* square_avg, float* momentum_buffer,
                               float* grad_avg, int64_t n, int64_t decay_end, void* params_16, GradScale scale,
                               OptimizerScalars s) {
    TRAINBENCH_FOR_EACH_ELEMENT(i, n) {
        float sq = square_avg[i];
        float buf = s.use_momentum ? momentum_buffer[i] : 0.0f;
        float average = s.centered ? grad_avg[i] : 0.0f;
        const float p = rmsprop_rule(params[i], scaled_grad(grads, i, scale), sq, buf, average, s.decay && i < decay_end, s);
        square_avg[i] = sq;
        if (s.use_momentum) momentum_buffer[i] = buf;
        if (s.centered) grad_avg[i] = average;
        params[i] = p;
        store_working_copy<T>(params_16, i, p);
    }
}

template <typename T>
__global__ void adagrad_kernel(float* params, const float* grads, float* state_sum, int64_t n, int64_t decay_end,
                               void* params_16, GradScale scale, OptimizerScalars s) {
    TRAINBENCH_FOR_EACH_ELEMENT(i, n) {
        float sum = state_sum[i];
        const float p = adagrad_rule(params[i], scaled_grad(grads, i, scale), sum, s.decay && i < decay_end, s);
        state_sum[i] = sum;
        params[i] = p;
        store_working_copy<T>(params_16, i, p);
    }
}

#undef TRAINBENCH_FOR_EACH_ELEMENT

}  // namespace

void optimizer_step_device(const OptimizerConfig& config, const OptimizerLaunch& launch,
                           double lr, double grad_multiplier, int64_t step, cudaStream_t stream) {
    if (launch.n == 0) return;
    if (step < 1) throw Error("optimizer step count must start at 1");
    const OptimizerScalars s = optimizer_scalars(config, lr, step);
    const GradScale scale{as_float(grad_multiplier), grad_multiplier != 1.0};
    const unsigned blocks = grid_for(launch.n, kThreads, 132 * 16);
    const int64_t n = launch.n;
    const int64_t decay_end = launch.decay_end < 0 || launch.decay_end > n ? n : launch.decay_end;
    float* state = launch.state;
    const StorageType type = launch.params_16 ? launch.type_16 : StorageType::f32;
    dispatch_storage(type, [&]<typename T>() {
        switch (config.kind) {
            case OptimizerKind::sgd:
                sgd_kernel<T><<<blocks, kThreads, 0, stream>>>(launch.params, launch.grads, state, n, decay_end,
                                                               launch.params_16, scale, s);
                break;
            case OptimizerKind::adam:
            case OptimizerKind::adamw:
                adam_kernel<T><<<blocks, kThreads, 0, stream>>>(launch.params, launch.grads, state, state + n, n,
                                                                decay_end, launch.params_16, scale, s);
                break;
            case OptimizerKind::rmsprop: {
                const RmspropBuffers buffers = rmsprop_buffers(config, state, n);
                rmsprop_kernel<T><<<blocks, kThreads, 0, stream>>>(launch.params, launch.grads, buffers.square_avg,
                                                                   buffers.momentum_buffer, buffers.grad_avg, n, decay_end,
                                                                   launch.params_16, scale, s);
                break;
            }
            case OptimizerKind::adagrad:
                adagrad_kernel<T><<<blocks, kThreads, 0, stream>>>(launch.params, launch.grads, state, n, decay_end,
                                                                   launch.params_16, scale, s);
                break;
        }
    });
    TRAINBENCH_CUDA_CHECK_LAUNCH();
}

}  // namespace trainbench::cuda
