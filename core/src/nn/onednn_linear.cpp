#include "nn/onednn_linear.hpp"

#include <immintrin.h>

#include <algorithm>

#include "parallel/parallel_range.hpp"
#include "precision/half_float.hpp"

namespace trainbench {

// In row-major terms: X [rows x in], W [out x in], Y and dY [rows x out].
MatmulShape linear_forward_shape(MatmulOperands operands, int64_t in, int64_t out, int64_t rows, bool bias,
                                 bool bf16_result) {
    // Y = X W^T: W^T (p, j) = W[j][p]
    return {.operands = operands, .m = rows, .k = in, .n = out, .a_row = in, .a_col = 1, .b_row = 1, .b_col = in,
            .c_row = out, .bias = bias, .bf16_result = bf16_result};
}

MatmulShape linear_input_grad_shape(MatmulOperands operands, int64_t in, int64_t out, int64_t rows) {
    // dX = dY W
    return {.operands = operands, .m = rows, .k = out, .n = in, .a_row = out, .a_col = 1, .b_row = in, .b_col = 1,
            .c_row = in};
}

MatmulShape linear_weight_grad_shape(MatmulOperands operands, int64_t in, int64_t out, int64_t rows,
                                     GradientWrite write) {
    // dW = dY^T X, with dY^T [out x rows] stored row-major
    return {.operands = operands, .m = out, .k = rows, .n = in, .a_row = rows, .a_col = 1, .b_row = in, .b_col = 1,
            .c_row = in, .accumulate = write == GradientWrite::accumulate};
}

int64_t onednn_linear_scratchpad_bytes(MatmulOperands operands, int64_t in, int64_t out, int64_t rows, bool bias,
                                       bool input_grad, int threads) {
    int64_t bytes = 0;
    for (int members : {1, threads}) {
        bytes = std::max(bytes, onednn_scratchpad_bytes(linear_forward_shape(operands, in, out, rows, bias), members));
        if (operands == MatmulOperands::bf16)
            bytes = std::max(bytes, onednn_scratchpad_bytes(linear_forward_shape(operands, in, out, rows, bias, true), members));
        for (GradientWrite write : {GradientWrite::overwrite, GradientWrite::accumulate})
            bytes = std::max(bytes, onednn_scratchpad_bytes(linear_weight_grad_shape(operands, in, out, rows, write), members));
        if (input_grad)
            bytes = std::max(bytes, onednn_scratchpad_bytes(linear_input_grad_shape(operands, in, out, rows), members));
    }
    return bytes;
}

namespace {
// Multiply-adds of the backward's products, which decide how many members split them.
int64_t backward_work(int64_t in, int64_t out, int64_t rows, bool weight_grad, bool input_grad) {
    return ((weight_grad ? 1 : 0) + (input_grad ? 1 : 0)) * in * out * rows;
}
}  // namespace

void onednn_linear_prepare(OnednnProducts& products, MatmulOperands operands, int64_t in, int64_t out, int64_t rows,
                           bool bias, bool bf16_result, bool weight_grad, bool input_grad) {
    products.prepare(linear_forward_shape(operands, in, out, rows, bias, bf16_result), members_for(in * out * rows));
    const int members = members_for(backward_work(in, out, rows, weight_grad, input_grad));
    if (weight_grad)
        for (GradientWrite write : {GradientWrite::overwrite, GradientWrite::accumulate})
            products.prepare(linear_weight_grad_shape(operands, in, out, rows, write), members);
    if (input_grad) products.prepare(linear_input_grad_shape(operands, in, out, rows), members);
}

void onednn_linear_forward(OnednnProducts& products, MatmulOperands operands, const void* x, const void* w,
                           const float* bias, float* y, int64_t in, int64_t out, int64_t rows,
                           const ProductEpilogue* epilogue) {
    const MatmulShape shape = linear_forward_shape(operands, in, out, rows, bias != nullptr);
    const int members = members_for(in * out * rows);
    products.prepare(shape, members);
    auto slice = [&](int member, int count) {
        products.run_slice(shape, member, count, x, w, bias, y);
        if (!epilogue) return;
        // Rows of Y are columns of the engine's [out x rows] column-major view.
        const int64_t first = slice_row_begin(rows, member, count), end = slice_row_begin(rows, member + 1, count);
        if (end > first) apply_epilogue(*epilogue, y, out, 0, out, first, end - first);
    };
    if (members == 1) {
        slice(0, 1);
        return;
    }
    parallel_members(in * out * rows, slice);
}

int64_t onednn_linear_scratch_floats(int64_t out, int64_t rows) { return out * rows; }

namespace {

#if defined(__AVX512F__)
// GCC 12 warns that the intrinsics' own unused "undefined" operands may be uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// Transposes the 16 x 16 floats in r (r[i] holds row i; afterwards column i): within each
// 128-bit lane first, then across the lanes.
inline void transpose_16x16(__m512 r[16]) {
    __m512 t[16];
    for (int k = 0; k < 8; ++k) {
        t[2 * k] = _mm512_unpacklo_ps(r[2 * k], r[2 * k + 1]);
        t[2 * k + 1] = _mm512_unpackhi_ps(r[2 * k], r[2 * k + 1]);
    }
    auto as_pd = [](__m512 v) { return _mm512_castps_pd(v); };
    for (int k = 0; k < 4; ++k) {  // r[4k + c], lane L: column 4L + c of rows 4k .. 4k + 3
        r[4 * k] = _mm512_castpd_ps(_mm512_unpacklo_pd(as_pd(t[4 * k]), as_pd(t[4 * k + 2])));
        r[4 * k + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(as_pd(t[4 * k]), as_pd(t[4 * k + 2])));
        r[4 * k + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(as_pd(t[4 * k + 1]), as_pd(t[4 * k + 3])));
        r[4 * k + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(as_pd(t[4 * k + 1]), as_pd(t[4 * k + 3])));
    }
    for (int c = 0; c < 4; ++c) {
        t[c] = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x88);
        t[4 + c] = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xdd);
        t[8 + c] = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x88);
        t[12 + c] = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xdd);
    }
    for (int c = 0; c < 4; ++c) {
        r[c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0x88);
        r[8 + c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0xdd);
        r[4 + c] = _mm512_shuffle_f32x4(t[4 + c], t[12 + c], 0x88);
        r[12 + c] = _mm512_shuffle_f32x4(t[4 + c], t[12 + c], 0xdd);
    }
}

