#include "nn/onednn_linear.hpp"

#include <algorithm>

#include "parallel/parallel_range.hpp"
#include "precision/half_float.hpp"

namespace trainbench {

// In row-major terms: X [rows x in], W [out x in], Y and dY [rows x out].
MatmulShape linear_forward_shape(MatmulOperands operands, int64_t in, int64_t out, int64_t rows, bool bias) {
    // Y = X W^T: W^T (p, j) = W[j][p]
    return {.operands = operands, .m = rows, .k = in, .n = out, .a_row = in, .a_col = 1, .b_row = 1, .b_col = in,
            .c_row = out, .bias = bias};
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
                           bool bias, bool weight_grad, bool input_grad) {
    products.prepare(linear_forward_shape(operands, in, out, rows, bias), members_for(in * out * rows));
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

// Rows [first, end) of dY^T [out x rows] from dY [rows x out], as fp32 or bf16 codes.
template <typename Value, typename Convert>
void transpose_rows(const float* dy, Value* dy_t, int64_t out, int64_t rows, int64_t first, int64_t end,
                    Convert convert) {
    constexpr int64_t kBlock = 64;  // rows of dY read per pass: 64 lines of each output row in cache
    for (int64_t r0 = 0; r0 < rows; r0 += kBlock) {
        const int64_t r1 = std::min(rows, r0 + kBlock);
        for (int64_t o = first; o < end; ++o)
            for (int64_t r = r0; r < r1; ++r) dy_t[o * rows + r] = convert(dy[r * out + o]);
    }
}

}  // namespace

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
    parallel_range(out, rows, [&](int64_t first, int64_t end) {
        if (!grad_weight) return;
        if (bf16) transpose_rows(dy, dy_t16, out, rows, first, end, [](float v) { return float_to_bf16(v); });
        else transpose_rows(dy, scratch, out, rows, first, end, [](float v) { return v; });
    });
    if (bf16 && grad_input) store_16bit(Precision::bf16, dy, dy16, rows * out);
    const int64_t work = backward_work(in, out, rows, grad_weight != nullptr, grad_input != nullptr);
    const int members = members_for(work);
    if (grad_weight) products.prepare(weight_grad, members);
    if (grad_input) products.prepare(input_grad, members);
    // Each member computes its rows of dW (and of db), then its rows of dX, with no wait between.
    auto slice = [&](int member, int count) {
        if (grad_weight) {
            products.run_slice(weight_grad, member, count, dy_t, x, nullptr, grad_weight);
            if (grad_bias) {  // this member's outputs, row by row of dY
                const int64_t first = slice_row_begin(out, member, count), end = slice_row_begin(out, member + 1, count);
                float* db = grad_bias + first;
                if (write == GradientWrite::overwrite) std::fill(db, db + (end - first), 0.0f);
                for (int64_t r = 0; r < rows; ++r) {
                    const float* g = dy + r * out + first;
#pragma omp simd
                    for (int64_t o = 0; o < end - first; ++o) db[o] += g[o];
                }
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
