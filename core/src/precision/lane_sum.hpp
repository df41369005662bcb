#pragma once
// Sums in double over a row, in a fixed order the compiler vectorises as written: Lanes running
// sums (element i goes to lane i % Lanes), then the lanes added in order. `omp simd reduction`
// over doubles kept its partial sums on the stack between iterations (a LayerNorm backward at two
// cycles an element), and a handful of lanes leaves the adds' latency in charge; with enough
// lanes the loads set the pace. The order depends on Lanes and n only, never on the machine.
#include <cstdint>

namespace trainbench {

template <int Lanes = 16, class Term>
inline double lane_sum(int64_t n, Term term) {
    double lanes[Lanes] = {};
    int64_t i = 0;
    for (; i + Lanes <= n; i += Lanes)
        for (int lane = 0; lane < Lanes; ++lane) lanes[lane] += term(i + lane);
    for (; i < n; ++i) lanes[i % Lanes] += term(i);
    double sum = 0.0;
    for (double lane : lanes) sum += lane;
    return sum;
}

}  // namespace trainbench
