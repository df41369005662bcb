// The residual connection out = a + b and its gradient, which goes unchanged to both inputs:
// written by the first writer of each gradient, added by the others (the planner's modes).
#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/gpt_kernels.hpp"
#include "backend/cuda/storage_types.cuh"

namespace trainbench::cuda {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void residual_forward_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out,
                                        int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        out[i] = store_from_float<T>(load_as_float(a[i]) + load_as_float(b[i]));
}

__global__ void residual_backward_kernel(const float* __restrict__ dout, float* __restrict__ d_a, bool accumulate_a,
                                         float* __restrict__ d_b, bool accumulate_b, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const float g = dout[i];
        if (d_a != nullptr) d_a[i] = accumulate_a ? d_a[i] + g : g;
        if (d_b != nullptr) d_b[i] = accumulate_b ? d_b[i] + g : g;
    }
}

}  // namespace

void residual_forward(const void* a, const void* b, void* out, StorageType type, int64_t n, cudaStream_t stream) {
    if (n == 0) return;
    dispatch_storage(type, [&]<typename T>() {
        residual_forward_kernel<T><<<grid_for(n, kThreads), kThreads, 0, stream>>>(
            static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(out), n);
    });
    TRAINBENCH_CUDA_CHECK_LAUNCH();
}

void residual_backward(const float* dout, float* d_a, bool accumulate_a, float* d_b, bool accumulate_b, int64_t n,
                       cudaStream_t stream) {
    if (n == 0 || (d_a == nullptr && d_b == nullptr)) return;
    residual_backward_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(dout, d_a, accumulate_a, d_b,
                                                                             accumulate_b, n);
    TRAINBENCH_CUDA_CHECK_LAUNCH();
}

}  // namespace trainbench::cuda
