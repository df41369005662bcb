#pragma once
// Sums in double over a row, in a fixed order the compiler vectorises as written: Lanes running
// sums (element i goes to lane i % Lanes), then the lanes added in order. `omp simd reduction`
// over doubles kept its partial sums on the stack between iterations (a LayerNorm backward at two
// cycles an element), and a handful of lanes leaves the adds' latency in charge; with enough
// lanes the loads set the pace. The order depends on Lanes and n only, never on the machine.
// A row's maximum goes the same way (lane_max).
#include <cstdint>
#include <limits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

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

// The larger of a and b; a NaN on either side wins.
inline float larger_or_nan(float a, float b) { return a > b || a != a ? a : b; }

#if defined(__AVX512F__)
// larger_or_nan lane by lane.
inline __m512 larger_or_nan(__m512 a, __m512 b) {
    const __mmask16 keep_a = _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ) | _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
    return _mm512_mask_blend_ps(keep_a, b, a);
}

// lane_max's fold of 16 lanes (halves folded onto each other, lane l with lane l + width), each
// step the same larger_or_nan of the same pair as the scalar fold, so the same value, NaNs too.
inline float fold_lanes_16(__m512 lanes) {
    lanes = larger_or_nan(lanes, _mm512_shuffle_f32x4(lanes, lanes, _MM_SHUFFLE(3, 2, 3, 2)));  // width 8
    lanes = larger_or_nan(lanes, _mm512_shuffle_f32x4(lanes, lanes, _MM_SHUFFLE(1, 1, 1, 1)));  // width 4
    lanes = larger_or_nan(lanes, _mm512_permute_ps(lanes, _MM_SHUFFLE(3, 2, 3, 2)));            // width 2
    lanes = larger_or_nan(lanes, _mm512_permute_ps(lanes, _MM_SHUFFLE(1, 1, 1, 1)));            // width 1
    return _mm512_cvtss_f32(lanes);
}
#endif

// The largest of term(0) .. term(n - 1), -inf when n is 0, over Lanes running maxima in the same
// way; NaN if any term is NaN. A max is exact, so the order cannot change it: the lanes only make
// GCC vectorise it (an `omp simd reduction(max)` over a select stayed a scalar loop through the
// stack, and the causal softmax's row maxima took 3% of a bf16 GPT update).
template <int Lanes = 16, class Term>
    requires(Lanes > 0 && (Lanes & (Lanes - 1)) == 0)
inline float lane_max(int64_t n, Term term) {
    float lanes[Lanes];
    for (float& lane : lanes) lane = -std::numeric_limits<float>::infinity();
    int64_t i = 0;
    for (; i + Lanes <= n; i += Lanes)
#pragma omp simd
        for (int lane = 0; lane < Lanes; ++lane) lanes[lane] = larger_or_nan(lanes[lane], term(i + lane));
    for (; i < n; ++i) lanes[i % Lanes] = larger_or_nan(lanes[i % Lanes], term(i));
#if defined(__AVX512F__)
    // The fold below in one register: GCC left it scalar, through the stack, where perf put
    // about a fifth of the causal softmax's samples (its rows are 16 to 128 keys long).
    if constexpr (Lanes == 16) return fold_lanes_16(_mm512_loadu_ps(lanes));
#endif
    for (int width = Lanes / 2; width >= 1; width /= 2)  // halves folded onto each other: the same result in fewer steps
#pragma omp simd
        for (int lane = 0; lane < width; ++lane) lanes[lane] = larger_or_nan(lanes[lane], lanes[lane + width]);
    return lanes[0];
}

}  // namespace trainbench
