#include "nn/max_pool.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "parallel/parallel_range.hpp"

namespace trainbench {
namespace {

// Offset (within its plane) of window (i, j)'s maximum, as torch's CPU kernel finds it: the
// first largest value in row order (`val > max || isnan(val)`, so a NaN wins).
int64_t window_max(const float* plane, int64_t width, int64_t i, int64_t j) {
    int64_t best = 2 * i * width + 2 * j;
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t dy = 0; dy < 2; ++dy)
        for (int64_t dx = 0; dx < 2; ++dx) {
            const int64_t at = (2 * i + dy) * width + 2 * j + dx;
            if (plane[at] > max || std::isnan(plane[at])) {
                best = at;
                max = plane[at];
            }
        }
    return best;
}

}  // namespace

void max_pool_forward(const float* input, float* output, int64_t samples, int64_t channels, int64_t height,
                      int64_t width) {
    const int64_t oh = height / 2, ow = width / 2, planes = samples * channels;
    parallel_range(planes, height * width, [&](int64_t first, int64_t end) {
        for (int64_t p = first; p < end; ++p) {
            const float* plane = input + p * height * width;
            float* out = output + p * oh * ow;
            for (int64_t i = 0; i < oh; ++i)
                for (int64_t j = 0; j < ow; ++j) out[i * ow + j] = plane[window_max(plane, width, i, j)];
        }
    });
}

void max_pool_backward(const float* input, const float* grad_output, float* grad_input, int64_t samples,
                       int64_t channels, int64_t height, int64_t width, GradientWrite write) {
    const int64_t oh = height / 2, ow = width / 2, planes = samples * channels;
    parallel_range(planes, height * width, [&](int64_t first, int64_t end) {
        for (int64_t p = first; p < end; ++p) {
            const float* plane = input + p * height * width;
            const float* dout = grad_output + p * oh * ow;
            float* din = grad_input + p * height * width;
            if (write == GradientWrite::overwrite) std::fill(din, din + height * width, 0.0f);
            for (int64_t i = 0; i < oh; ++i)
                for (int64_t j = 0; j < ow; ++j) din[window_max(plane, width, i, j)] += dout[i * ow + j];
        }
    });
}

}  // namespace trainbench
