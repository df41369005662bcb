#include "nn/onednn_linear.hpp"

#include <immintrin.h>

#include <algorithm>
#include <stdexcept>

#include "nn/activation.hpp"
#include "parallel/parallel_range.hpp"
#include "precision/half_float.hpp"

// GCC 12 warns that the AVX-512 intrinsics' own unused "undefined" operands may be uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

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

namespace {
MatmulShape linear_weight_grad_part_shape(int64_t in, int64_t out, int64_t part_rows, GradientWrite write) {
    // dW (+)= dY_p^T X_p over a part of the rows, dY_p read in place as a transposed view
    return {.operands = MatmulOperands::bf16, .m = out, .k = part_rows, .n = in, .a_row = 1, .a_col = out,
            .b_row = in, .b_col = 1, .c_row = in, .accumulate = write == GradientWrite::accumulate};
}

// Calls fn(shape) for each product of a bf16 weight gradient split by rows across `members`:
// member 0's part written as `write` says, the others' into their partial sums.
template <class Fn>
void for_each_weight_grad_part(int64_t in, int64_t out, int64_t rows, int members, GradientWrite write, Fn fn) {
    for (int member = 0; member < members; ++member) {
        const int64_t part_rows = slice_row_begin(rows, member + 1, members) - slice_row_begin(rows, member, members);
        if (part_rows > 0)
            fn(linear_weight_grad_part_shape(in, out, part_rows, member == 0 ? write : GradientWrite::overwrite));
    }
}

// bf16 backward scratch: dY's codes, then either dY^T's codes or per member its partial dW and db.
int64_t codes_floats(int64_t out, int64_t rows) { return (out * rows + 31) / 32 * 16; }
int64_t partial_floats(int64_t in, int64_t out) { return (out * in + out + 15) / 16 * 16; }

// How a bf16 weight gradient dW = dY^T X is split across `members`. Either by dY's rows, each
// member's part a partial sum of dW (its rows of dY read in place as a transposed view), the
// partial sums added up afterwards: (members - 1) extra dW-sized sums, each written, read and
// added. Or by dW's rows, each member rounding its columns of dY into dY^T's codes itself (a
// pass over rows x out values): no partial sums. Whichever moves less memory: the MLP's layers
// (256 rows, 784-1024 inputs) transpose, the GPT's (4,096 rows, 128-512 inputs) sum partials.
bool weight_grad_transposes_codes(int64_t in, int64_t rows, int members) {
    return members > 1 && 2 * rows < 3 * int64_t{members - 1} * in;
}

// Rows of its slice a member of onednn_linear_forward_16bit_rows widens, multiplies and rounds
// at a time. Where W stays in L2 beside them (at most 256 KiB), blocks whose widened X and
// product Y take about 256 KiB, so that the product reads X, and the rounding reads Y, from L2
// rather than from memory (on an AVX2-only AMD EPYC, Zen 3, 512 KiB L2, the GPT benchmark's
// fp16 forward widening took 0.6 of the perf samples it had with whole slices, oneDNN's kernels
// 0.98). Otherwise the whole slice: each block reads all of W again, and blocks of the MLP's
// 3-4 MiB weights made its updates 7-10% slower. Blocks are whole multiples of 48 rows:
// oneDNN's fp32 kernels compute rows in groups of 24 (AVX2) or 48 (AVX-512), and in blocks of
// 48 most rows are grouped as in the member's whole slice, so most shapes keep its bits (the
// benchmark models' do). Not all: oneDNN picks its kernels by the whole product's shape, and a
// last block of 53 rows of a 161 x 130 product summed some rows differently in the last bit
// (AVX2), so the blocks are the engine's products.
constexpr int64_t kWidenedBlockBytes = int64_t{256} << 10;
constexpr int64_t kKernelRowGroup = 48;
int64_t widened_block_rows(int64_t in, int64_t out, int64_t slice_rows) {
    if (in * out * 4 > kWidenedBlockBytes) return std::max<int64_t>(slice_rows, 1);
    return std::max(kKernelRowGroup, kWidenedBlockBytes / ((in + out) * 4) / kKernelRowGroup * kKernelRowGroup);
}

// Calls fn(first, count) for each block of rows [first, first + count) that member `member` of
// `members` runs in onednn_linear_forward_16bit_rows, in order.
template <class Fn>
void for_each_widened_block(int64_t in, int64_t out, int64_t rows, int member, int members, Fn fn) {
    const int64_t first = slice_row_begin(rows, member, members), end = slice_row_begin(rows, member + 1, members);
    const int64_t block = widened_block_rows(in, out, end - first);
    for (int64_t row = first; row < end; row += block) fn(row, std::min(block, end - row));
}
}  // namespace

