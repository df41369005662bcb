#pragma once
// torch.nn.MaxPool2d(2) over NCHW activations: 2x2 windows, stride 2, an odd last row or
// column dropped (floor mode).
#include <cstdint>

#include "nn/linear.hpp"  // GradientWrite

namespace trainbench {

// out [N, C, H/2, W/2] from in [N, C, H, W].
void max_pool_forward(const float* input, float* output, int64_t samples, int64_t channels, int64_t height,
                      int64_t width);

// dX from dY: each window's gradient goes to its maximum, the first in row order on ties (as
// torch's CPU kernel picks it), found again from the saved input; the rest of dX is zero
// (overwrite) or left as it is (accumulate).
void max_pool_backward(const float* input, const float* grad_output, float* grad_input, int64_t samples,
                       int64_t channels, int64_t height, int64_t width, GradientWrite write);

}  // namespace trainbench
