#include "optim/gradient_norm.hpp"

#include "parallel/parallel_range.hpp"

namespace trainbench {

double gradient_norm_squared(const float* grads, int64_t count) {
    constexpr int kChunks = 64;
    double partial[kChunks];
    parallel_range(kChunks, count / kChunks, [&](int64_t first, int64_t last) {
        for (int64_t c = first; c < last; ++c) {
            const int64_t begin = count * c / kChunks, end = count * (c + 1) / kChunks;
            // Four running sums let the loop vectorise without reordering a single sum.
            double sums[4] = {0.0, 0.0, 0.0, 0.0};
            int64_t i = begin;
            for (; i + 4 <= end; i += 4)
                for (int lane = 0; lane < 4; ++lane) {
                    const double g = grads[i + lane];
                    sums[lane] += g * g;
                }
            for (; i < end; ++i) sums[0] += static_cast<double>(grads[i]) * grads[i];
            partial[c] = (sums[0] + sums[1]) + (sums[2] + sums[3]);
        }
    });
    double total = 0.0;
    for (double v : partial) total += v;
    return total;
}

}  // namespace trainbench
