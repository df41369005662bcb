#pragma once
// torch.nn.LayerNorm(C) (eps 1e-5, with weight and bias) over row-major [rows, C] activations
// (rows = B*T, torch's x.view(-1, C)), as a forward/backward pair over engine-owned buffers.
#include <cstdint>

#include "nn/linear.hpp"  // GradientWrite
#include "trainbench/run_config.hpp"

namespace trainbench {

inline constexpr float kLayerNormEps = 1e-5f;

// out = (inp - mean) * rstd * weight + bias per row; mean and rstd = 1/sqrt(var + eps)
// (biased variance) are written to [rows] each for the backward pass. out may alias inp.
void layernorm_forward(const float* inp, const float* weight, const float* bias, float* out, float* mean,
                       float* rstd, int64_t rows, int64_t C);

// --fused on: sum = a + b (a residual add) and LayerNorm(sum) as above, one row at a time, so
// the sum is normalised while it is in cache rather than read back. The LayerNorm reads the sum
// as its storage holds it: rounded to `rounding` in 16-bit runs (fp32: as computed).
void residual_layernorm_forward(const float* a, const float* b, float* sum, const float* weight, const float* bias,
                                float* out, float* mean, float* rstd, int64_t rows, int64_t C, Precision rounding);

// 16-bit runs: the same two over 16-bit storage, a row at a time: the inputs widened into a row
// of x_staging, the results rounded into their storage while the row is in cache (y_staging
// holds the fp32 row before it is rounded; both [rows x C] floats, of which each thread uses
// the row at the start of its range). Bits as widening, the fp32 op and rounding one after
// another.
void layernorm_forward_16bit(Precision precision, const uint16_t* inp, const float* weight, const float* bias,
                             uint16_t* out, float* mean, float* rstd, int64_t rows, int64_t C, float* x_staging,
                             float* y_staging);
void residual_layernorm_forward_16bit(Precision precision, const uint16_t* a, const uint16_t* b, uint16_t* sum,
                                      const float* weight, const float* bias, uint16_t* out, float* mean, float* rstd,
                                      int64_t rows, int64_t C, float* x_staging, float* y_staging);

// Floats of scratch layernorm_backward needs: one row of dweight and one of dbias partial sums
// per fixed chunk of rows (see layernorm.cpp), whatever the number of rows or threads.
int64_t layernorm_backward_scratch_floats(int64_t C);

// dinp (= or +=, input_write) the gradient with respect to inp, and dweight, dbias (= or +=,
// param_write) summed over the rows. Accumulating dinp is how a pre-LN transformer adds the
// block's branch gradient onto the residual stream's. dinp may alias dout with overwrite.
// Null dweight and dbias: frozen, only dinp is written. Bits do not depend on the worker team's
// size.
void layernorm_backward(const float* dout, const float* inp, const float* weight, const float* mean,
                        const float* rstd, float* dinp, float* dweight, float* dbias, int64_t rows, int64_t C,
                        GradientWrite input_write, GradientWrite param_write, float* scratch);
// The same reading a 16-bit input, each row widened as it is needed into x_staging ([rows x C]
// floats; each chunk of rows reuses the row at its start).
void layernorm_backward_16bit(Precision precision, const float* dout, const uint16_t* inp, float* x_staging,
                              const float* weight, const float* mean, const float* rstd, float* dinp, float* dweight,
                              float* dbias, int64_t rows, int64_t C, GradientWrite input_write,
                              GradientWrite param_write, float* scratch);

}  // namespace trainbench
