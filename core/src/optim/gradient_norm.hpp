#pragma once
// The squared global L2 norm of the gradients: reported every update, used for clipping, and
// the engine's check for inf/NaN before the optimizer touches the weights.
#include <cstdint>

namespace trainbench {

// Sum of squares in double over fixed chunks added in order: the same bits for any thread count.
double gradient_norm_squared(const float* grads, int64_t count);

}  // namespace trainbench
