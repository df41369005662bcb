#pragma once
// torch.nn.Linear as a forward/backward pair over engine-owned buffers. Activations are
// [features x batch] column-major (one sample per column); W is [out x in] row-major as torch
// stores it, so the same bytes go to and from safetensors untouched.
#include <cstdint>

#include "nn/packed_weights.hpp"

namespace trainbench {

// How a backward pass writes the weight gradients: the first micro-batch of an update
// overwrites them (no separate zeroing pass), the later ones add to them.
enum class GradientWrite { overwrite, accumulate };

// Z = W X + b. The engine's forward uses packed_linear_forward (nn/packed_weights.hpp), the
// same product over W packed once per update; this plain form is the reference the tests use.
void linear_forward(const float* weight, const float* bias, const float* input, float* output,
                    int64_t in, int64_t out, int64_t batch);

// dW (+)= dZ X^T, db (+)= rowsum(dZ)
void linear_weight_grad(const float* input, const float* grad_output, float* grad_weight, float* grad_bias,
                        int64_t in, int64_t out, int64_t batch, GradientWrite write);

// dW, db as above and dX = W^T dZ when grad_input is not null.
void linear_backward(const float* weight, const float* input, const float* grad_output,
                     float* grad_weight, float* grad_bias, float* grad_input, int64_t in,
                     int64_t out, int64_t batch, GradientWrite write);

// linear_backward with W^T already packed (PackedOperand::weights_transposed) for dX; a null
// grad_weight (a frozen W and b) computes dX alone.
void linear_backward_packed(const PackedLayout& transposed, const float* packed_transposed, const float* input,
                            const float* grad_output, float* grad_weight, float* grad_bias, float* grad_input,
                            int64_t in, int64_t out, int64_t batch, GradientWrite write);

}  // namespace trainbench