int64_t onednn_linear_scratchpad_bytes(MatmulOperands operands, int64_t in, int64_t out, int64_t rows, bool bias,
                                       bool input_grad, int threads, bool whole_forward) {
    int64_t bytes = 0;
    for (int members : {1, threads}) {
        if (whole_forward)
            bytes = std::max(bytes, onednn_scratchpad_bytes(linear_forward_shape(operands, in, out, rows, bias), members));
        if (operands == MatmulOperands::bf16)
            bytes = std::max(bytes, onednn_scratchpad_bytes(linear_forward_shape(operands, in, out, rows, bias, true), members));
        for (GradientWrite write : {GradientWrite::overwrite, GradientWrite::accumulate}) {
            if (operands == MatmulOperands::f32 || weight_grad_transposes_codes(in, rows, members))
                bytes = std::max(bytes, onednn_scratchpad_bytes(linear_weight_grad_shape(operands, in, out, rows, write), members));
            else
                for_each_weight_grad_part(in, out, rows, members, write, [&](const MatmulShape& part) {
                    bytes = std::max(bytes, onednn_scratchpad_bytes(part, 1));
                });
        }
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
                           bool bias, bool bf16_result, bool weight_grad, bool input_grad, bool whole_forward) {
    if (whole_forward)
        products.prepare(linear_forward_shape(operands, in, out, rows, bias, bf16_result), members_for(in * out * rows));
    const int members = members_for(backward_work(in, out, rows, weight_grad, input_grad));
    if (weight_grad)
        for (GradientWrite write : {GradientWrite::overwrite, GradientWrite::accumulate}) {
            if (operands == MatmulOperands::f32 || weight_grad_transposes_codes(in, rows, members))
                products.prepare(linear_weight_grad_shape(operands, in, out, rows, write), members);
            else
                for_each_weight_grad_part(in, out, rows, members, write,
                                          [&](const MatmulShape& part) { products.prepare(part, 1); });
        }
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
    parallel_members(in * out * rows, slice);
}

std::vector<RowBlock> onednn_linear_16bit_rows_blocks(int64_t in, int64_t out, int64_t rows, int members) {
    std::vector<RowBlock> blocks;
    for (int member = 0; member < members; ++member)
        for_each_widened_block(in, out, rows, member, members,
                               [&](int64_t first, int64_t count) { blocks.push_back({member, first, count}); });
    return blocks;
}

int64_t onednn_linear_16bit_rows_scratchpad_bytes(int64_t in, int64_t out, int64_t rows, bool bias, int threads) {
    int64_t bytes = 0;
    for (int members : {1, threads})
        for (int member = 0; member < members; ++member)
            for_each_widened_block(in, out, rows, member, members, [&](int64_t, int64_t count) {
                bytes = std::max(bytes, onednn_scratchpad_bytes(linear_forward_shape(MatmulOperands::f32, in, out, count, bias), 1));
            });
    return bytes;
}

void onednn_linear_prepare_16bit_rows(OnednnProducts& products, int64_t in, int64_t out, int64_t rows, bool bias) {
    const int members = members_for(in * out * rows);
    for (int member = 0; member < members; ++member)
        for_each_widened_block(in, out, rows, member, members, [&](int64_t, int64_t count) {
            products.prepare(linear_forward_shape(MatmulOperands::f32, in, out, count, bias), 1);
        });
}

void onednn_linear_forward_16bit_rows(OnednnProducts& products, Precision precision, const uint16_t* x16,
                                      float* x_staging, const float* w, const float* bias, float* y, uint16_t* y16,
                                      int64_t in, int64_t out, int64_t rows, const ProductEpilogue* epilogue) {
    onednn_linear_prepare_16bit_rows(products, in, out, rows, bias != nullptr);
    const bool stores_codes = y16 != nullptr && !(epilogue && epilogue->activated_codes);
    auto slice = [&](int member, int count) {
        // Every block of the member's rows widened into the same place, the start of its rows of
        // staging, where the previous block's values still sit in cache.
        float* widened = x_staging + slice_row_begin(rows, member, count) * in;
        for_each_widened_block(in, out, rows, member, count, [&](int64_t first, int64_t block) {
            load_16bit_serial(precision, x16 + first * in, widened, block * in);
            products.run(linear_forward_shape(MatmulOperands::f32, in, out, block, bias != nullptr), member, widened, w,
                         bias, y + first * out);
            if (epilogue) apply_epilogue(*epilogue, y, out, 0, out, first, block);
            if (stores_codes) store_16bit_serial(precision, y + first * out, y16 + first * out, block * out);
        });
    };
    parallel_members(in * out * rows, slice);
}

int64_t onednn_linear_scratch_floats(MatmulOperands operands, int64_t in, int64_t out, int64_t rows, int threads) {
    if (operands == MatmulOperands::f32) return out * rows;
    // A backward too small to split runs as one member (partials: its db only).
    const int64_t one_member = codes_floats(out, rows) + partial_floats(in, out);
    const int64_t split = weight_grad_transposes_codes(in, rows, threads)
                              ? 2 * codes_floats(out, rows)
                              : codes_floats(out, rows) + std::max(threads, 1) * partial_floats(in, out);
    return std::max(one_member, split);
}

namespace {

#if defined(__AVX512F__)
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

#elif defined(__AVX2__) && defined(__F16C__)

// Transposes an 8 x 8 block held as eight row registers, in place.
inline void transpose_8x8(__m256 r[8]) {
    __m256 t[8];
    for (int k = 0; k < 4; ++k) {  // pairs of rows interleaved
        t[2 * k] = _mm256_unpacklo_ps(r[2 * k], r[2 * k + 1]);
        t[2 * k + 1] = _mm256_unpackhi_ps(r[2 * k], r[2 * k + 1]);
    }
    for (int k = 0; k < 2; ++k) {  // r[4k + c], each 128-bit half: column c (or c + 4) of rows 4k .. 4k + 3
        r[4 * k] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], 0x44);
        r[4 * k + 1] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], 0xee);
        r[4 * k + 2] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0x44);
        r[4 * k + 3] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0xee);
    }
    for (int c = 0; c < 4; ++c) {
        t[c] = _mm256_permute2f128_ps(r[c], r[4 + c], 0x20);
        t[4 + c] = _mm256_permute2f128_ps(r[c], r[4 + c], 0x31);
    }
    for (int c = 0; c < 8; ++c) r[c] = t[c];
}

