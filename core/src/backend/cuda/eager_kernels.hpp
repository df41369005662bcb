#pragma once
// Host-side launchers of --fused off's kernels on the GPU (eager_kernels.cu): the ops the
// fused executor runs as one kernel, run one tensor op at a time as eager PyTorch does. Same
// layouts and semantics as the fused launchers in gpt_kernels.hpp and kernels.hpp; every
// launcher enqueues on `stream` without synchronising.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "backend/cuda/gpt_kernels.hpp"
#include "backend/cuda/kernels.hpp"
#include "parallel/shard_range.hpp"

namespace trainbench::cuda {

// Causal self-attention as attention_forward, with the scale, the mask and the softmax as three
// passes over att [B, H, T, T]. In fp32 buffers; `products` (f32 or the run's 16-bit type) rounds
// att and, in the backward, scale * dS in passes of their own, as nn/attention.hpp's eager form
// does (the backward's dout arrives rounded).
void attention_forward_eager(cublasHandle_t blas, const float* qkv, float* out, float* att, int64_t B, int64_t T,
                             int64_t C, int64_t n_head, StorageType products, cudaStream_t stream);
// Scratch: attention_backward_eager_scratch_floats(B, T, n_head) floats (plan/cuda_buffer_sizes.hpp).
// dqkv overwritten, as attention_backward, through the whole [B, H, T, T] gradient of att.
void attention_backward_eager(cublasHandle_t blas, const float* dout, const float* qkv, const float* att, float* dqkv,
                              float* scratch, int64_t B, int64_t T, int64_t C, int64_t n_head, StorageType products,
                              cudaStream_t stream);

// Scratch: cross_entropy_eager_scratch_floats(classes, rows) floats (plan/cuda_buffer_sizes.hpp).
// fp32 logits [rows, classes]: per-row loss and correctness as softmax_cross_entropy, and with
// dlogits, d(grad_scale * loss)/d(logits) through log_softmax and nll_loss's backwards.
void softmax_cross_entropy_eager(const float* logits, const int32_t* labels, int64_t classes, int64_t rows,
                                 float grad_scale, float* dlogits, double* sample_loss, int32_t* sample_correct,
                                 float* scratch, cudaStream_t stream);

// torch.optim's single-tensor algorithm over `tensors` (ranges of the flat store), as
// optim/eager_optimizer.hpp describes it for optimizers with an eager form (has_eager_form),
// each tensor op one kernel; then the 16-bit working copy refreshed in a pass of its own.
// scratch: eager_optimizer_scratch_floats(config, largest tensor) floats.
void optimizer_step_eager_device(const OptimizerConfig& config, const OptimizerLaunch& launch, double lr,
                                 double grad_multiplier, int64_t step, const std::vector<ShardRange>& tensors,
                                 float* scratch, cudaStream_t stream);

}  // namespace trainbench::cuda
