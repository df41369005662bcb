#include "optim/gradient_norm.hpp"

#include "parallel/parallel_range.hpp"

namespace trainbench {

double gradient_norm_squared(const float* grads, int64_t count) {
    constexpr int kChunks = 64;
    constexpr int kLanes = 32;
    double partial[kChunks];
    parallel_range(kChunks, count / kChunks, [&](int64_t first, int64_t last) {
        for (int64_t c = first; c < last; ++c) {
            const int64_t begin = count * c / kChunks, end = count * (c + 1) / kChunks;
            // kLanes running sums in a fixed order: the loop vectorises without reordering a single
            // sum, and enough of them are in flight that the adds' latency does not bound it (four
            // lanes ran at 14 GB/s from cache, 32 at 90).
            double sums[kLanes] = {};
            int64_t i = begin;
            for (; i + kLanes <= end; i += kLanes)
                for (int lane = 0; lane < kLanes; ++lane) {
                    const double g = grads[i + lane];
                    sums[lane] += g * g;
                }
            for (; i < end; ++i) sums[0] += static_cast<double>(grads[i]) * grads[i];
            double chunk = 0.0;
            for (double s : sums) chunk += s;
            partial[c] = chunk;
        }
    });
    double total = 0.0;
    for (double v : partial) total += v;
    return total;
}

}  // namespace trainbench