#endif

// Columns [first, end) of dY [rows x out] as rows of dY^T [out x rows]: 16 x 16 tiles in
// registers where the build has AVX-512, 8 x 8 where it has AVX2, element by element at the
// edges (and everywhere without either). A 16-bit run's dY is rounded to `rounding` in place on
// the way (fp32: as it is), so the products that read it, and dY^T, take the 16-bit values
// without a pass of their own.
void transpose_columns(float* dy, float* dy_t, int64_t out, int64_t rows, int64_t first, int64_t end,
                       Precision rounding) {
    const bool rounds = rounding != Precision::fp32;
    auto element = [&](int64_t r, int64_t o) {
        float& value = dy[r * out + o];
        if (rounds)  // round_to_16bit_serial's bits, without a call per value
            value = rounding == Precision::bf16 ? bf16_to_float(float_to_bf16(value)) : fp16_to_float(float_to_fp16(value));
        dy_t[o * rows + r] = value;
    };
    int64_t rows_done = 0;  // rows every column in [first, end) has had transposed
#if defined(__AVX512F__)
    const int64_t tiled_end = first + (end - first) / 16 * 16;
    const int64_t tiled_rows = rows / 16 * 16;
    // Sixteen columns at a time down all the rows: dY^T's sixteen rows are written as sixteen
    // sequential streams (rows in the outer loop scattered each tile's stores over every row of
    // dY^T, and took 2.7 times as long on the GPT benchmark's fp32 update).
    for (int64_t o = first; o < tiled_end; o += 16)
        for (int64_t r0 = 0; r0 < tiled_rows; r0 += 16) {
            __m512 tile[16];
            for (int i = 0; i < 16; ++i) {
                float* row = dy + (r0 + i) * out + o;
                if (rounding == Precision::fp16) {  // in registers, as round_to_16bit_serial's vectors do
                    tile[i] = _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_loadu_ps(row), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
                    _mm512_storeu_ps(row, tile[i]);
                    continue;
                }
                if (rounds) round_to_16bit_serial(rounding, row, 16);
                tile[i] = _mm512_loadu_ps(row);
            }
            transpose_16x16(tile);
            for (int j = 0; j < 16; ++j) _mm512_storeu_ps(dy_t + (o + j) * rows + r0, tile[j]);
        }
    for (int64_t o = tiled_end; o < end; ++o)
        for (int64_t r = 0; r < tiled_rows; ++r) element(r, o);
    rows_done = tiled_rows;
#elif defined(__AVX2__) && defined(__F16C__)
    // As above, eight columns at a time: without the tiles this transpose took 12% of the
    // benchmark GPT's fp32 update on an AVX2-only AMD EPYC (Zen 3, perf), and a 16-bit run's
    // rounding a call per value on top.
    const int64_t tiled_end = first + (end - first) / 8 * 8;
    const int64_t tiled_rows = rows / 8 * 8;
    for (int64_t o = first; o < tiled_end; o += 8)
        for (int64_t r0 = 0; r0 < tiled_rows; r0 += 8) {
            __m256 tile[8];
            for (int i = 0; i < 8; ++i) {
                float* row = dy + (r0 + i) * out + o;
                tile[i] = _mm256_loadu_ps(row);
                if (rounds) {
                    tile[i] = round_8_values(rounding, tile[i]);
                    _mm256_storeu_ps(row, tile[i]);
                }
            }
            transpose_8x8(tile);
            for (int j = 0; j < 8; ++j) _mm256_storeu_ps(dy_t + (o + j) * rows + r0, tile[j]);
        }
    for (int64_t o = tiled_end; o < end; ++o)
        for (int64_t r = 0; r < tiled_rows; ++r) element(r, o);
    rows_done = tiled_rows;
#endif
    for (int64_t o = first; o < end; ++o)  // the rows left over
        for (int64_t r = rows_done; r < rows; ++r) element(r, o);
}

