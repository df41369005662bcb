// Element-wise activation forward/backward, bias add (when no cuBLASLt epilogue fits) and the
// bias gradient (a sum over the batch in fixed chunks, fused with the rounding of the output
// gradient for 16-bit products).
#include <stdexcept>
#include <type_traits>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/storage_types.cuh"

namespace trainbench::cuda {
namespace {

constexpr int kThreads = 256;
constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;

// Same formulas as nn/activation.cpp (GELU with erf, as torch.nn.GELU's default).
__device__ __forceinline__ float activate(Activation kind, float z) {
    switch (kind) {
        case Activation::relu: return z > 0.0f ? z : 0.0f;
        case Activation::gelu: return 0.5f * z * (1.0f + erff(z * kInvSqrt2));
        case Activation::tanh: return tanhf(z);
        case Activation::sigmoid: return 1.0f / (1.0f + expf(-z));
    }
    return z;
}

__device__ __forceinline__ float derivative(Activation kind, float saved) {
    switch (kind) {
        case Activation::relu: return saved > 0.0f ? 1.0f : 0.0f;
        case Activation::gelu: {
            const float cdf = 0.5f * (1.0f + erff(saved * kInvSqrt2));
            const float pdf = kInvSqrt2Pi * expf(-0.5f * saved * saved);
            return cdf + saved * pdf;
        }
        case Activation::tanh: return 1.0f - saved * saved;
        case Activation::sigmoid: return saved * (1.0f - saved);
    }
    return 1.0f;
}

template <typename T>
__global__ void activation_forward_kernel(Activation kind, const T* z, T* a, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
         i += int64_t(gridDim.x) * blockDim.x)
        a[i] = store_from_float<T>(activate(kind, load_as_float(z[i])));
}

template <typename G, typename S>
__global__ void activation_backward_kernel(Activation kind, G* __restrict__ grad,
                                           const S* __restrict__ saved, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
         i += int64_t(gridDim.x) * blockDim.x) {
        const float g = load_as_float(grad[i]);
        // relu passes the gradient through untouched, so 16-bit values are not re-rounded.
        if (kind == Activation::relu) {
            if (!(load_as_float(saved[i]) > 0.0f)) grad[i] = store_from_float<G>(0.0f);
        } else {
            grad[i] = store_from_float<G>(g * derivative(kind, load_as_float(saved[i])));
        }
    }
}

template <typename Z, typename B>
__global__ void add_bias_kernel(Z* z, const B* __restrict__ bias, int64_t rows, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
         i += int64_t(gridDim.x) * blockDim.x)
        z[i] = store_from_float<Z>(load_as_float(z[i]) + load_as_float(bias[i % rows]));
}

// The bias gradient in two passes, so that it has many blocks however few the features (one block
// per 32 features left 12 blocks for 384 on an H200's 132 SMs, 20 us a pass). Pass 1: block
// (32 features, chunk of samples); its 8 thread rows take every 8th sample of the chunk, their
// sums added in a fixed order. Pass 2: each feature's chunk sums added in order, in double.
constexpr int kBiasFeatures = 32;
constexpr int kBiasLanes = 8;

// dz [features x count] (fp32, a sample's features contiguous). With Rounded not float, each value
// is rounded as it is read and stored in `rounded`, and the rounded values are summed.
template <typename Rounded>
__global__ void bias_grad_partials_kernel(const float* __restrict__ dz, int64_t features, int64_t count,
                                          Rounded* __restrict__ rounded, float* __restrict__ partials) {
    __shared__ float lane_sums[kBiasLanes][kBiasFeatures + 1];
    const int64_t feature = blockIdx.x * int64_t(kBiasFeatures) + threadIdx.x;
    const int64_t chunk = blockIdx.y;
    const int64_t first = count * chunk / kBiasSampleChunks, end = count * (chunk + 1) / kBiasSampleChunks;
    float sum = 0.0f;
    if (feature < features)
#pragma unroll 4
        for (int64_t c = first + threadIdx.y; c < end; c += kBiasLanes) {
            float value = dz[c * features + feature];
            if constexpr (!std::is_same_v<Rounded, float>) {
                const Rounded code = store_from_float<Rounded>(value);
                rounded[c * features + feature] = code;
                value = load_as_float(code);
            }
            sum += value;
        }
    lane_sums[threadIdx.y][threadIdx.x] = sum;
    __syncthreads();
    if (threadIdx.y == 0 && feature < features) {
        float total = 0.0f;
        for (int lane = 0; lane < kBiasLanes; ++lane) total += lane_sums[lane][threadIdx.x];
        partials[chunk * features + feature] = total;
    }
}

