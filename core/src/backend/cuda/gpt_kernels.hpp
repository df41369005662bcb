#pragma once
// Host-side launchers of the transformer ops the CUDA engine (cuda_engine.cpp) needs
// beyond the MLP's kernels (kernels.hpp), computing in fp32 over row-major [rows, width]
// activations with the layouts of the CPU ops (nn/layernorm.hpp, nn/attention.hpp,
// nn/embedding.hpp); LayerNorm and the residual add also read and write 16-bit activations
// (StorageType), widening on load and rounding once on store. Every
// launcher enqueues on `stream` without synchronising. No kernel uses atomics: each output
// element is written by one thread, and sums over rows run in a fixed order, so identical
// inputs give identical bits.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/kernels.hpp"
#include "plan/cuda_buffer_sizes.hpp"

namespace trainbench::cuda {

// --- layernorm_kernels.cu
// out = (inp - mean) * rstd * weight + bias per row, saving mean and rstd ([rows] each, fp32) as
// the CPU op does. out may alias inp when both have one type.
void layernorm_forward(const void* inp, StorageType inp_type, const float* weight, const float* bias, void* out,
                       StorageType out_type, float* mean, float* rstd, int64_t rows, int64_t C, cudaStream_t stream);
// --fused on: sum = a + b (a, b and sum stored in sum_type), then layernorm_forward of the sum,
// in one pass over each row; the same bits as residual_forward then layernorm_forward.
void residual_layernorm_forward(const void* a, const void* b, void* sum, StorageType sum_type, const float* weight,
                                const float* bias, void* out, StorageType out_type, float* mean, float* rstd,
                                int64_t rows, int64_t C, cudaStream_t stream);
// Scratch: layernorm_backward_scratch_floats_cuda(C) floats (plan/cuda_buffer_sizes.hpp).
// dinp (= or +=) and dweight, dbias (= or +=, summed over rows: per-chunk partials into the
// scratch, then one thread per column adds the chunks in order). dinp may be null (no input
// gradient) and may alias dout when it is overwritten.
void layernorm_backward(const float* dout, const void* inp, StorageType inp_type, const float* weight,
                        const float* mean, const float* rstd, float* dinp, float* dweight, float* dbias, int64_t rows,
                        int64_t C, bool accumulate_input, bool accumulate_params, float* scratch, cudaStream_t stream);

// --- attention_kernels.cu: causal self-attention over qkv [B, T, 3C] (q | k | v, head h at
// columns h*hs .. (h+1)*hs of each), out [B, T, C], probabilities att [B, H, T, T] with exact
// zeros above the diagonal. The products are cuBLAS strided-batched SGEMMs (one call per head,
// batched over the B samples) on `blas`, which must be bound to `stream` with a workspace.
void attention_forward(cublasHandle_t blas, const float* qkv, float* out, float* att, int64_t B, int64_t T,
                       int64_t C, int64_t n_head, cudaStream_t stream);
// Scratch: attention_backward_scratch_floats(B, T) floats (plan/cuda_buffer_sizes.hpp).
// dqkv [B, T, 3C] overwritten, from dout [B, T, C] and the forward's qkv and att.
void attention_backward(cublasHandle_t blas, const float* dout, const float* qkv, const float* att, float* dqkv,
                        float* scratch, int64_t B, int64_t T, int64_t C, int64_t n_head, cudaStream_t stream);

// Lets the tile kernels have the shared memory a tile of T = kAttentionTileMaxT needs (over the
// 48 KiB a kernel gets unasked). Once per device, before the first 16-bit attention runs.
void allow_attention_tile_kernels_shared_memory();

// 16-bit runs (bf16, fp16 as `type`): the products on 16-bit operands with fp32 accumulation,
// at nn/attention.hpp's rounding points. qkv and out are in their 16-bit storage. Where
// attention_in_tile_kernels(T, C, n_head), forward and backward are kernels of our own on the
// tensor cores that keep no probabilities (att is not read or written; it may be null) and
// scores is unused; otherwise att holds the 16-bit probabilities, and scores ([B, H, T, T] fp32,
// the start of the attention scratch) the raw q k^T of cuBLAS's products before the softmax
// rounds it into att.
void attention_forward_16bit(cublasHandle_t blas, const void* qkv, void* out, void* att, float* scores,
                             StorageType type, int64_t B, int64_t T, int64_t C, int64_t n_head, cudaStream_t stream);
// Scratch: attention_16bit_scratch_floats(B, T, C, n_head) floats (plan/cuda_buffer_sizes.hpp).
// dqkv [B, T, 3C] (fp32) overwritten, from dout [B, T, C] already rounded to `type` and the
// forward's 16-bit qkv and att (unused in the tile kernels, which compute it again).
void attention_backward_16bit(cublasHandle_t blas, const void* dout, const void* qkv, const void* att, float* dqkv,
                              float* scratch, StorageType type, int64_t B, int64_t T, int64_t C, int64_t n_head,
                              cudaStream_t stream);

// The products alone, for attention written out op by op (eager_kernels.cu), each one cuBLAS
// call per head: att's raw scores q k^T; out = att v; dV and G = d(att) = dY V^T into G laid out
// as att [B, H, T, T]; dQ and dK from G (by then scale * dS).
void attention_scores(cublasHandle_t blas, const float* qkv, float* att, int64_t B, int64_t T, int64_t C,
                      int64_t n_head);
void attention_values(cublasHandle_t blas, const float* qkv, const float* att, float* out, int64_t B, int64_t T,
                      int64_t C, int64_t n_head);
void attention_value_gradients(cublasHandle_t blas, const float* dout, const float* qkv, const float* att,
                               float* dqkv, float* G, int64_t B, int64_t T, int64_t C, int64_t n_head);
void attention_query_key_gradients(cublasHandle_t blas, const float* qkv, const float* G, float* dqkv, int64_t B,
                                   int64_t T, int64_t C, int64_t n_head);

// --- embedding_kernels.cu: out [B*T, C] = wte[tokens] + wpe[position]
void embedding_forward(const int32_t* tokens, const float* wte, const float* wpe, float* out, int64_t B,
                       int64_t T, int64_t C, cudaStream_t stream);
// dwte [vocab, C] and dwpe [T, C] (= or +=). Overwrite sets every row of dwte (absent tokens
// to 0) and rows 0 .. T-1 of dwpe. Either may be null to skip it.
void embedding_backward(const float* dout, const int32_t* tokens, float* dwte, float* dwpe, int64_t B, int64_t T,
                        int64_t C, int64_t vocab, bool accumulate_wte, bool accumulate_wpe, cudaStream_t stream);

// --- residual_kernels.cu
// out = a + b over n values, all three stored in `type`.
void residual_forward(const void* a, const void* b, void* out, StorageType type, int64_t n, cudaStream_t stream);
// d_a (= or +=) dout and d_b (= or +=) dout; either may be null.
void residual_backward(const float* dout, float* d_a, bool accumulate_a, float* d_b, bool accumulate_b, int64_t n,
                       cudaStream_t stream);

}  // namespace trainbench::cuda
