// --fused off on the GPU: the ops that the fused executor runs as one kernel, run as eager
// PyTorch runs them, one kernel per tensor op, each reading and writing its whole tensor
// (the CPU's eager forms: nn/attention.cpp, nn/loss.cpp, optim/optimizer_step.cpp, with the same
// float arithmetic).
//
// - Attention as nanoGPT writes it out: the scores' products, then `att * scale`,
//   `masked_fill(-inf)` and `softmax` as three passes over every head's [T, T] matrix; its
//   backward through the whole [B, H, T, T] gradient of the probabilities (softmax's backward,
//   the mask's and the scale's, three passes).
// - The loss as F.cross_entropy runs it: log_softmax, nll_loss, then nll_loss's backward and
//   log_softmax's backward, each a pass over [rows, V].
// - The optimizer as torch.optim's single-tensor Adam/AdamW/SGD: tensor by tensor, one kernel per
//   tensor op, the sequence optim/eager_optimizer.hpp describes for both engines.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/eager_kernels.hpp"
#include "backend/cuda/warp_reductions.cuh"
#include "optim/eager_optimizer.hpp"

namespace trainbench::cuda {
namespace {

constexpr int kRowsPerBlock = 8;  // one warp per row
constexpr int kThreads = 256;

unsigned row_blocks(int64_t rows) { return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock); }
unsigned element_blocks(int64_t n) { return static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, 65535)); }

#define TRAINBENCH_GRID_LOOP(i, n) \
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

__global__ void scale_kernel(float* x, int64_t n, float factor) {
    TRAINBENCH_GRID_LOOP(i, n) x[i] = x[i] * factor;
}

// att[b, h, t, j] = -inf for j > t (masked_fill), or 0 for the gradient's mask.
__global__ void causal_fill_kernel(float* att, int64_t rows, int64_t T, float value) {
    TRAINBENCH_GRID_LOOP(i, rows * T) {
        const int64_t t = (i / T) % T, j = i % T;
        if (j > t) att[i] = value;
    }
}

// softmax over each whole row (the masked entries are -inf: exp gives 0). Float exponentials,
// their sum in double, as the fused kernel and the CPU.
__global__ void softmax_rows_kernel(float* att, int64_t rows, int64_t T) {
    const int lane = threadIdx.x % 32;
    const int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / 32;
    if (row >= rows) return;
    float* a = att + row * T;
    float max_score = -INFINITY;
    for (int64_t j = lane; j < T; j += 32) max_score = fmaxf(max_score, a[j]);
    max_score = warp_max(max_score);
    double sum = 0.0;
    for (int64_t j = lane; j < T; j += 32) {
        const float e = expf(a[j] - max_score);
        a[j] = e;
        sum += e;
    }
    const float inv_sum = static_cast<float>(1.0 / warp_sum(sum));
    for (int64_t j = lane; j < T; j += 32) a[j] = a[j] * inv_sum;
}

// softmax's backward over whole rows: g_j = p_j (g_j - sum_k p_k g_k).
__global__ void softmax_rows_backward_kernel(const float* att, float* g, int64_t rows, int64_t T) {
    const int lane = threadIdx.x % 32;
    const int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / 32;
    if (row >= rows) return;
    const float* p = att + row * T;
    float* d = g + row * T;
    double dot = 0.0;
    for (int64_t j = lane; j < T; j += 32) dot += static_cast<double>(p[j]) * d[j];
    const float row_dot = static_cast<float>(warp_sum(dot));
    for (int64_t j = lane; j < T; j += 32) d[j] = p[j] * (d[j] - row_dot);
}

