#pragma once
// The adapter half of PEFT's lora.Linear, beside a frozen Linear: out += scale * (in A^T) B^T
// with A [rank, in] and B [out, rank] (torch's nn.Linear layouts), over row-major [rows, width]
// activations. The frozen product itself is the engine's packed Linear.
#include <cstdint>

#include "nn/linear.hpp"  // GradientWrite

namespace trainbench {

// down = in A^T [rows, rank] (saved for the backward); out += scale * down B^T.
void lora_forward(const float* input, const float* lora_a, const float* lora_b, float scale, float* down,
                  float* output, int64_t rows, int64_t in, int64_t out, int64_t rank);

// Scratch lora_backward needs: two [rows, rank] blocks.
int64_t lora_backward_scratch_floats(int64_t rows, int64_t rank);

// With ddown = scale * dout B: dB (= or +=) scale * dout^T down, dA (= or +=) ddown^T in, and
// when grad_input is not null, grad_input += ddown A (the frozen product wrote W^T dout first).
void lora_backward(const float* input, const float* down, const float* grad_output, const float* lora_a,
                   const float* lora_b, float scale, float* grad_a, float* grad_b, float* grad_input, int64_t rows,
                   int64_t in, int64_t out, int64_t rank, GradientWrite write, float* scratch);

}  // namespace trainbench
