#pragma once
// Sixteen 16-bit codes widened into one AVX-512 register of floats, and sixteen floats rounded
// back into codes, for kernels that work on 16-bit storage in registers without a staging
// buffer. The bits are those of precision/half_float.hpp's scalar functions: widening is exact;
// bf16 rounds to nearest even with NaNs quieted as float_to_bf16 does (written out in integer
// arithmetic: the CPU's VCVTNEPS2BF16 flushes subnormal inputs to zero, which the scalar
// function does not); fp16 rounds with the conversion instruction, whose bits float_to_fp16
// was written to match (tests/core/test_half_float.cpp checks every boundary).
#if defined(__AVX512F__)
#include <immintrin.h>

#include "trainbench/run_config.hpp"

namespace trainbench {

// Every lane: the zero-masked forms of the intrinsics with a full mask compile to the plain
// instructions, and unlike the plain forms (whose "undefined" pass-through operand GCC 12 takes
// for uninitialized) they leave no warning in every file that inlines them.
constexpr __mmask16 kAllLanes = 0xffff;

inline __m512 widen_16_codes(Precision precision, const uint16_t* codes) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes));
    if (precision == Precision::bf16)
        return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(kAllLanes, _mm512_maskz_cvtepu16_epi32(kAllLanes, h), 16));
    return _mm512_maskz_cvtph_ps(kAllLanes, h);
}

inline void round_16_codes(Precision precision, __m512 values, uint16_t* codes) {
    __m256i h;
    if (precision == Precision::bf16) {
        const __m512i u = _mm512_castps_si512(values);
        const __m512i high = _mm512_maskz_srli_epi32(kAllLanes, u, 16);
        // (u + 0x7fff + lowest kept bit) >> 16; a NaN keeps its top bits and gets the quiet bit.
        const __m512i rounding = _mm512_add_epi32(_mm512_set1_epi32(0x7fff), _mm512_and_si512(high, _mm512_set1_epi32(1)));
        const __m512i rounded = _mm512_maskz_srli_epi32(kAllLanes, _mm512_add_epi32(u, rounding), 16);
        const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                      _mm512_set1_epi32(0x7f800000));
        h = _mm512_maskz_cvtepi32_epi16(kAllLanes, _mm512_mask_or_epi32(rounded, nan, high, _mm512_set1_epi32(0x40)));
    } else {
        h = _mm512_maskz_cvtps_ph(kAllLanes, values, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes), h);
}

}  // namespace trainbench
#endif
