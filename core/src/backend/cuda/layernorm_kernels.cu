// LayerNorm forward and backward with the per-row arithmetic of nn/layernorm.cpp (statistics
// summed in double). The parameter gradients are summed over fixed chunks of rows (within a chunk
// in 8 interleaved lanes, added in order; the CPU adds a chunk's rows one after another) and then
// over the chunks in order, so the result depends on neither scheduling nor the GPU's size.
#include <algorithm>

#include "backend/cuda/column_partials.cuh"
#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/gpt_kernels.hpp"
#include "backend/cuda/storage_types.cuh"
#include "backend/cuda/warp_reductions.cuh"
#include "nn/layernorm.hpp"

namespace trainbench::cuda {
namespace {

constexpr int kRowsPerBlock = 8;  // one warp per row
constexpr int kColumnThreads = 256;
// As nn/layernorm.cpp's kRowChunks, so the planner's scratch (layernorm_backward_scratch_floats)
// holds the partial sums.
constexpr int64_t kRowChunks = kLayerNormRowChunks;

// The rest of a row's LayerNorm once each lane has summed its elements of x (lane, lane + 32, ...)
// into `sum`: the mean and rstd (statistics in double) and y = (x - mean) * rstd * weight + bias.
// Each lane reads its own elements of x before writing the same ones of y, so y may alias x.
template <typename X, typename Y>
__device__ __forceinline__ void normalise_row(const X* x, double sum, const float* __restrict__ weight,
                                              const float* __restrict__ bias, Y* y, float* __restrict__ mean,
                                              float* __restrict__ rstd, int64_t row, int64_t C, int lane) {
    const double m = warp_sum(sum) / static_cast<double>(C);
    double squares = 0.0;
    for (int64_t i = lane; i < C; i += 32) {
        const double d = static_cast<double>(load_as_float(x[i])) - m;
        squares += d * d;
    }
    squares = warp_sum(squares);
    const float mu = static_cast<float>(m);
    const float rs = static_cast<float>(1.0 / sqrt(squares / static_cast<double>(C) + kLayerNormEps));
    if (lane == 0) {
        mean[row] = mu;
        rstd[row] = rs;
    }
    for (int64_t i = lane; i < C; i += 32) y[i] = store_from_float<Y>((load_as_float(x[i]) - mu) * rs * weight[i] + bias[i]);
}

// No __restrict__ on inp/out: they may alias (each lane reads x[i] before writing y[i]). X and Y
// are the storage types of the input and output (fp32, or 16-bit codes computed on in fp32).
template <typename X, typename Y>
__global__ void layernorm_forward_kernel(const X* inp, const float* __restrict__ weight,
                                         const float* __restrict__ bias, Y* out, float* __restrict__ mean,
                                         float* __restrict__ rstd, int64_t rows, int64_t C) {
    const int lane = threadIdx.x % 32;
    const int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / 32;
    if (row >= rows) return;  // whole warps leave together, so the shuffles stay full
    const X* x = inp + row * C;
    double sum = 0.0;
    for (int64_t i = lane; i < C; i += 32) sum += load_as_float(x[i]);
    normalise_row(x, sum, weight, bias, out + row * C, mean, rstd, row, C, lane);
}

// --fused on: the residual add before a LayerNorm and the LayerNorm itself in one pass (nn/
// layernorm.cpp's residual_layernorm_forward). Each lane writes its elements of the sum, rounded
// to the sum's storage as the residual op would, and normalises what it wrote, so the results
// are the unfused ops' bit for bit.
template <typename T, typename Y>
__global__ void residual_layernorm_forward_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ sum_out,
                                                  const float* __restrict__ weight, const float* __restrict__ bias,
                                                  Y* __restrict__ out, float* __restrict__ mean,
                                                  float* __restrict__ rstd, int64_t rows, int64_t C) {
    const int lane = threadIdx.x % 32;
    const int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / 32;
    if (row >= rows) return;
    const T* xa = a + row * C;
    const T* xb = b + row * C;
    T* x = sum_out + row * C;
    double sum = 0.0;
    for (int64_t i = lane; i < C; i += 32) {
        const T value = store_from_float<T>(load_as_float(xa[i]) + load_as_float(xb[i]));
        x[i] = value;
        sum += load_as_float(value);
    }
    normalise_row(x, sum, weight, bias, out + row * C, mean, rstd, row, C, lane);
}

// dinp = rstd * (dn - mean(dn) - n * mean(dn * n)) with n = (x - mean) * rstd, dn = weight * dout.
// dinp may alias dout (each lane reads dy[i] before writing dx[i]).
template <typename X>
__global__ void layernorm_input_grad_kernel(const float* dout, const X* __restrict__ inp,
                                            const float* __restrict__ weight, const float* __restrict__ mean,
                                            const float* __restrict__ rstd, float* dinp, int64_t rows, int64_t C,
                                            bool accumulate) {
    const int lane = threadIdx.x % 32;
    const int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / 32;
    if (row >= rows) return;
    const X* x = inp + row * C;
    const float* dy = dout + row * C;
    float* dx = dinp + row * C;
    const float mu = mean[row], rs = rstd[row];
    double sum_dn = 0.0, sum_dn_n = 0.0;
    for (int64_t i = lane; i < C; i += 32) {
        const float n = (load_as_float(x[i]) - mu) * rs;
        const float dn = weight[i] * dy[i];
        sum_dn += dn;
        sum_dn_n += static_cast<double>(dn) * n;
    }
    const float mean_dn = static_cast<float>(warp_sum(sum_dn) / static_cast<double>(C));
    const float mean_dn_n = static_cast<float>(warp_sum(sum_dn_n) / static_cast<double>(C));
    for (int64_t i = lane; i < C; i += 32) {
        const float n = (load_as_float(x[i]) - mu) * rs;
        const float value = (weight[i] * dy[i] - mean_dn - n * mean_dn_n) * rs;
        dx[i] = accumulate ? dx[i] + value : value;
    }
}

// The parameter gradients' first pass (column_partials.cuh): block (32 columns, chunk of rows).
// One thread per column and chunk instead (C x 64 threads, 768 warps for C = 384 on an H200's
// 132 SMs) left each waiting on its loads.
template <typename X>
__global__ void layernorm_param_partials_kernel(const float* __restrict__ dout, const X* __restrict__ inp,
                                                const float* __restrict__ mean, const float* __restrict__ rstd,
                                                int64_t rows, int64_t C, int64_t chunks,
                                                float* __restrict__ partials) {
    const int64_t i = blockIdx.x * int64_t(kPartialColumns) + threadIdx.x;
    const int64_t chunk = blockIdx.y;
    const int64_t end = chunk_begin(rows, chunk + 1, chunks);
    float sums[2] = {0.0f, 0.0f};  // dweight's, dbias's
    if (i < C)
#pragma unroll 4
        for (int64_t r = chunk_begin(rows, chunk, chunks) + threadIdx.y; r < end; r += kPartialLanes) {
            const float dy = dout[r * C + i];
            const float n = (load_as_float(inp[r * C + i]) - mean[r]) * rstd[r];
            sums[0] += dy * n;
            sums[1] += dy;
        }
    add_lanes_in_order(sums);
    if (threadIdx.y != 0 || i >= C) return;
    partials[chunk * 2 * C + i] = sums[0];
    partials[chunk * 2 * C + C + i] = sums[1];
}

__global__ void layernorm_param_sum_kernel(const float* __restrict__ partials, int64_t C, int64_t chunks,
                                           float* __restrict__ dweight, float* __restrict__ dbias,
                                           bool accumulate) {
    const int64_t i = blockIdx.x * int64_t(kColumnThreads) + threadIdx.x;
    if (i >= C) return;
    double sum_w = 0.0, sum_b = 0.0;
    // Two blocks for a width of 384: the loads of 16 chunks in flight at once, not one at a time.
#pragma unroll 16
    for (int64_t c = 0; c < chunks; ++c) {
        sum_w += partials[c * 2 * C + i];
        sum_b += partials[c * 2 * C + C + i];
    }
    dweight[i] = accumulate ? dweight[i] + static_cast<float>(sum_w) : static_cast<float>(sum_w);
    dbias[i] = accumulate ? dbias[i] + static_cast<float>(sum_b) : static_cast<float>(sum_b);
}

unsigned row_blocks(int64_t rows) { return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock); }
unsigned column_blocks(int64_t C) { return static_cast<unsigned>((C + kColumnThreads - 1) / kColumnThreads); }

}  // namespace

