#include "nn/embedding.hpp"

#include <algorithm>

#include "parallel/parallel_range.hpp"

namespace trainbench {
namespace {
// Column ranges given to threads are whole 64-byte lines, so two threads never write one line.
constexpr int64_t kColumnBlock = 16;

void add_row(const float* from, float* to, int64_t count) {
#pragma omp simd
    for (int64_t i = 0; i < count; ++i) to[i] += from[i];
}
}  // namespace

void embedding_forward(const int32_t* tokens, const float* wte, const float* wpe, float* out, int64_t B,
                       int64_t T, int64_t C) {
    parallel_range(B * T, C, [&](int64_t first, int64_t end) {
        for (int64_t r = first; r < end; ++r) {
            const float* token_row = wte + static_cast<int64_t>(tokens[r]) * C;
            const float* position_row = wpe + (r % T) * C;
            float* y = out + r * C;
#pragma omp simd
            for (int64_t i = 0; i < C; ++i) y[i] = token_row[i] + position_row[i];
        }
    });
}

void embedding_backward(const float* dout, const int32_t* tokens, float* dwte, float* dwpe, int64_t B,
                        int64_t T, int64_t C, int64_t vocab, GradientWrite wte_write, GradientWrite wpe_write) {
    const int64_t rows = B * T;
    const int64_t blocks = (C + kColumnBlock - 1) / kColumnBlock;
    const int64_t work = 2 * rows * C + (wte_write == GradientWrite::overwrite ? vocab * C : 0);
    parallel_members(work, [&](int member, int members) {
        const int64_t c0 = std::min(C, blocks * member / members * kColumnBlock);
        const int64_t c1 = std::min(C, blocks * (member + 1) / members * kColumnBlock);
        const int64_t count = c1 - c0;
        if (count <= 0) return;
        if (dwte) {
            if (wte_write == GradientWrite::overwrite)
                for (int64_t v = 0; v < vocab; ++v) std::fill_n(dwte + v * C + c0, count, 0.0f);
            for (int64_t r = 0; r < rows; ++r)
                add_row(dout + r * C + c0, dwte + static_cast<int64_t>(tokens[r]) * C + c0, count);
        }
        if (dwpe) {
            if (wpe_write == GradientWrite::overwrite)
                for (int64_t t = 0; t < T; ++t) std::fill_n(dwpe + t * C + c0, count, 0.0f);
            for (int64_t r = 0; r < rows; ++r) add_row(dout + r * C + c0, dwpe + (r % T) * C + c0, count);
        }
    });
}

}  // namespace trainbench
