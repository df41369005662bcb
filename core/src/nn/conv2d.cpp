#include "nn/conv2d.hpp"

#include <algorithm>
#include <stdexcept>

#include "parallel/parallel_range.hpp"

namespace trainbench {
namespace {

// Rows [n*HW, (n+1)*HW) of the receptive fields of sample n; zeros where the kernel overhangs.
void im2col_sample(const ConvShape& s, const float* input, float* rows) {
    const int64_t H = s.height, W = s.width, K = s.kernel, P = s.padding();
    for (int64_t y = 0; y < H; ++y)
        for (int64_t x = 0; x < W; ++x) {
            float* row = rows + (y * W + x) * s.patch();
            for (int64_t c = 0; c < s.in_channels; ++c) {
                const float* plane = input + c * H * W;
                for (int64_t ky = 0; ky < K; ++ky) {
                    const int64_t iy = y + ky - P;
                    for (int64_t kx = 0; kx < K; ++kx) {
                        const int64_t ix = x + kx - P;
                        *row++ = iy >= 0 && iy < H && ix >= 0 && ix < W ? plane[iy * W + ix] : 0.0f;
                    }
                }
            }
        }
}

// The inverse scatter: sample n's input gradient, overwritten, as the sum over the rows that
// read each input (in row order, so each element is summed in one order).
void col2im_sample(const ConvShape& s, const float* rows, float* grad_input) {
    const int64_t H = s.height, W = s.width, K = s.kernel, P = s.padding();
    std::fill(grad_input, grad_input + s.in_channels * H * W, 0.0f);
    for (int64_t y = 0; y < H; ++y)
        for (int64_t x = 0; x < W; ++x) {
            const float* row = rows + (y * W + x) * s.patch();
            for (int64_t c = 0; c < s.in_channels; ++c) {
                float* plane = grad_input + c * H * W;
                for (int64_t ky = 0; ky < K; ++ky) {
                    const int64_t iy = y + ky - P;
                    for (int64_t kx = 0; kx < K; ++kx, ++row) {
                        const int64_t ix = x + kx - P;
                        if (iy >= 0 && iy < H && ix >= 0 && ix < W) plane[iy * W + ix] += *row;
                    }
                }
            }
        }
}

// One sample's [HW, C] rows to its [C, HW] planes and back.
void rows_to_planes(const float* rows, float* planes, int64_t positions, int64_t channels) {
    for (int64_t p = 0; p < positions; ++p)
        for (int64_t c = 0; c < channels; ++c) planes[c * positions + p] = rows[p * channels + c];
}
void planes_to_rows(const float* planes, float* rows, int64_t positions, int64_t channels) {
    for (int64_t p = 0; p < positions; ++p)
        for (int64_t c = 0; c < channels; ++c) rows[p * channels + c] = planes[c * positions + p];
}

}  // namespace

int64_t conv2d_scratch_floats(const ConvShape& shape, int64_t samples) {
    const int64_t rows = samples * shape.positions();
    return rows * (shape.patch() + shape.out_channels);
}

void conv2d_forward(const ConvShape& s, const PackedLayout& layout, const float* packed, const float* bias,
                    const float* input, float* output, int64_t samples, float* scratch,
                    const ProductEpilogue* epilogue) {
    if (epilogue && epilogue->activated) throw std::logic_error("conv2d_forward: the epilogue runs in place only");
    const int64_t positions = s.positions(), in_size = s.in_channels * positions, out_size = s.out_channels * positions;
    float* fields = scratch;
    float* rows_out = scratch + samples * positions * s.patch();
    parallel_range(samples, positions * s.patch(), [&](int64_t first, int64_t end) {
        for (int64_t n = first; n < end; ++n) im2col_sample(s, input + n * in_size, fields + n * positions * s.patch());
    });
    packed_linear_forward(layout, packed, bias, fields, rows_out, samples * positions, epilogue);
    parallel_range(samples, out_size, [&](int64_t first, int64_t end) {
        for (int64_t n = first; n < end; ++n)
            rows_to_planes(rows_out + n * out_size, output + n * out_size, positions, s.out_channels);
    });
}

void conv2d_backward(const ConvShape& s, const PackedLayout& transposed, const float* packed_transposed,
                     const float* input, const float* grad_output, float* grad_weight, float* grad_bias,
                     float* grad_input, int64_t samples, GradientWrite write, float* scratch) {
    const int64_t positions = s.positions(), rows = samples * positions;
    const int64_t in_size = s.in_channels * positions, out_size = s.out_channels * positions;
    float* fields = scratch;
    float* grad_rows = scratch + rows * s.patch();
    parallel_range(samples, positions * (s.patch() + s.out_channels), [&](int64_t first, int64_t end) {
        for (int64_t n = first; n < end; ++n) {
            im2col_sample(s, input + n * in_size, fields + n * positions * s.patch());
            planes_to_rows(grad_output + n * out_size, grad_rows + n * out_size, positions, s.out_channels);
        }
    });
    linear_weight_grad(fields, grad_rows, grad_weight, grad_bias, s.patch(), s.out_channels, rows, write);
    if (!grad_input) return;
    // The receptive fields are spent: their gradients (W^T times each row's) take their place.
    float* grad_fields = fields;
    packed_linear_forward(transposed, packed_transposed, nullptr, grad_rows, grad_fields, rows);
    parallel_range(samples, positions * s.patch(), [&](int64_t first, int64_t end) {
        for (int64_t n = first; n < end; ++n)
            col2im_sample(s, grad_fields + n * positions * s.patch(), grad_input + n * in_size);
    });
}

}  // namespace trainbench
