#pragma once
// Eight 16-bit codes widened into one AVX2 register of floats, and eight floats rounded back
// into codes (or to the values those codes hold), for CPUs with AVX2 and F16C but no AVX-512:
// what precision/half_float_avx512.hpp does sixteen at a time. The bits are those of
// precision/half_float.hpp's scalar functions: widening is exact; bf16 rounds to nearest even
// with NaNs quieted as float_to_bf16 does, in integer arithmetic; fp16 rounds with F16C's
// conversion, whose bits float_to_fp16 was written to match (tests/core/test_half_float.cpp).
#if defined(__AVX2__) && defined(__F16C__)
#include <immintrin.h>

#include "trainbench/run_config.hpp"

namespace trainbench {

inline __m256 widen_8_codes(Precision precision, const uint16_t* codes) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes));
    if (precision == Precision::bf16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    return _mm256_cvtph_ps(h);
}

// bf16 codes of eight floats, one in the low half of each 32-bit lane.
inline __m256i bf16_codes_8(__m256 values) {
    const __m256i u = _mm256_castps_si256(values);
    const __m256i high = _mm256_srli_epi32(u, 16);
    // (u + 0x7fff + lowest kept bit) >> 16; a NaN keeps its top bits and gets the quiet bit.
    const __m256i rounding = _mm256_add_epi32(_mm256_set1_epi32(0x7fff), _mm256_and_si256(high, _mm256_set1_epi32(1)));
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, rounding), 16);
    // |u| fits in 31 bits, so the signed comparison is the unsigned one.
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
    return _mm256_blendv_epi8(rounded, _mm256_or_si256(high, _mm256_set1_epi32(0x40)), nan);
}

inline void round_8_codes(Precision precision, __m256 values, uint16_t* codes) {
    __m128i h;
    if (precision == Precision::bf16) {
        const __m256i lanes = bf16_codes_8(values);  // each below 0x10000: packing cannot saturate
        h = _mm_packus_epi32(_mm256_castsi256_si128(lanes), _mm256_extracti128_si256(lanes, 1));
    } else {
        h = _mm256_cvtps_ph(values, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(codes), h);
}

// The values eight floats round to: widen(round(values)), without going through memory.
inline __m256 round_8_values(Precision precision, __m256 values) {
    if (precision == Precision::bf16) return _mm256_castsi256_ps(_mm256_slli_epi32(bf16_codes_8(values), 16));
    return _mm256_cvtph_ps(_mm256_cvtps_ph(values, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

}  // namespace trainbench
#endif
