#pragma once
// nanoGPT's input embedding, llm.c's "encoder": x[b, t] = wte[tokens[b, t]] + wpe[t], over
// row-major [B*T, C] activations; wte is [vocab, C] and wpe [block_size, C] as torch stores them.
#include <cstdint>

#include "nn/linear.hpp"  // GradientWrite

namespace trainbench {

// out [B, T, C]. Tokens must lie in [0, vocab); wpe needs at least T rows.
void embedding_forward(const int32_t* tokens, const float* wte, const float* wpe, float* out, int64_t B,
                       int64_t T, int64_t C);

// dwte [vocab, C] and dwpe [T, C] from dout [B, T, C], each written (= or +=) as its
// GradientWrite says: with an LM head tied to wte, the head's backward writes dwte first and
// this adds to it. Overwrite sets every row of dwte (rows of tokens absent from the batch to
// 0) and rows 0 .. T-1 of dwpe; rows T .. block_size-1 of dwpe are not touched. Either output
// may be null to skip it. Deterministic without scratch: each thread owns a range of columns
// and adds the rows of dout into them in (b, t) order, so every element is summed in one
// order whatever the team's size, and a frequent token costs every thread the same.
void embedding_backward(const float* dout, const int32_t* tokens, float* dwte, float* dwpe, int64_t B,
                        int64_t T, int64_t C, int64_t vocab, GradientWrite wte_write, GradientWrite wpe_write);

}  // namespace trainbench
