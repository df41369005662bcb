#pragma once
// DoRA (Liu et al. 2024), the magnitude half of PEFT's lora.Linear with use_dora=True, beside
// LoRA's adapter (nn/lora.hpp) and the frozen product:
//   out = b + g ⊙ (x W^T + s (x A^T) B^T),  g = m / ||W + s B A|| per output row,
// the norm over each row of the [out, in] weight (PEFT's convention) and treated as a constant
// in the backward (detached, the paper's section 4.3). Computed as PEFT does, onto the LoRA
// layer's result r = x W^T + b + s (x A^T) B^T:  out = r + (g - 1) ⊙ (r - b).
#include <cstdint>

#include "nn/linear.hpp"  // GradientWrite

namespace trainbench {

// A row's Euclidean norm, summed in double and rounded once: DoRA's magnitudes start as the
// norms of the weight's rows and are divided by these norms, so both use this one function
// (an adapter from scratch, B = 0, then scales by exactly 1).
float dora_row_norm(const float* row, int64_t n);

// norms[j] = ||W_j + scale (B A)_j|| for the `out` rows of W [out, in], A [rank, in],
// B [out, rank]; scratch: dora_norm_scratch_floats.
void dora_weight_norms(const float* weight, const float* lora_a, const float* lora_b, float scale, int64_t in,
                       int64_t out, int64_t rank, float* norms, float* scratch);
int64_t dora_norm_scratch_floats(int64_t in, int threads);

// output [rows, out] holds r on entry: unscaled = r - b (saved for the magnitude's gradient),
// output = r + (m / n - 1) unscaled.
void dora_forward(float* output, const float* bias, const float* magnitude, const float* norms, float* unscaled,
                  int64_t rows, int64_t out);

// dm (= or +=) the sum over rows of dout ⊙ unscaled / n, each element by one thread in row
// order; scaled_grad = dout ⊙ m / n, the gradient the frozen product and the adapter see.
void dora_backward(const float* grad_output, const float* unscaled, const float* magnitude, const float* norms,
                   float* grad_magnitude, float* scaled_grad, int64_t rows, int64_t out, GradientWrite write);

}  // namespace trainbench
