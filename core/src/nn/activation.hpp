#pragma once
#include <cstdint>

#include "trainbench/run_config.hpp"

namespace trainbench {

// a = f(z), element-wise over n values.
void activation_forward(Activation kind, const float* z, float* a, int64_t n);

// a = f(z) over n values on the calling thread (a product's epilogue runs it on its block).
void activation_forward_serial(Activation kind, const float* z, float* a, int64_t n);
// The same over values stored as 16-bit codes: each widened, f computed in fp32, the result
// rounded once (a may be z). The values as activation_forward_serial of the widened z.
void activation_forward_16bit_serial(Activation kind, Precision precision, const uint16_t* z, uint16_t* a, int64_t n);
// A 16-bit run's product epilogue on the calling thread: z (fp32) rounded to `precision`, its
// codes stored in z_codes where given, f of the rounded values rounded into a_codes. The bits
// of rounding z in place, storing its codes, then activation_forward_16bit_serial; but GELU
// and ReLU run a register at a time, without the fp32 block's copy and passes over it.
void activation_forward_rounding_serial(Activation kind, Precision precision, const float* z, uint16_t* z_codes,
                                        uint16_t* a_codes, int64_t n);

// grad *= f'(.), in place. ReLU, tanh and sigmoid express f' through the output a (so only a
// must be saved); GELU (exact, erf form as torch's default) needs the input z.
void activation_backward(Activation kind, const float* z, const float* a, float* grad, int64_t n);
// The same with the saved tensor f' reads (z for GELU, a for the others) in 16-bit storage,
// widened a cache-sized block at a time just before it is read, into the start of each
// thread's share of `staging` ([n] floats).
// With dy_codes given, grad is only read: the input's gradient goes to dy_codes instead, as the
// bf16 codes the product before the activation reads it as (onednn_linear_takes_dy_codes).
void activation_backward_16bit(Activation kind, Precision precision, const uint16_t* saved, float* staging, float* grad,
                               int64_t n, uint16_t* dy_codes = nullptr);

// Whether the backward pass needs the pre-activation z saved besides the output a.
inline bool activation_needs_input(Activation kind) { return kind == Activation::gelu; }

}  // namespace trainbench
