#pragma once
// Causal multi-head self-attention as nanoGPT's CausalSelfAttention computes it between c_attn
// and c_proj (no dropout), over row-major activations:
//   qkv [B, T, 3C] as c_attn outputs it: q = qkv[..., 0:C], k = [C:2C], v = [2C:3C]; head h
//   uses columns h*hs .. (h+1)*hs of each, hs = C / n_head.
//   att = softmax(mask(q k^T / sqrt(hs)))  [B, n_head, T, T], y = att v,
//   out [B, T, C] = y.transpose(1, 2).contiguous().view(B, T, C).
// The heads are read and written in place through strided views: no permute copies.
//
// `products` is the precision the four products' operands have. In 16-bit runs (bf16, fp16) the
// engines multiply 16-bit operands with fp32 accumulation, as tensor cores and autocast do: the
// probabilities are rounded to 16 bits before att v (the same values the forward saves), the
// gradient of the scores, scale * dS, before dS k and dS^T q; the callers round the output
// gradient dout before the backward, as for a linear op. The scores q k^T of 16-bit q and k are
// exact products summed in fp32, and the softmax and its backward stay fp32. fp32: no rounding.
#include <cstdint>

#include "trainbench/run_config.hpp"

namespace trainbench {

class OnednnProducts;

// out as above, and att, the softmax probabilities saved for the backward pass. att is written
// whole: entries above the diagonal (future positions) are exactly 0, as torch's are.
// Needs no scratch: the scores are computed in att and normalised there.
void attention_forward(const float* qkv, float* out, float* att, int64_t B, int64_t T, int64_t C,
                       int64_t n_head, Precision products);

// Floats of scratch attention_backward needs when the worker team has `threads` members: one
// T x T matrix (the gradient of att) per thread. Pass WorkerTeam::shared().members().
int64_t attention_scratch_floats(int64_t B, int64_t T, int64_t C, int64_t n_head, int threads);

// dqkv [B, T, 3C] (overwritten): the gradient with respect to qkv given dout [B, T, C] and the
// forward's qkv and att (as attention_forward wrote it: the zeros above the diagonal are read). scratch: attention_scratch_floats(..., WorkerTeam::shared().members())
// floats. Each (batch, head) pair is computed by one thread in one order, so the bits do not
// depend on the team's size.
void attention_backward(const float* dout, const float* qkv, const float* att, float* dqkv, int64_t B,
                        int64_t T, int64_t C, int64_t n_head, float* scratch, Precision products);

// 16-bit runs (`precision` bf16 or fp16) on the CPU: attention_forward and attention_backward
// with products of that precision, reading qkv and writing out and att in their 16-bit storage
// one (sample, head) pair at a time through per-thread fp32 copies, so that no pass widens or
// rounds a whole tensor (att alone is B x n_head x T x T). dout (rounded already, as the callers
// round it) and dqkv are fp32. scratch: attention_16bit_scratch_floats(...) floats.
int64_t attention_16bit_scratch_floats(int64_t T, int64_t C, int64_t n_head, int threads);
void attention_forward_16bit(Precision precision, const uint16_t* qkv, uint16_t* out, uint16_t* att, int64_t B,
                             int64_t T, int64_t C, int64_t n_head, float* scratch);
void attention_backward_16bit(Precision precision, const float* dout, const uint16_t* qkv, const uint16_t* att,
                              float* dqkv, int64_t B, int64_t T, int64_t C, int64_t n_head, float* scratch);

// bf16 runs whose products run in oneDNN (ProductKernel::onednn_bf16): the same as
// attention_forward_16bit and attention_backward_16bit up to the products' summation order,
// one batch element at a time per thread, each of its six products one batched bf16 product
// over all its heads (AMX where the CPU has it). The products are made once
// (attention_onednn_prepare, before the first update); their scratchpad,
// attention_onednn_scratchpad_bytes per member, is the OnednnProducts' own. The backward takes
// dout unrounded and rounds it to bf16 as it copies each head's rows for its products.
int64_t attention_onednn_scratch_floats(int64_t T, int64_t C, int64_t n_head, int threads);
int64_t attention_onednn_scratchpad_bytes(int64_t T, int64_t C, int64_t n_head);
void attention_onednn_prepare(OnednnProducts& products, int64_t T, int64_t C, int64_t n_head);
void attention_forward_onednn(OnednnProducts& products, const uint16_t* qkv, uint16_t* out, uint16_t* att, int64_t B,
                              int64_t T, int64_t C, int64_t n_head, float* scratch);
// With dqkv_codes given, dqkv is not written: its bf16 codes go there instead, for the product
// that made qkv (onednn_linear_backward's dy_codes). dqkv's own buffer may hold them, as the
// backward only ever writes it.
void attention_backward_onednn(OnednnProducts& products, const float* dout, const uint16_t* qkv, const uint16_t* att,
                               float* dqkv, int64_t B, int64_t T, int64_t C, int64_t n_head, float* scratch,
                               uint16_t* dqkv_codes = nullptr);

// --fused off: the same results (up to float rounding) computed as eager PyTorch computes
// nanoGPT's attention, each op one pass over all of att before the next: the scores q k^T, the
// scale, the mask, the softmax, then att v; the backward likewise, through the whole gradient
// of att ([B, n_head, T, T], attention_eager_scratch_floats of scratch).
void attention_forward_eager(const float* qkv, float* out, float* att, int64_t B, int64_t T, int64_t C,
                             int64_t n_head, Precision products);
int64_t attention_eager_scratch_floats(int64_t B, int64_t T, int64_t n_head);
void attention_backward_eager(const float* dout, const float* qkv, const float* att, float* dqkv, int64_t B,
                              int64_t T, int64_t C, int64_t n_head, float* scratch, Precision products);

}  // namespace trainbench