__global__ void bias_grad_sum_kernel(const float* __restrict__ partials, int64_t features, float* __restrict__ grad_bias,
                                     bool accumulate) {
    const int64_t feature = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
    if (feature >= features) return;
    double sum = 0.0;
#pragma unroll 16
    for (int64_t chunk = 0; chunk < kBiasSampleChunks; ++chunk) sum += partials[chunk * features + feature];
    grad_bias[feature] = accumulate ? grad_bias[feature] + static_cast<float>(sum) : static_cast<float>(sum);
}

}  // namespace

void add_bias(void* z, StorageType z_type, const void* bias, StorageType bias_type, int64_t rows,
              int64_t cols, cudaStream_t stream) {
    const int64_t n = rows * cols;
    if (n == 0) return;
    dispatch_storage(z_type, [&]<typename Z>() {
        dispatch_storage(bias_type, [&]<typename B>() {
            add_bias_kernel<Z, B><<<grid_for(n, kThreads), kThreads, 0, stream>>>(
                static_cast<Z*>(z), static_cast<const B*>(bias), rows, n);
        });
    });
    TRAINBENCH_CUDA_CHECK_LAUNCH();
}

void activation_forward(Activation kind, const void* z, void* a, StorageType type, int64_t n,
                        cudaStream_t stream) {
    if (n == 0) return;
    dispatch_storage(type, [&]<typename T>() {
        activation_forward_kernel<T><<<grid_for(n, kThreads), kThreads, 0, stream>>>(
            kind, static_cast<const T*>(z), static_cast<T*>(a), n);
    });
    TRAINBENCH_CUDA_CHECK_LAUNCH();
}

void activation_backward(Activation kind, void* grad, StorageType grad_type, const void* saved,
                         StorageType saved_type, int64_t n, cudaStream_t stream) {
    if (n == 0) return;
    dispatch_storage(grad_type, [&]<typename G>() {
        dispatch_storage(saved_type, [&]<typename S>() {
            activation_backward_kernel<G, S><<<grid_for(n, kThreads), kThreads, 0, stream>>>(
                kind, static_cast<G*>(grad), static_cast<const S*>(saved), n);
        });
    });
    TRAINBENCH_CUDA_CHECK_LAUNCH();
}

void bias_grad(const float* dz, int64_t features, int64_t count, void* rounded, StorageType rounded_type,
               float* partials, float* grad_bias, bool accumulate, cudaStream_t stream) {
    if (features == 0) return;
    if (rounded != nullptr && rounded_type == StorageType::f32)
        throw std::logic_error("bias_grad: the rounded copy of the gradient is for 16-bit products only");
    const dim3 block(kBiasFeatures, kBiasLanes);
    const dim3 grid(static_cast<unsigned>((features + kBiasFeatures - 1) / kBiasFeatures),
                    static_cast<unsigned>(kBiasSampleChunks));
    auto partial_sums = [&]<typename Rounded>() {
        bias_grad_partials_kernel<Rounded><<<grid, block, 0, stream>>>(dz, features, count, static_cast<Rounded*>(rounded),
                                                                       partials);
    };
    if (rounded == nullptr) partial_sums.template operator()<float>();
    else dispatch_storage(rounded_type, partial_sums);
    TRAINBENCH_CUDA_CHECK_LAUNCH();
    bias_grad_sum_kernel<<<grid_for(features, kThreads), kThreads, 0, stream>>>(partials, features, grad_bias, accumulate);
    TRAINBENCH_CUDA_CHECK_LAUNCH();
}

}  // namespace trainbench::cuda