// log_softmax per row, and whether the row's arg-max (first index on ties) is its label.
__global__ void log_softmax_kernel(const float* logits, const int32_t* labels, int64_t rows, int64_t V,
                                   float* log_p, int32_t* sample_correct) {
    const int lane = threadIdx.x % 32;
    const int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / 32;
    if (row >= rows) return;
    const float* z = logits + row * V;
    const ArgMax best = row_argmax(z, V, lane);
    const float max_value = best.value;
    const int64_t max_index = best.index;
    double exp_sum = 0.0;
    for (int64_t c = lane; c < V; c += 32) exp_sum += exp(static_cast<double>(z[c] - max_value));
    exp_sum = warp_sum(exp_sum);
    const float log_sum = static_cast<float>(log(exp_sum));
    float* out = log_p + row * V;
    for (int64_t c = lane; c < V; c += 32) out[c] = (z[c] - max_value) - log_sum;
    if (lane == 0 && sample_correct != nullptr) sample_correct[row] = max_index == labels[row] ? 1 : 0;
}

// nll_loss: minus each row's log-probability of its label.
__global__ void nll_loss_kernel(const float* log_p, const int32_t* labels, int64_t rows, int64_t V,
                                double* sample_loss) {
    TRAINBENCH_GRID_LOOP(row, rows) sample_loss[row] = -static_cast<double>(log_p[row * V + labels[row]]);
}

// nll_loss's backward: -grad_scale at each label, 0 elsewhere.
__global__ void nll_loss_backward_kernel(const int32_t* labels, int64_t rows, int64_t V, float grad_scale,
                                         float* d_log_p) {
    TRAINBENCH_GRID_LOOP(i, rows * V) d_log_p[i] = (i % V) == labels[i / V] ? -grad_scale : 0.0f;
}

// log_softmax's backward: g - exp(log p) * sum(g) per row (a float sum, as the CPU's).
__global__ void log_softmax_backward_kernel(const float* d_log_p, const float* log_p, int64_t rows, int64_t V,
                                            float* dlogits) {
    const int lane = threadIdx.x % 32;
    const int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / 32;
    if (row >= rows) return;
    const float* g = d_log_p + row * V;
    const float* lp = log_p + row * V;
    float sum = 0.0f;
    for (int64_t c = lane; c < V; c += 32) sum += g[c];
    sum = warp_sum(sum);
    float* out = dlogits + row * V;
    for (int64_t c = lane; c < V; c += 32) out[c] = g[c] - expf(lp[c]) * sum;
}

// One tensor op of the eager optimizer (optim/eager_optimizer.hpp) over its tensor.
template <TensorOp Op>
__global__ void tensor_op_kernel(float* out, const float* x, const float* y, int64_t n, float a) {
    TRAINBENCH_GRID_LOOP(i, n) out[i] = tensor_op_value<Op>(out, x, y, i, a);
}

#undef TRAINBENCH_GRID_LOOP

}  // namespace

void attention_forward_eager(cublasHandle_t blas, const float* qkv, float* out, float* att, int64_t B, int64_t T,
                             int64_t C, int64_t n_head, StorageType products, cudaStream_t stream) {
    if (B == 0 || T == 0) return;
    const int64_t rows = B * n_head * T;
    attention_scores(blas, qkv, att, B, T, C, n_head);
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(C / n_head)));
    scale_kernel<<<element_blocks(rows * T), kThreads, 0, stream>>>(att, rows * T, scale);
    TRAINBENCH_CUDA_CHECK_LAUNCH();
    causal_fill_kernel<<<element_blocks(rows * T), kThreads, 0, stream>>>(att, rows, T, -INFINITY);
    TRAINBENCH_CUDA_CHECK_LAUNCH();
    softmax_rows_kernel<<<row_blocks(rows), kRowsPerBlock * 32, 0, stream>>>(att, rows, T);
    TRAINBENCH_CUDA_CHECK_LAUNCH();
    round_to_storage(att, products, rows * T, stream);
    attention_values(blas, qkv, att, out, B, T, C, n_head);
}


