#pragma once
// torch.nn.Linear's products through oneDNN (nn/onednn_matmul.hpp), the same forward/backward
// pair as nn/linear.hpp over the engine's layouts: activations [features x batch] column-major,
// which is a row-major [rows x features] matrix, and W [out x in] row-major as torch stores it,
// read in place (no packing by the engine). Operands are fp32, or bf16 codes (the 16-bit
// activations and the working copy of the weights as they are stored); results, the bias and
// the gradients are fp32. Each product is split by rows of its result across the worker team,
// except the bf16 weight gradient, split by the rows it sums over (onednn_linear_backward).
#include <cstdint>
#include <vector>

#include "nn/linear.hpp"
#include "nn/onednn_matmul.hpp"
#include "nn/packed_weights.hpp"

namespace trainbench {

// The three products of a Linear layer of `rows` rows.
MatmulShape linear_forward_shape(MatmulOperands operands, int64_t in, int64_t out, int64_t rows, bool bias,
                                 bool bf16_result = false);
MatmulShape linear_input_grad_shape(MatmulOperands operands, int64_t in, int64_t out, int64_t rows);
MatmulShape linear_weight_grad_shape(MatmulOperands operands, int64_t in, int64_t out, int64_t rows,
                                     GradientWrite write);

// Scratchpad bytes a member needs for every product of a Linear layer of up to `rows` rows, on
// a team of up to `threads` members (or 1: small products run on the calling thread). Without
// whole_forward the forward is not counted: it runs as onednn_linear_forward_16bit_rows' blocks,
// sized by onednn_linear_16bit_rows_scratchpad_bytes.
int64_t onednn_linear_scratchpad_bytes(MatmulOperands operands, int64_t in, int64_t out, int64_t rows, bool bias,
                                       bool input_grad, int threads, bool whole_forward = true);

// Makes every product the forward (and, with weight_grad or input_grad, the backward) of a
// Linear layer of `rows` rows will run, split as they will be. Without whole_forward the
// forward's product per member's slice is not made (onednn_linear_prepare_16bit_rows makes its
// blocks' instead).
void onednn_linear_prepare(OnednnProducts& products, MatmulOperands operands, int64_t in, int64_t out, int64_t rows,
                           bool bias, bool bf16_result, bool weight_grad, bool input_grad, bool whole_forward = true);

// Y = X W^T + b (bias may be null), the epilogue applied to each member's rows while in cache.
void onednn_linear_forward(OnednnProducts& products, MatmulOperands operands, const void* x, const void* w,
                           const float* bias, float* y, int64_t in, int64_t out, int64_t rows,
                           const ProductEpilogue* epilogue = nullptr);
// 16-bit activations with fp32 products (fp16 runs; bf16 runs where the CPU multiplies no bf16):
// a product per block of rows of each member's slice (onednn_linear_16bit_rows_blocks), the
// member widening the block's rows of x16 into x_staging ([rows x in] floats) first and rounding
// its rows of y into y16 (unless y16 is null or the epilogue writes the codes itself) last, so
// both conversions run on rows in cache instead of as passes of their own over whole tensors.
// Bits as widening, multiplying block by block and rounding one after another.
void onednn_linear_forward_16bit_rows(OnednnProducts& products, Precision precision, const uint16_t* x16,
                                      float* x_staging, const float* w, const float* bias, float* y, uint16_t* y16,
                                      int64_t in, int64_t out, int64_t rows, const ProductEpilogue* epilogue = nullptr);
// Its blocks on a team of `members`: rows [first, first + count) multiplied by `member`, as one
// product of `count` rows. Small weights: L2-sized blocks; others: the member's whole slice.
struct RowBlock {
    int member = 0;
    int64_t first = 0, count = 0;
};
std::vector<RowBlock> onednn_linear_16bit_rows_blocks(int64_t in, int64_t out, int64_t rows, int members);
// Makes, and sizes the scratchpad of, its products for `rows` rows.
void onednn_linear_prepare_16bit_rows(OnednnProducts& products, int64_t in, int64_t out, int64_t rows, bool bias);
int64_t onednn_linear_16bit_rows_scratchpad_bytes(int64_t in, int64_t out, int64_t rows, bool bias, int threads);
// The same rounded once into bf16 codes (a bf16 run's stored output). With an epilogue (whose
// activated_codes it reads; y may be the same storage, for an activation in place) each member
// then applies the activation to its rows of y's codes, still in cache, and stores the result as
// codes: the bits of apply_epilogue's, which activates the rounded product, and no fp32 output.
void onednn_linear_forward_bf16(OnednnProducts& products, const void* x, const void* w, const float* bias,
                                uint16_t* y, int64_t in, int64_t out, int64_t rows,
                                const ProductEpilogue* epilogue = nullptr);

// Scratch floats onednn_linear_backward needs for `rows` rows on a team of up to `threads`
// members: fp32, dY transposed; bf16, dY's codes and each member's partial dW and db.
int64_t onednn_linear_scratch_floats(MatmulOperands operands, int64_t in, int64_t out, int64_t rows, int threads);
// dW (+)= dY^T X and db (+)= colsum(dY) when grad_weight is not null, and dX = dY W when
// grad_input is not null, from dy, the output gradient's fp32 values. bf16 operands round them
// here (to nearest even, as the products read them; db sums the rounded values), so the caller
// need not; fp32 operands round them in place to `rounding` (a 16-bit run's fp32 products of
// 16-bit values; fp32: taken as given), as they are transposed when there is a dW.
// - fp32: dY is transposed into scratch for dW, whose reduction over rows oneDNN's fast kernels
//   only take along a row of A (given a strided view of dY^T sliced by dW's rows, 2.6 falls
//   back to a slower GEMM that allocates its packing buffer on every call), and dW is split by
//   its rows across the team.
// - bf16: the work is split by rows of dY instead, each member rounding its rows into codes
//   and computing its rows of dX and a partial dW and db from them; a dense part of dY's rows
//   read as a transposed view is what the AMX kernels take, so nothing is transposed. The
//   partial sums are added in member order at the end.
// - dy_codes, where given (bf16 operands, onednn_linear_takes_dy_codes): dY already rounded into
//   bf16 codes, [rows x out]; dy is not read then.
void onednn_linear_backward(OnednnProducts& products, MatmulOperands operands, const void* x, const void* w,
                            float* dy, float* grad_weight, float* grad_bias, float* grad_input, int64_t in,
                            int64_t out, int64_t rows, GradientWrite write, float* scratch,
                            Precision rounding = Precision::fp32, const uint16_t* dy_codes = nullptr);
// Whether a bf16 backward of this shape, on a team of `threads`, reads dY only as codes (split
// by dY's rows, not transposed), so that the op that computes dY can round it into codes as it
// goes and hand them over as dy_codes: one pass over dY where writing its fp32 values and
// reading them back to round them took two.
bool onednn_linear_takes_dy_codes(int64_t in, int64_t out, int64_t rows, bool weight_grad, bool input_grad, int threads);
// The place in scratch where the backward rounds dY into codes itself: a producer may write
// them there (and pass it as dy_codes) when it needs no scratch of its own meanwhile.
uint16_t* onednn_linear_dy_codes(float* scratch);

}  // namespace trainbench
