// Deterministic reductions: every element goes to a fixed thread, and partial sums are
// combined in a fixed tree, so the same inputs give the same bits on every run.
#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/storage_types.cuh"

namespace trainbench::cuda {
namespace {

constexpr int kThreads = 512;

// Tree sum of one value per thread; the result is valid in thread 0.
__device__ double block_sum(double value, double* shared) {
    shared[threadIdx.x] = value;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) shared[threadIdx.x] += shared[threadIdx.x + stride];
        __syncthreads();
    }
    return shared[0];
}

__global__ void sum_sample_losses_kernel(const double* __restrict__ sample_loss,
                                         const int32_t* __restrict__ sample_correct,
                                         int64_t count, double* __restrict__ totals) {
    __shared__ double shared[kThreads];
    double loss = 0.0, correct = 0.0;
    for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
        loss += sample_loss[i];
        if (sample_correct != nullptr) correct += sample_correct[i];
    }
    const double loss_total = block_sum(loss, shared);
    __syncthreads();
    const double correct_total = block_sum(correct, shared);
    if (threadIdx.x == 0) {
        totals[0] = loss_total;
        totals[1] = correct_total;
    }
}

__global__ void sum_squares_partial_kernel(const float* __restrict__ values, int64_t n,
                                           double* __restrict__ partials) {
    __shared__ double shared[kThreads];
    double sum = 0.0;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
         i += int64_t(gridDim.x) * blockDim.x) {
        const double v = values[i];
        sum += v * v;
    }
    const double total = block_sum(sum, shared);
    if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ void sum_partials_kernel(const double* __restrict__ partials, int count,
                                    double* __restrict__ result) {
    __shared__ double shared[kThreads];
    double sum = 0.0;
    for (int i = threadIdx.x; i < count; i += blockDim.x) sum += partials[i];
    const double total = block_sum(sum, shared);
    if (threadIdx.x == 0) *result = total;
}

}  // namespace

void sum_sample_losses(const double* sample_loss, const int32_t* sample_correct, int64_t count,
                       double* totals, cudaStream_t stream) {
    sum_sample_losses_kernel<<<1, kThreads, 0, stream>>>(sample_loss, sample_correct, count, totals);
    TRAINBENCH_CUDA_CHECK_LAUNCH();
}

void sum_of_squares(const float* values, int64_t n, double* partials, double* result,
                    cudaStream_t stream) {
    sum_squares_partial_kernel<<<kSumSquaresPartials, kThreads, 0, stream>>>(values, n, partials);
    TRAINBENCH_CUDA_CHECK_LAUNCH();
    sum_partials_kernel<<<1, kThreads, 0, stream>>>(partials, kSumSquaresPartials, result);
    TRAINBENCH_CUDA_CHECK_LAUNCH();
}

}  // namespace trainbench::cuda