// Columns [first, end) of dY [rows x out] as rows of dY^T [out x rows], rounded to bf16 codes;
// dY itself is only read. 16 x 16 tiles in registers where the build has AVX-512.
void transpose_columns_to_bf16(const float* dy, uint16_t* dy_t, int64_t out, int64_t rows, int64_t first, int64_t end) {
    int64_t r0 = 0;
#if defined(__AVX512F__)
    const int64_t tiled_end = first + (end - first) / 16 * 16;
    alignas(64) float column[16];
    for (; r0 + 16 <= rows; r0 += 16) {
        for (int64_t o = first; o < tiled_end; o += 16) {
            __m512 tile[16];
            for (int i = 0; i < 16; ++i) tile[i] = _mm512_loadu_ps(dy + (r0 + i) * out + o);
            transpose_16x16(tile);
            for (int j = 0; j < 16; ++j) {
                _mm512_store_ps(column, tile[j]);
                store_16bit_serial(Precision::bf16, column, dy_t + (o + j) * rows + r0, 16);
            }
        }
        for (int64_t o = tiled_end; o < end; ++o)
            for (int64_t r = r0; r < r0 + 16; ++r) dy_t[o * rows + r] = float_to_bf16(dy[r * out + o]);
    }
#endif
    for (int64_t o = first; o < end; ++o)  // the rows left over
        for (int64_t r = r0; r < rows; ++r) dy_t[o * rows + r] = float_to_bf16(dy[r * out + o]);
}

}  // namespace

void onednn_linear_forward_bf16(OnednnProducts& products, const void* x, const void* w, const float* bias,
                                uint16_t* y, int64_t in, int64_t out, int64_t rows, const ProductEpilogue* epilogue) {
    const MatmulShape shape = linear_forward_shape(MatmulOperands::bf16, in, out, rows, bias != nullptr, true);
    const int members = members_for(in * out * rows);
    products.prepare(shape, members);
    auto slice = [&](int member, int count) {
        products.run_slice(shape, member, count, x, w, bias, y);
        if (!epilogue) return;
        const int64_t first = slice_row_begin(rows, member, count), end = slice_row_begin(rows, member + 1, count);
        activation_forward_16bit_serial(epilogue->activation, Precision::bf16, y + first * out,
                                        epilogue->activated_codes + first * out, (end - first) * out);
    };
    parallel_members(in * out * rows, slice);
}

