// Losses fused with their gradients: one pass computes each sample's loss (and, for
// classification, whether its arg-max is right) and d(grad_scale * loss)/d(outputs).
#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/storage_types.cuh"
#include "backend/cuda/warp_reductions.cuh"

namespace trainbench::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

// One warp per sample; lanes stride over the classes. The arithmetic follows nn/loss.cpp:
// float logit differences, exponentials, sums, the loss and the gradient in double, so the
// CUDA and CPU engines agree to double rounding rather than float rounding.
template <typename T>
__global__ void softmax_cross_entropy_kernel(const T* __restrict__ logits,
                                             const int32_t* __restrict__ labels, int64_t classes,
                                             int64_t count, float grad_scale, T* __restrict__ dlogits,
                                             double* __restrict__ sample_loss,
                                             int32_t* __restrict__ sample_correct) {
    const int lane = threadIdx.x % 32;
    const int64_t sample = blockIdx.x * int64_t(kWarpsPerBlock) + threadIdx.x / 32;
    if (sample >= count) return;  // the whole warp shares `sample`, so the shuffles stay full
    const T* z = logits + sample * classes;

    // Arg-max with the first index winning ties, as the CPU loss does.
    const ArgMax best = row_argmax(z, classes, lane);
    const float max_value = best.value;
    const int64_t max_index = best.index;

    double exp_sum = 0.0;
    for (int64_t c = lane; c < classes; c += 32)
        exp_sum += exp(static_cast<double>(load_as_float(z[c]) - max_value));
    exp_sum = warp_sum(exp_sum);

    const int32_t label = labels[sample];
    if (lane == 0) {
        sample_loss[sample] = log(exp_sum) - static_cast<double>(load_as_float(z[label]) - max_value);
        sample_correct[sample] = max_index == label ? 1 : 0;
    }
    if (dlogits != nullptr) {
        const double inverse_sum = 1.0 / exp_sum;
        T* g = dlogits + sample * classes;
        for (int64_t c = lane; c < classes; c += 32) {
            const double p = exp(static_cast<double>(load_as_float(z[c]) - max_value)) * inverse_sum;
            g[c] = store_from_float<T>(static_cast<float>((p - (c == label ? 1.0 : 0.0)) * grad_scale));
        }
    }
}

template <typename T>
__global__ void mean_squared_error_kernel(const T* __restrict__ outputs,
                                          const float* __restrict__ targets, int64_t count,
                                          float grad_scale, T* __restrict__ doutputs,
                                          double* __restrict__ sample_loss) {
    const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
    if (i >= count) return;
    const float diff = load_as_float(outputs[i]) - targets[i];
    sample_loss[i] = static_cast<double>(diff) * diff;
    if (doutputs != nullptr) doutputs[i] = store_from_float<T>(2.0f * diff * grad_scale);
}

}  // namespace

void softmax_cross_entropy(const void* logits, StorageType type, const int32_t* labels,
                           int64_t classes, int64_t count, float grad_scale, void* dlogits,
                           double* sample_loss, int32_t* sample_correct, cudaStream_t stream) {
    if (count == 0) return;
    const unsigned blocks = static_cast<unsigned>((count + kWarpsPerBlock - 1) / kWarpsPerBlock);
    dispatch_storage(type, [&]<typename T>() {
        softmax_cross_entropy_kernel<T><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(
            static_cast<const T*>(logits), labels, classes, count, grad_scale,
            static_cast<T*>(dlogits), sample_loss, sample_correct);
    });
    TRAINBENCH_CUDA_CHECK_LAUNCH();
}

void mean_squared_error(const void* outputs, StorageType type, const float* targets,
                        int64_t count, float grad_scale, void* doutputs, double* sample_loss,
                        cudaStream_t stream) {
    if (count == 0) return;
    constexpr int kThreads = 256;
    const unsigned blocks = static_cast<unsigned>((count + kThreads - 1) / kThreads);
    dispatch_storage(type, [&]<typename T>() {
        mean_squared_error_kernel<T><<<blocks, kThreads, 0, stream>>>(
            static_cast<const T*>(outputs), targets, count, grad_scale, static_cast<T*>(doutputs),
            sample_loss);
    });
    TRAINBENCH_CUDA_CHECK_LAUNCH();
}

}  // namespace trainbench::cuda
