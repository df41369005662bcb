#pragma once
// The sizes of what the CUDA engine allocates besides the planner's tensors, as plain C++ so
// that a build without CUDA can plan a GPU run (`trainbench-cli plan --device cuda`). The CUDA
// kernels size and index their scratch with these same functions.
#include <algorithm>
#include <cstdint>

namespace trainbench::cuda {

// cudaMalloc hands out 256-byte aligned blocks; the engine's allocator rounds every block to
// this granularity, so that plans and real allocations agree to the byte.
inline constexpr int64_t kAllocationGranularity = 512;
inline int64_t allocation_bytes(int64_t bytes) {
    return bytes <= 0 ? 0 : (bytes + kAllocationGranularity - 1) / kAllocationGranularity * kAllocationGranularity;
}

// The cuBLASLt workspace: what cuBLAS asks for on Hopper.
inline constexpr int64_t kCublasWorkspaceBytes = int64_t{32} << 20;

// The gradient norm's first pass: per-block partial sums of squares (double), added in order.
inline constexpr int kSumSquaresPartials = 512;

// The LayerNorm backward sums its weight and bias gradients per fixed chunk of rows, as
// nn/layernorm.cpp does: one row of dweight and one of dbias partial sums per chunk.
inline constexpr int64_t kLayerNormRowChunks = 64;
inline int64_t layernorm_backward_scratch_floats_cuda(int64_t C) { return kLayerNormRowChunks * 2 * C; }

// The bias gradient's first pass: one partial sum per feature and fixed chunk of samples.
inline constexpr int64_t kBiasSampleChunks = 64;
inline int64_t bias_grad_partials_floats(int64_t features) { return kBiasSampleChunks * features; }

// attention_backward (fp32): d(att) of one head for all samples, [B, T, T].
inline int64_t attention_backward_scratch_floats(int64_t B, int64_t T) { return B * T * T; }

// The 16-bit attention backward's G ([B, T, T] fp32, dY V^T of one head), rounded up so that
// scale * dS after it starts 256-byte aligned, as the tensor cores' loads want.
inline int64_t attention_16bit_g_floats(int64_t B, int64_t T) { return (B * T * T + 63) / 64 * 64; }
// Whether the 16-bit attention runs as two kernels of our own on the tensor cores, which the
// shapes allow: head size and width whole tiles (32-byte aligned loads of q, k, v and dY), T
// whole tiles and at most kAttentionTileMaxT (a 16-query tile's T fp32 scores in shared memory,
// 64 KiB at T 1,024, and a row's T values in 32 registers per lane). The forward
// (causal_attention_forward_kernel) computes q k^T, the softmax and att v for a tile of queries
// with the scores and probabilities in shared memory; nothing of att is kept for the backward
// (attention_keeps_probabilities), whose kernel computes q k^T and the softmax again, to the bit,
// before dY V^T and the softmax's backward.
inline constexpr int64_t kAttentionTileMaxT = 1024;
inline bool attention_in_tile_kernels(int64_t T, int64_t C, int64_t n_head) {
    const int64_t hs = C / n_head;
    return hs % 16 == 0 && C % 16 == 0 && T % 16 == 0 && T <= kAttentionTileMaxT;
}
// One head's [B, T, T] in 16 bits, in floats, rounded up to 256 bytes so that what follows it
// starts aligned for the tensor cores' loads.
inline int64_t attention_16bit_head_floats(int64_t B, int64_t T) { return ((B * T * T + 1) / 2 + 63) / 64 * 64; }
// The 16-bit attention: in the kernels above, one head's recomputed probabilities and then its
// scale * dS, both 16-bit; otherwise the forward's fp32 scores of every head, or the backward's G,
// then scale * dS, one head at a time. A forward (a checkpointed segment's recompute included)
// never runs inside a backward, so they share the space.
inline int64_t attention_16bit_scratch_floats(int64_t B, int64_t T, int64_t C, int64_t n_head) {
    const int64_t ds = (B * T * T + 1) / 2;
    if (attention_in_tile_kernels(T, C, n_head)) return attention_16bit_head_floats(B, T) + ds;
    return std::max(B * n_head * T * T, attention_16bit_g_floats(B, T) + ds);
}

// --fused off: attention_backward_eager holds the gradient of every head's att at once.
inline int64_t attention_backward_eager_scratch_floats(int64_t B, int64_t T, int64_t n_head) {
    return B * n_head * T * T;
}
// --fused off: softmax_cross_entropy_eager's log-probabilities and their gradient.
inline int64_t cross_entropy_eager_scratch_floats(int64_t classes, int64_t rows) { return 2 * classes * rows; }

}  // namespace trainbench::cuda