void layernorm_forward(const void* inp, StorageType inp_type, const float* weight, const float* bias, void* out,
                       StorageType out_type, float* mean, float* rstd, int64_t rows, int64_t C, cudaStream_t stream) {
    if (rows == 0 || C == 0) return;
    dispatch_storage(inp_type, [&]<typename X>() {
        dispatch_storage(out_type, [&]<typename Y>() {
            layernorm_forward_kernel<X, Y><<<row_blocks(rows), kRowsPerBlock * 32, 0, stream>>>(
                static_cast<const X*>(inp), weight, bias, static_cast<Y*>(out), mean, rstd, rows, C);
        });
    });
    TRAINBENCH_CUDA_CHECK_LAUNCH();
}

void residual_layernorm_forward(const void* a, const void* b, void* sum, StorageType sum_type, const float* weight,
                                const float* bias, void* out, StorageType out_type, float* mean, float* rstd,
                                int64_t rows, int64_t C, cudaStream_t stream) {
    if (rows == 0 || C == 0) return;
    dispatch_storage(sum_type, [&]<typename T>() {
        dispatch_storage(out_type, [&]<typename Y>() {
            residual_layernorm_forward_kernel<T, Y><<<row_blocks(rows), kRowsPerBlock * 32, 0, stream>>>(
                static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(sum), weight, bias,
                static_cast<Y*>(out), mean, rstd, rows, C);
        });
    });
    TRAINBENCH_CUDA_CHECK_LAUNCH();
}