void attention_backward_eager(cublasHandle_t blas, const float* dout, const float* qkv, const float* att, float* dqkv,
                              float* scratch, int64_t B, int64_t T, int64_t C, int64_t n_head, StorageType products,
                              cudaStream_t stream) {
    if (B == 0 || T == 0) return;
    const int64_t rows = B * n_head * T;
    float* G = scratch;  // [B, H, T, T], laid out as att
    attention_value_gradients(blas, dout, qkv, att, dqkv, G, B, T, C, n_head);
    softmax_rows_backward_kernel<<<row_blocks(rows), kRowsPerBlock * 32, 0, stream>>>(att, G, rows, T);
    TRAINBENCH_CUDA_CHECK_LAUNCH();
    causal_fill_kernel<<<element_blocks(rows * T), kThreads, 0, stream>>>(G, rows, T, 0.0f);
    TRAINBENCH_CUDA_CHECK_LAUNCH();
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(C / n_head)));
    scale_kernel<<<element_blocks(rows * T), kThreads, 0, stream>>>(G, rows * T, scale);
    TRAINBENCH_CUDA_CHECK_LAUNCH();
    round_to_storage(G, products, rows * T, stream);
    attention_query_key_gradients(blas, qkv, G, dqkv, B, T, C, n_head);
}


void softmax_cross_entropy_eager(const float* logits, const int32_t* labels, int64_t classes, int64_t rows,
                                 float grad_scale, float* dlogits, double* sample_loss, int32_t* sample_correct,
                                 float* scratch, cudaStream_t stream) {
    if (rows == 0) return;
    float* log_p = scratch;
    float* d_log_p = scratch + classes * rows;
    log_softmax_kernel<<<row_blocks(rows), kRowsPerBlock * 32, 0, stream>>>(logits, labels, rows, classes, log_p,
                                                                           sample_correct);
    TRAINBENCH_CUDA_CHECK_LAUNCH();
    nll_loss_kernel<<<element_blocks(rows), kThreads, 0, stream>>>(log_p, labels, rows, classes, sample_loss);
    TRAINBENCH_CUDA_CHECK_LAUNCH();
    if (dlogits == nullptr) return;
    nll_loss_backward_kernel<<<element_blocks(rows * classes), kThreads, 0, stream>>>(labels, rows, classes,
                                                                                      grad_scale, d_log_p);
    TRAINBENCH_CUDA_CHECK_LAUNCH();
    log_softmax_backward_kernel<<<row_blocks(rows), kRowsPerBlock * 32, 0, stream>>>(d_log_p, log_p, rows, classes,
                                                                                    dlogits);
    TRAINBENCH_CUDA_CHECK_LAUNCH();
}

void optimizer_step_eager_device(const OptimizerConfig& config, const OptimizerLaunch& launch, double lr,
                                 double grad_multiplier, int64_t step, const std::vector<ShardRange>& tensors,
                                 float* scratch, cudaStream_t stream) {
    if (step < 1) throw std::invalid_argument("optimizer_step_eager_device: step is 1-based");
    if (!has_eager_form(config)) throw std::logic_error("optimizer_step_eager_device: a one-pass optimizer");
    auto run = [&](const TensorOpCall& call) {
        dispatch_tensor_op(call.op, [&](auto op) {
            tensor_op_kernel<decltype(op)::value>
                <<<element_blocks(call.count), kThreads, 0, stream>>>(call.out, call.x, call.y, call.count, call.a);
        });
        TRAINBENCH_CUDA_CHECK_LAUNCH();
    };
    auto one_pass = [](const OptimizerConfig&, int64_t, int64_t) {
        throw std::logic_error("optimizer_step_eager_device: a one-pass optimizer");
    };
    // The gradients are scaled in place, as clip_grad_norm_ and GradScaler.unscale_ do.
    for_each_eager_optimizer_op(config, launch.params, const_cast<float*>(launch.grads), launch.state, launch.n, lr,
                                grad_multiplier, step, launch.decay_end, tensors, scratch, run, one_pass);
    if (launch.params_16 != nullptr) convert_from_f32(launch.params, launch.params_16, launch.type_16, launch.n, stream);
}

}  // namespace trainbench::cuda
