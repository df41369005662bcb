#include "nn/layernorm.hpp"

#include <algorithm>
#include <cmath>

#include "parallel/parallel_range.hpp"
#include "precision/half_float.hpp"
#include "precision/lane_sum.hpp"

namespace trainbench {
namespace {

// dweight and dbias are sums over all rows. To make their bits independent of the number of
// threads, the rows are cut into at most kRowChunks chunks fixed by `rows` alone; each chunk
// sums its rows in order into its own slot of the scratch, and the slots are then added in
// chunk order. 64 chunks keep two to a few dozen threads busy at a scratch of 128 C floats.
constexpr int64_t kRowChunks = 64;

int64_t row_chunks(int64_t rows) { return std::min(rows, kRowChunks); }

// Per-row statistics in double (C additions per row: cheap), stored as float as torch does.
// Two passes (mean, then squared deviations) avoid the cancellation of E[x^2] - E[x]^2.
void layernorm_row(const float* x, const float* weight, const float* bias, float* y, float* mean, float* rstd,
                   int64_t C) {
    const double m = lane_sum(C, [&](int64_t i) { return static_cast<double>(x[i]); }) / static_cast<double>(C);
    const double squares = lane_sum(C, [&](int64_t i) {
        const double d = static_cast<double>(x[i]) - m;
        return d * d;
    });
    const float mu = static_cast<float>(m);
    const float rs = static_cast<float>(1.0 / std::sqrt(squares / static_cast<double>(C) + kLayerNormEps));
    *mean = mu;
    *rstd = rs;
#pragma omp simd
    for (int64_t i = 0; i < C; ++i) y[i] = (x[i] - mu) * rs * weight[i] + bias[i];
}

}  // namespace

void layernorm_forward(const float* inp, const float* weight, const float* bias, float* out, float* mean,
                       float* rstd, int64_t rows, int64_t C) {
    parallel_range(rows, 6 * C, [&](int64_t first, int64_t end) {
        for (int64_t r = first; r < end; ++r) layernorm_row(inp + r * C, weight, bias, out + r * C, mean + r, rstd + r, C);
    });
}

void residual_layernorm_forward(const float* a, const float* b, float* sum, const float* weight, const float* bias,
                                float* out, float* mean, float* rstd, int64_t rows, int64_t C, Precision rounding) {
    parallel_range(rows, 7 * C, [&](int64_t first, int64_t end) {
        for (int64_t r = first; r < end; ++r) {
            const float* x0 = a + r * C;
            const float* x1 = b + r * C;
            float* x = sum + r * C;
#pragma omp simd
            for (int64_t i = 0; i < C; ++i) x[i] = x0[i] + x1[i];
            if (rounding != Precision::fp32) round_to_16bit_serial(rounding, x, C);
            layernorm_row(x, weight, bias, out + r * C, mean + r, rstd + r, C);
        }
    });
}

void layernorm_forward_16bit(Precision precision, const uint16_t* inp, const float* weight, const float* bias,
                             uint16_t* out, float* mean, float* rstd, int64_t rows, int64_t C, float* x_staging,
                             float* y_staging) {
    parallel_range(rows, 7 * C, [&](int64_t first, int64_t end) {
        // Every row of the thread's range in the same staging row, still in cache from the last
        // (widening each into a row of its own wrote fresh lines all across the staging).
        float* x = x_staging + first * C;
        float* y = y_staging + first * C;
        for (int64_t r = first; r < end; ++r) {
            load_16bit_serial(precision, inp + r * C, x, C);
            layernorm_row(x, weight, bias, y, mean + r, rstd + r, C);
            store_16bit_serial(precision, y, out + r * C, C);
        }
    });
}

void residual_layernorm_forward_16bit(Precision precision, const uint16_t* a, const uint16_t* b, uint16_t* sum,
                                      const float* weight, const float* bias, uint16_t* out, float* mean, float* rstd,
                                      int64_t rows, int64_t C, float* x_staging, float* y_staging) {
    parallel_range(rows, 9 * C, [&](int64_t first, int64_t end) {
        float* x = x_staging + first * C;  // one staging row per thread, as layernorm_forward_16bit
        float* y = y_staging + first * C;
        for (int64_t r = first; r < end; ++r) {
            load_16bit_serial(precision, a + r * C, x, C);
            load_16bit_serial(precision, b + r * C, y, C);
#pragma omp simd
            for (int64_t i = 0; i < C; ++i) x[i] += y[i];
            // The LayerNorm reads the sum as its storage holds it.
            store_16bit_serial(precision, x, sum + r * C, C);
            load_16bit_serial(precision, sum + r * C, x, C);
            layernorm_row(x, weight, bias, y, mean + r, rstd + r, C);
            store_16bit_serial(precision, y, out + r * C, C);
        }
    });
}

int64_t layernorm_backward_scratch_floats(int64_t C) { return kRowChunks * 2 * C; }

// With n = (x - mean) * rstd and dn = weight * dout (llm.c's layernorm_backward):
//   dinp = rstd * (dn - mean(dn) - n * mean(dn * n)),  dweight = sum dout * n,  dbias = sum dout.
namespace {

// The backward over rows whose input row r is input_row(r, slot) (fp32 values, in cache);
// slot is the first row of r's chunk, one per chunk, where a 16-bit input is widened.
template <class InputRow>
void layernorm_backward_rows(const float* dout, InputRow input_row, const float* weight, const float* mean,
                             const float* rstd, float* dinp, float* dweight, float* dbias, int64_t rows, int64_t C,
                             GradientWrite input_write, GradientWrite param_write, float* scratch) {
    const int64_t chunks = row_chunks(rows);
    const bool accumulate_input = input_write == GradientWrite::accumulate;
    parallel_range(chunks, (rows / std::max<int64_t>(chunks, 1) + 1) * 12 * C, [&](int64_t first, int64_t end) {
        for (int64_t c = first; c < end; ++c) {
            float* part_w = scratch + c * 2 * C;
            float* part_b = part_w + C;
            std::fill(part_w, part_w + 2 * C, 0.0f);
            for (int64_t r = rows * c / chunks; r < rows * (c + 1) / chunks; ++r) {
                const float* x = input_row(r, rows * c / chunks);
                const float* dy = dout + r * C;
                float* dx = dinp + r * C;
                const float mu = mean[r], rs = rstd[r];
                const double sum_dn = lane_sum(C, [&](int64_t i) { return static_cast<double>(weight[i] * dy[i]); });
                const double sum_dn_n = lane_sum(C, [&](int64_t i) {
                    const float n = (x[i] - mu) * rs;
                    return static_cast<double>(weight[i] * dy[i]) * n;
                });
#pragma omp simd
                for (int64_t i = 0; i < C; ++i) {
                    const float n = (x[i] - mu) * rs;
                    part_w[i] += dy[i] * n;
                    part_b[i] += dy[i];
                }
                const float mean_dn = static_cast<float>(sum_dn / static_cast<double>(C));
                const float mean_dn_n = static_cast<float>(sum_dn_n / static_cast<double>(C));
                if (accumulate_input) {
#pragma omp simd
                    for (int64_t i = 0; i < C; ++i) {
                        const float n = (x[i] - mu) * rs;
                        dx[i] += (weight[i] * dy[i] - mean_dn - n * mean_dn_n) * rs;
                    }
                } else {
#pragma omp simd
                    for (int64_t i = 0; i < C; ++i) {
                        const float n = (x[i] - mu) * rs;
                        dx[i] = (weight[i] * dy[i] - mean_dn - n * mean_dn_n) * rs;
                    }
                }
            }
        }
    });
    if (!dweight) return;  // frozen weight and bias
    const bool accumulate_params = param_write == GradientWrite::accumulate;
    parallel_range(C, 2 * chunks, [&](int64_t first, int64_t end) {
        for (int64_t i = first; i < end; ++i) {
            double sum_w = 0.0, sum_b = 0.0;
            for (int64_t c = 0; c < chunks; ++c) {
                sum_w += scratch[c * 2 * C + i];
                sum_b += scratch[c * 2 * C + C + i];
            }
            if (accumulate_params) {
                dweight[i] += static_cast<float>(sum_w);
                dbias[i] += static_cast<float>(sum_b);
            } else {
                dweight[i] = static_cast<float>(sum_w);
                dbias[i] = static_cast<float>(sum_b);
            }
        }
    });
}

}  // namespace

void layernorm_backward(const float* dout, const float* inp, const float* weight, const float* mean,
                        const float* rstd, float* dinp, float* dweight, float* dbias, int64_t rows, int64_t C,
                        GradientWrite input_write, GradientWrite param_write, float* scratch) {
    layernorm_backward_rows(dout, [&](int64_t r, int64_t) { return inp + r * C; }, weight, mean, rstd, dinp, dweight, dbias,
                            rows, C, input_write, param_write, scratch);
}

void layernorm_backward_16bit(Precision precision, const float* dout, const uint16_t* inp, float* x_staging,
                              const float* weight, const float* mean, const float* rstd, float* dinp, float* dweight,
                              float* dbias, int64_t rows, int64_t C, GradientWrite input_write,
                              GradientWrite param_write, float* scratch) {
    layernorm_backward_rows(
        dout,
        [&](int64_t r, int64_t slot) {
            load_16bit_serial(precision, inp + r * C, x_staging + slot * C, C);
            return static_cast<const float*>(x_staging + slot * C);
        },
        weight, mean, rstd, dinp, dweight, dbias, rows, C, input_write, param_write, scratch);
}

}  // namespace trainbench