void layernorm_backward(const float* dout, const void* inp, StorageType inp_type, const float* weight,
                        const float* mean, const float* rstd, float* dinp, float* dweight, float* dbias, int64_t rows,
                        int64_t C, bool accumulate_input, bool accumulate_params, float* scratch, cudaStream_t stream) {
    if (rows == 0 || C == 0) return;
    // The parameter sums read dout first: dinp may overwrite it in place.
    const int64_t chunks = std::min(rows, kRowChunks);
    dispatch_storage(inp_type, [&]<typename X>() {
        const dim3 grid(static_cast<unsigned>((C + kPartialColumns - 1) / kPartialColumns), static_cast<unsigned>(chunks));
        layernorm_param_partials_kernel<X><<<grid, dim3(kPartialColumns, kPartialLanes), 0, stream>>>(
            dout, static_cast<const X*>(inp), mean, rstd, rows, C, chunks, scratch);
    });
    TRAINBENCH_CUDA_CHECK_LAUNCH();
    layernorm_param_sum_kernel<<<column_blocks(C), kColumnThreads, 0, stream>>>(scratch, C, chunks, dweight, dbias,
                                                                                accumulate_params);
    TRAINBENCH_CUDA_CHECK_LAUNCH();
    if (dinp == nullptr) return;
    dispatch_storage(inp_type, [&]<typename X>() {
        layernorm_input_grad_kernel<X><<<row_blocks(rows), kRowsPerBlock * 32, 0, stream>>>(
            dout, static_cast<const X*>(inp), weight, mean, rstd, dinp, rows, C, accumulate_input);
    });
    TRAINBENCH_CUDA_CHECK_LAUNCH();
}

}  // namespace trainbench::cuda
