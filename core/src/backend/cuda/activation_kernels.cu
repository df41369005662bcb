// Element-wise activation forward/backward, bias add (when no cuBLASLt epilogue fits) and the
// bias gradient (a row sum over the batch, accumulated in fp32).
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

// A 32 x 32 block owns 32 rows; its 32 thread rows stride over the columns, then add their
// partial sums in a fixed order, so the result does not depend on scheduling.
constexpr int kBiasTile = 32;

template <typename T>
__global__ void bias_grad_kernel(const T* __restrict__ dz, int64_t rows, int64_t cols,
                                 float* __restrict__ grad_bias, bool accumulate) {
    __shared__ float partial[kBiasTile][kBiasTile + 1];
    const int64_t row = blockIdx.x * int64_t(kBiasTile) + threadIdx.x;
    float sum = 0.0f;
    if (row < rows) {
        for (int64_t c = threadIdx.y; c < cols; c += kBiasTile) sum += load_as_float(dz[c * rows + row]);
    }
    partial[threadIdx.y][threadIdx.x] = sum;
    __syncthreads();
    if (threadIdx.y == 0 && row < rows) {
        float total = 0.0f;
        for (int y = 0; y < kBiasTile; ++y) total += partial[y][threadIdx.x];
        grad_bias[row] = accumulate ? grad_bias[row] + total : total;
    }
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

void bias_grad(const void* dz, StorageType type, int64_t rows, int64_t cols, float* grad_bias,
               bool accumulate, cudaStream_t stream) {
    if (rows == 0 || cols == 0) return;
    const dim3 block(kBiasTile, kBiasTile);
    const dim3 grid(static_cast<unsigned>((rows + kBiasTile - 1) / kBiasTile));
    dispatch_storage(type, [&]<typename T>() {
        bias_grad_kernel<T><<<grid, block, 0, stream>>>(static_cast<const T*>(dz), rows, cols,
                                                        grad_bias, accumulate);
    });
    TRAINBENCH_CUDA_CHECK_LAUNCH();
}

}  // namespace trainbench::cuda
