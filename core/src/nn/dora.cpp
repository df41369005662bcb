#include "nn/dora.hpp"

#include <algorithm>
#include <cmath>

#include "parallel/parallel_range.hpp"
#include "parallel/worker_team.hpp"

namespace trainbench {

float dora_row_norm(const float* row, int64_t n) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(row[i]) * row[i];
    return static_cast<float>(std::sqrt(sum));
}

int64_t dora_norm_scratch_floats(int64_t in, int threads) { return in * threads; }

void dora_weight_norms(const float* weight, const float* lora_a, const float* lora_b, float scale, int64_t in,
                       int64_t out, int64_t rank, float* norms, float* scratch) {
    parallel_members(out * in * (rank + 1), [&](int member, int members) {
        float* row = scratch + member * in;
        for (int64_t j = out * member / members; j < out * (member + 1) / members; ++j) {
            // W_j + scale * sum_k B_jk A_k, in the order PEFT's (B @ A) then add would give up to rounding.
            for (int64_t i = 0; i < in; ++i) row[i] = 0.0f;
            for (int64_t k = 0; k < rank; ++k) {
                const float b = lora_b[j * rank + k];
                const float* a = lora_a + k * in;
#pragma omp simd
                for (int64_t i = 0; i < in; ++i) row[i] += b * a[i];
            }
            const float* w = weight + j * in;
#pragma omp simd
            for (int64_t i = 0; i < in; ++i) row[i] = w[i] + scale * row[i];
            norms[j] = dora_row_norm(row, in);
        }
    });
}

void dora_forward(float* output, const float* bias, const float* magnitude, const float* norms, float* unscaled,
                  int64_t rows, int64_t out) {
    parallel_range(rows, out, [&](int64_t first, int64_t end) {
        for (int64_t r = first; r < end; ++r) {
            float* y = output + r * out;
            float* z = unscaled + r * out;
#pragma omp simd
            for (int64_t j = 0; j < out; ++j) {
                z[j] = y[j] - bias[j];
                y[j] += (magnitude[j] / norms[j] - 1.0f) * z[j];
            }
        }
    });
}

void dora_backward(const float* grad_output, const float* unscaled, const float* magnitude, const float* norms,
                   float* grad_magnitude, float* scaled_grad, int64_t rows, int64_t out, GradientWrite write) {
    // Columns split across the team: each dm_j summed by one thread over the rows in order, a
    // block of columns at a time so that every row is read along its length.
    constexpr int64_t kColumns = 256;
    parallel_range(out, rows, [&](int64_t first, int64_t end) {
        for (int64_t block = first; block < end; block += kColumns) {
            const int64_t width = std::min(kColumns, end - block);
            double sums[kColumns] = {};
            for (int64_t r = 0; r < rows; ++r) {
                const float* g = grad_output + r * out + block;
                const float* z = unscaled + r * out + block;
#pragma omp simd
                for (int64_t j = 0; j < width; ++j) sums[j] += static_cast<double>(g[j]) * z[j];
            }
            for (int64_t j = 0; j < width; ++j) {
                const float dm = static_cast<float>(sums[j] / norms[block + j]);
                float& into = grad_magnitude[block + j];
                into = write == GradientWrite::overwrite ? dm : into + dm;
            }
        }
    });
    parallel_range(rows, out, [&](int64_t first, int64_t end) {
        for (int64_t r = first; r < end; ++r)
#pragma omp simd
            for (int64_t j = 0; j < out; ++j) scaled_grad[r * out + j] = grad_output[r * out + j] * (magnitude[j] / norms[j]);
    });
}

}  // namespace trainbench