// float_to_bf16 on 16 values at once (round to nearest even, NaNs quieted).
inline __m256i to_bf16(__m512 v) {
    const __m512i bits = _mm512_castps_si512(v);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
    const __m512i rounded =
        _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff))), 16);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff)),
                                                  _mm512_set1_epi32(0x7f800000));
    const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, quiet));
}
#pragma GCC diagnostic pop
#endif

// Columns [first, end) of dY [rows x out] as rows of dY^T [out x rows], fp32 or bf16 codes:
// 16 x 16 tiles in registers where the build has AVX-512, element by element at the edges
// (and everywhere without it). With dy16, the same columns' bf16 codes in dY's own layout too,
// from the same reads.
template <typename Value>
void transpose_columns(const float* dy, Value* dy_t, int64_t out, int64_t rows, int64_t first, int64_t end,
                       uint16_t* dy16 = nullptr) {
    auto convert = [](float v) {
        if constexpr (sizeof(Value) == 2) return float_to_bf16(v);
        else return v;
    };
    int64_t r0 = 0;
#if defined(__AVX512F__)
    const int64_t tiled_end = first + (end - first) / 16 * 16;
    for (; r0 + 16 <= rows; r0 += 16) {
        for (int64_t o = first; o < tiled_end; o += 16) {
            __m512 tile[16];
            for (int i = 0; i < 16; ++i) tile[i] = _mm512_loadu_ps(dy + (r0 + i) * out + o);
            if (dy16)
                for (int i = 0; i < 16; ++i)
                    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dy16 + (r0 + i) * out + o), to_bf16(tile[i]));
            transpose_16x16(tile);
            for (int j = 0; j < 16; ++j) {
                Value* into = dy_t + (o + j) * rows + r0;
                if constexpr (sizeof(Value) == 2)
                    _mm256_storeu_si256(reinterpret_cast<__m256i*>(into), to_bf16(tile[j]));
                else
                    _mm512_storeu_ps(into, tile[j]);
            }
        }
        for (int64_t o = tiled_end; o < end; ++o)
            for (int64_t r = r0; r < r0 + 16; ++r) {
                dy_t[o * rows + r] = convert(dy[r * out + o]);
                if (dy16) dy16[r * out + o] = float_to_bf16(dy[r * out + o]);
            }
    }