namespace {

// fp32 operands: dW's reduction over rows runs along rows of A in oneDNN's fast kernels, so dY
// is transposed into scratch first and dW is split by its rows; dX reads dy in place.
void backward_f32(OnednnProducts& products, const float* x, const float* w, float* dy, float* grad_weight,
                  float* grad_bias, float* grad_input, int64_t in, int64_t out, int64_t rows, GradientWrite write,
                  float* dy_t, Precision rounding) {
    const MatmulShape weight_grad = linear_weight_grad_shape(MatmulOperands::f32, in, out, rows, write);
    const MatmulShape input_grad = linear_input_grad_shape(MatmulOperands::f32, in, out, rows);
    if (grad_weight)
        parallel_range(out, rows, [&](int64_t first, int64_t end) {
            transpose_columns(dy, dy_t, out, rows, first, end, rounding);
        });
    else if (rounding != Precision::fp32)
        round_to_16bit(rounding, dy, out * rows);
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
                    const float* g = dy_t + o * rows;
#pragma omp simd reduction(+ : sum)
                    for (int64_t r = 0; r < rows; ++r) sum += g[r];
                    grad_bias[o] = write == GradientWrite::overwrite ? sum : grad_bias[o] + sum;
                }
        }
        if (grad_input) products.run_slice(input_grad, member, count, dy, w, nullptr, grad_input);
    };
    parallel_members(work, slice);
}

// bf16 operands, dW split by its rows (weight_grad_transposes_codes): each member rounds its
// rows of dY into codes for its rows of dX, and its columns of dY into dY^T's codes for its rows
// of dW and db, both straight from dY, so no member waits for another.
void backward_bf16_transposed(OnednnProducts& products, const uint16_t* x, const uint16_t* w, const float* dy,
                              float* grad_weight, float* grad_bias, float* grad_input, int64_t in, int64_t out,
                              int64_t rows, GradientWrite write, float* scratch, int members) {
    uint16_t* dy16 = onednn_linear_dy_codes(scratch);
    auto* dy_t16 = reinterpret_cast<uint16_t*>(scratch + codes_floats(out, rows));
    const MatmulShape weight_grad = linear_weight_grad_shape(MatmulOperands::bf16, in, out, rows, write);
    const MatmulShape input_grad = linear_input_grad_shape(MatmulOperands::bf16, in, out, rows);
    products.prepare(weight_grad, members);
    if (grad_input) products.prepare(input_grad, members);
    auto slice = [&](int member, int count) {
        const int64_t o0 = slice_row_begin(out, member, count), o1 = slice_row_begin(out, member + 1, count);
        transpose_columns_to_bf16(dy, dy_t16, out, rows, o0, o1);
        products.run_slice(weight_grad, member, count, dy_t16, x, nullptr, grad_weight);
        if (grad_bias)  // this member's outputs: sums of dY^T's rows, the values dW multiplied
            for (int64_t o = o0; o < o1; ++o) {
                float sum = 0.0f;
                const uint16_t* g = dy_t16 + o * rows;
#pragma omp simd reduction(+ : sum)
                for (int64_t r = 0; r < rows; ++r) sum += bf16_to_float(g[r]);
                grad_bias[o] = write == GradientWrite::overwrite ? sum : grad_bias[o] + sum;
            }
        if (!grad_input) return;
        const int64_t r0 = slice_row_begin(rows, member, count), r1 = slice_row_begin(rows, member + 1, count);
        store_16bit_serial(Precision::bf16, dy + r0 * out, dy16 + r0 * out, (r1 - r0) * out);
        products.run_slice(input_grad, member, count, dy16, w, nullptr, grad_input);
    };
    parallel_members(backward_work(in, out, rows, true, grad_input != nullptr), slice);
}

