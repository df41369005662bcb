// Element-wise activation forward/backward, bias add (when no cuBLASLt epilogue fits) and the
// bias gradient (a sum over the batch in fixed chunks, which also applies the backward of the
// activation after the linear op and rounds the output gradient for 16-bit products).
#include "backend/cuda/column_partials.cuh"
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

// The gradient g of an activation's output as its input's: g * act'(saved). ReLU passes g through
// untouched (or 0), so 16-bit values are not re-rounded.
__device__ __forceinline__ float activation_gradient(Activation kind, float g, float saved) {
    if (kind == Activation::relu) return saved > 0.0f ? g : 0.0f;
    return g * derivative(kind, saved);
}

template <typename T>
__global__ void activation_forward_kernel(Activation kind, const T* z, T* a, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
         i += int64_t(gridDim.x) * blockDim.x)
        a[i] = store_from_float<T>(activate(kind, load_as_float(z[i])));
}

// activation_forward_kernel a Pack8 at a time; a may alias z (each pack is read before it is written).
template <typename T>
__global__ void activation_forward_packed_kernel(Activation kind, const Pack8<T>* z, Pack8<T>* a, int64_t packs) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < packs; i += int64_t(gridDim.x) * blockDim.x) {
        Pack8<T> values = z[i];
#pragma unroll
        for (int k = 0; k < kPackValues; ++k) values.v[k] = store_from_float<T>(activate(kind, load_as_float(values.v[k])));
        a[i] = values;
    }
}

template <typename G, typename S>
__global__ void activation_backward_kernel(Activation kind, G* __restrict__ grad,
                                           const S* __restrict__ saved, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
         i += int64_t(gridDim.x) * blockDim.x) {
        // relu stores only its zeros, so the values it passes are left as they are.
        const float saved_value = load_as_float(saved[i]);
        if (kind == Activation::relu && saved_value > 0.0f) continue;
        grad[i] = store_from_float<G>(activation_gradient(kind, load_as_float(grad[i]), saved_value));
    }
}

template <typename Z, typename B>
__global__ void add_bias_kernel(Z* z, const B* __restrict__ bias, int64_t rows, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
         i += int64_t(gridDim.x) * blockDim.x)
        z[i] = store_from_float<Z>(load_as_float(z[i]) + load_as_float(bias[i % rows]));
}

// The bias gradient in two passes (column_partials.cuh): pass 1, block (32 features, chunk of
// samples); pass 2, each feature's chunk sums added in order, in double.

// dz [features x count] (fp32, a sample's features contiguous). Each value is first scaled by the
// activation's derivative where `saved` is given, then stored in `out` where that is given
// (rounded to Out: 16-bit codes, or fp32 in place), and summed as stored.
template <typename Saved, typename Out>
__global__ void bias_grad_partials_kernel(const float* dz, Activation kind, const Saved* __restrict__ saved, Out* out,
                                          int64_t features, int64_t count, float* __restrict__ partials) {
    const int64_t feature = blockIdx.x * int64_t(kPartialColumns) + threadIdx.x;
    const int64_t chunk = blockIdx.y;
    const int64_t end = chunk_begin(count, chunk + 1, kBiasSampleChunks);
    float sum[1] = {0.0f};
    if (feature < features)
#pragma unroll 4
        for (int64_t c = chunk_begin(count, chunk, kBiasSampleChunks) + threadIdx.y; c < end; c += kPartialLanes) {
            const int64_t i = c * features + feature;
            float value = dz[i];
            if (saved != nullptr) value = activation_gradient(kind, value, load_as_float(saved[i]));
            if (out != nullptr) {
                const Out stored = store_from_float<Out>(value);
                out[i] = stored;
                value = load_as_float(stored);
            }
            sum[0] += value;
        }
    add_lanes_in_order(sum);
    if (threadIdx.y == 0 && feature < features) partials[chunk * features + feature] = sum[0];
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
        if (packs_fit<T, T>(z, a, n)) {
            const int64_t packs = n / kPackValues;
            activation_forward_packed_kernel<T><<<grid_for(packs, kThreads), kThreads, 0, stream>>>(
                kind, static_cast<const Pack8<T>*>(z), static_cast<Pack8<T>*>(a), packs);
        } else {
            activation_forward_kernel<T><<<grid_for(n, kThreads), kThreads, 0, stream>>>(
                kind, static_cast<const T*>(z), static_cast<T*>(a), n);
        }
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

void bias_grad(const float* dz, int64_t features, int64_t count, const ActivationInBiasPass* activation, void* out,
               StorageType out_type, float* partials, float* grad_bias, bool accumulate, cudaStream_t stream) {
    if (features == 0) return;
    const dim3 block(kPartialColumns, kPartialLanes);
    const dim3 grid(static_cast<unsigned>((features + kPartialColumns - 1) / kPartialColumns),
                    static_cast<unsigned>(kBiasSampleChunks));
    const Activation kind = activation != nullptr ? activation->kind : Activation::relu;
    const void* saved = activation != nullptr ? activation->saved : nullptr;
    // Without an activation or an output the kernel never touches those pointers; their type is
    // then any (f32 instantiates the fewest kernels).
    dispatch_storage(activation != nullptr ? activation->saved_type : StorageType::f32, [&]<typename Saved>() {
        dispatch_storage(out != nullptr ? out_type : StorageType::f32, [&]<typename Out>() {
            bias_grad_partials_kernel<Saved, Out><<<grid, block, 0, stream>>>(
                dz, kind, static_cast<const Saved*>(saved), static_cast<Out*>(out), features, count, partials);
        });
    });
    TRAINBENCH_CUDA_CHECK_LAUNCH();
    bias_grad_sum_kernel<<<grid_for(features, kThreads), kThreads, 0, stream>>>(partials, features, grad_bias, accumulate);
    TRAINBENCH_CUDA_CHECK_LAUNCH();
}

}  // namespace trainbench::cuda