#endif
    for (int64_t o = first; o < end; ++o)  // the rows left over
        for (int64_t r = r0; r < rows; ++r) {
            dy_t[o * rows + r] = convert(dy[r * out + o]);
            if (dy16) dy16[r * out + o] = float_to_bf16(dy[r * out + o]);
        }
}

}  // namespace

void onednn_linear_forward_bf16(OnednnProducts& products, const void* x, const void* w, const float* bias,
                                uint16_t* y, int64_t in, int64_t out, int64_t rows) {
    const MatmulShape shape = linear_forward_shape(MatmulOperands::bf16, in, out, rows, bias != nullptr, true);
    const int members = members_for(in * out * rows);
    products.prepare(shape, members);
    auto slice = [&](int member, int count) { products.run_slice(shape, member, count, x, w, bias, y); };
    if (members == 1) {
        slice(0, 1);
        return;
    }
    parallel_members(in * out * rows, slice);
}

void onednn_linear_backward(OnednnProducts& products, MatmulOperands operands, const void* x, const void* w,
                            const float* dy, float* grad_weight, float* grad_bias, float* grad_input, int64_t in,
                            int64_t out, int64_t rows, GradientWrite write, float* scratch) {
    const MatmulShape weight_grad = linear_weight_grad_shape(operands, in, out, rows, write);
    const MatmulShape input_grad = linear_input_grad_shape(operands, in, out, rows);
    const bool bf16 = operands == MatmulOperands::bf16;
    // dY's operands in scratch: dY^T, then (bf16) dY's codes; fp32 dX reads dy itself.
    auto* dy_t16 = reinterpret_cast<uint16_t*>(scratch);
    const void* dy_t = bf16 ? static_cast<const void*>(dy_t16) : scratch;
    uint16_t* dy16 = dy_t16 + out * rows;
    const void* dy_rows = bf16 ? static_cast<const void*>(dy16) : dy;
    if (grad_weight)
        parallel_range(out, rows, [&](int64_t first, int64_t end) {
            if (bf16) transpose_columns(dy, dy_t16, out, rows, first, end, grad_input ? dy16 : nullptr);
            else transpose_columns(dy, scratch, out, rows, first, end);
        });
    if (bf16 && grad_input && !grad_weight) store_16bit(Precision::bf16, dy, dy16, rows * out);
    const int64_t work = backward_work(in, out, rows, grad_weight != nullptr, grad_input != nullptr);
    const int members = members_for(work);
    if (grad_weight) products.prepare(weight_grad, members);
    if (grad_input) products.prepare(input_grad, members);
    // Each member computes its rows of dW (and of db), then its rows of dX, with no wait between.
    auto slice = [&](int member, int count) {
        if (grad_weight) {
            products.run_slice(weight_grad, member, count, dy_t, x, nullptr, grad_weight);
            if (grad_bias)  // this member's outputs: sums of dY^T's rows, the values dW multiplied
                for (int64_t o = slice_row_begin(out, member, count); o < slice_row_begin(out, member + 1, count); ++o) {
                    float sum = 0.0f;
                    if (bf16) {
                        const uint16_t* g = dy_t16 + o * rows;
#pragma omp simd reduction(+ : sum)
                        for (int64_t r = 0; r < rows; ++r) sum += bf16_to_float(g[r]);
                    } else {
                        const float* g = scratch + o * rows;
#pragma omp simd reduction(+ : sum)
                        for (int64_t r = 0; r < rows; ++r) sum += g[r];
                    }
                    grad_bias[o] = write == GradientWrite::overwrite ? sum : grad_bias[o] + sum;
                }
        }
        if (grad_input) products.run_slice(input_grad, member, count, dy_rows, w, nullptr, grad_input);
    };
    if (members == 1) {
        slice(0, 1);
        return;
    }
    parallel_members(work, slice);
}

}  // namespace trainbench