// bf16 operands otherwise: split by rows of dY, the rows each member rounds into codes itself.
// Its part of dX is its rows; its part of dW (dY_p^T X_p, dY_p read as a transposed view, which
// oneDNN's AMX kernels take when the view is dense, as a part of the rows is) is a partial sum,
// as is its part of db, added up once every member is done. No transpose of dY, and each
// member only reads the rows it rounded.
void backward_bf16(OnednnProducts& products, const uint16_t* x, const uint16_t* w, const float* dy, float* grad_weight,
                   float* grad_bias, float* grad_input, int64_t in, int64_t out, int64_t rows, GradientWrite write,
                   float* scratch, const uint16_t* dy_codes) {
    const int64_t work = backward_work(in, out, rows, grad_weight != nullptr, grad_input != nullptr);
    const int members = members_for(work);
    if (grad_weight && weight_grad_transposes_codes(in, rows, members)) {
        if (dy_codes) throw std::logic_error("onednn_linear_backward: this shape transposes dY, so it needs dY's values");
        return backward_bf16_transposed(products, x, w, dy, grad_weight, grad_bias, grad_input, in, out, rows, write,
                                        scratch, members);
    }
    uint16_t* rounded = onednn_linear_dy_codes(scratch);
    const uint16_t* dy16 = dy_codes ? dy_codes : rounded;
    float* partials = scratch + codes_floats(out, rows);
    const int64_t partial = partial_floats(in, out);
    const MatmulShape input_grad = linear_input_grad_shape(MatmulOperands::bf16, in, out, rows);
    if (grad_input) products.prepare(input_grad, members);
    if (grad_weight)
        for_each_weight_grad_part(in, out, rows, members, write, [&](const MatmulShape& part) { products.prepare(part, 1); });
    auto slice = [&](int member, int count) {
        const int64_t r0 = slice_row_begin(rows, member, count), r1 = slice_row_begin(rows, member + 1, count);
        if (r1 == r0) return;
        if (!dy_codes) store_16bit_serial(Precision::bf16, dy + r0 * out, rounded + r0 * out, (r1 - r0) * out);
        if (grad_weight) {
            float* dw = member == 0 ? grad_weight : partials + member * partial;
            const GradientWrite part_write = member == 0 ? write : GradientWrite::overwrite;
            products.run(linear_weight_grad_part_shape(in, out, r1 - r0, part_write), member, dy16 + r0 * out,
                         x + r0 * in, nullptr, dw);
            if (grad_bias) {  // the column sums of this member's rounded rows
                float* db = partials + member * partial + out * in;
                std::fill(db, db + out, 0.0f);
                for (int64_t r = r0; r < r1; ++r) {
                    const uint16_t* g = dy16 + r * out;
#pragma omp simd
                    for (int64_t o = 0; o < out; ++o) db[o] += bf16_to_float(g[o]);
                }
            }
        }
        if (grad_input) products.run_slice(input_grad, member, count, dy16, w, nullptr, grad_input);
    };
    parallel_members(work, slice);
    if (!grad_weight) return;
    // The members' partial sums, added in member order.
    auto parts_of = [&](int64_t first, int64_t end) {
        for (int member = 1; member < members; ++member) {
            if (slice_row_begin(rows, member + 1, members) == slice_row_begin(rows, member, members)) continue;
            const float* dw = partials + member * partial;
#pragma omp simd
            for (int64_t i = first * in; i < end * in; ++i) grad_weight[i] += dw[i];
        }
        if (!grad_bias) return;
        for (int64_t o = first; o < end; ++o) {
            float sum = partials[out * in + o];
            for (int member = 1; member < members; ++member)
                if (slice_row_begin(rows, member + 1, members) > slice_row_begin(rows, member, members))
                    sum += partials[member * partial + out * in + o];
            grad_bias[o] = write == GradientWrite::overwrite ? sum : grad_bias[o] + sum;
        }
    };
    if (members == 1) parts_of(0, out);
    else parallel_range(out, in * members, parts_of);
}

}  // namespace

bool onednn_linear_takes_dy_codes(int64_t in, int64_t out, int64_t rows, bool weight_grad, bool input_grad, int threads) {
    const int members = members_for(backward_work(in, out, rows, weight_grad, input_grad), threads);
    return !(weight_grad && weight_grad_transposes_codes(in, rows, members));
}

uint16_t* onednn_linear_dy_codes(float* scratch) { return reinterpret_cast<uint16_t*>(scratch); }

void onednn_linear_backward(OnednnProducts& products, MatmulOperands operands, const void* x, const void* w,
                            float* dy, float* grad_weight, float* grad_bias, float* grad_input, int64_t in,
                            int64_t out, int64_t rows, GradientWrite write, float* scratch, Precision rounding,
                            const uint16_t* dy_codes) {
    if (dy_codes && operands == MatmulOperands::f32)
        throw std::logic_error("onednn_linear_backward: fp32 operands take dY's values, not bf16 codes");
    if (operands == MatmulOperands::f32)
        backward_f32(products, static_cast<const float*>(x), static_cast<const float*>(w), dy, grad_weight, grad_bias,
                     grad_input, in, out, rows, write, scratch, rounding);
    else
        backward_bf16(products, static_cast<const uint16_t*>(x), static_cast<const uint16_t*>(w), dy, grad_weight,
                      grad_bias, grad_input, in, out, rows, write, scratch, dy_codes);
}

}  // namespace trainbench
