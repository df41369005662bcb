#pragma once
// e^x in float for loops the compiler vectorises. std::exp is a libm call per element, and was
// the largest share of a GPT update's softmax (perf: 14% of a bf16 update on 2 cores). This is
// Cephes' expf: x = n ln 2 + r with |r| <= ln 2 / 2, e^r from a degree-6 polynomial, 2^n put
// into the exponent bits; within 2 ulp of the correctly rounded value wherever the result is a
// normal float (test_gpt_ops checks it against std::exp), exactly 0 below that range (expf
// would give a subnormal there), +inf above it, and NaN for NaN.
#include <cstdint>
#include <cstring>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace trainbench {

inline float exp_vectorizable(float x) {
    constexpr float kLowest = -87.3365478515625f;  // e^x below this is not a normal float
    constexpr float kHighest = 88.72283172607422f;  // e^x above this overflows
    // NaN clamps to kLowest: converting NaN to an integer below is undefined (UBSan reports it),
    // and its result is replaced by the NaN at the end anyway.
    const float above = x > kLowest ? x : kLowest;
    const float clamped = above < kHighest ? above : kHighest;
    // n = round(x / ln 2); r = x - n ln 2 in two parts, so r keeps its low bits.
    const float n = static_cast<float>(static_cast<int32_t>(clamped * 1.44269504088896341f + (clamped < 0 ? -0.5f : 0.5f)));
    const float r = (clamped - n * 0.693359375f) - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    // 2^n as exponent bits; n reaches 128 just below kHighest, whose 2^128 is split into 2^127 x 2.
    const int32_t exponent = static_cast<int32_t>(n);
    const uint32_t bits = static_cast<uint32_t>((exponent > 127 ? 127 : exponent) + 127) << 23;
    float scale;
    std::memcpy(&scale, &bits, sizeof scale);
    // Selects rather than early returns, so the loop has no branch and vectorises.
    float result = p * scale * (exponent > 127 ? 2.0f : 1.0f);
    result = x < kLowest ? 0.0f : result;
    result = x > kHighest ? __builtin_inff() : result;
    return x != x ? x : result;  // NaN stays NaN
}

#if defined(__AVX512F__)
// The same on sixteen lanes, written out: the same operations, fused where GCC fuses the scalar
// form's, so the same bits (all 2^32 inputs compared with the vectorised scalar form when this
// was written; test_gpt_ops pins it against a reference with the fusions spelled out). GCC's
// vectorisation of the scalar form spent most of its instructions on the clamps' and the
// rounding's selects, and took 1.9 times as long: max/min clamp here (a NaN lane's result is
// replaced at the end), and the rounding's +-0.5 is picked before one FMA.
inline __m512 exp_vectorizable(__m512 x) {
    const __m512 lowest = _mm512_set1_ps(-87.3365478515625f), highest = _mm512_set1_ps(88.72283172607422f);
    const __m512 clamped = _mm512_min_ps(_mm512_max_ps(x, lowest), highest);
    const __mmask16 negative = _mm512_cmp_ps_mask(clamped, _mm512_setzero_ps(), _CMP_LT_OQ);
    const __m512 half = _mm512_mask_blend_ps(negative, _mm512_set1_ps(0.5f), _mm512_set1_ps(-0.5f));
    const __m512 n = _mm512_roundscale_ps(_mm512_fmadd_ps(clamped, _mm512_set1_ps(1.44269504088896341f), half),
                                          _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), clamped);
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), r);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(1.9875691500e-4f), r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
    const __m512i exponent = _mm512_cvttps_epi32(n);
    const __m512i limit = _mm512_set1_epi32(127);
    const __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_min_epi32(exponent, limit), limit), 23);
    __m512 result = _mm512_mul_ps(p, _mm512_castsi512_ps(bits));
    result = _mm512_mask_mul_ps(result, _mm512_cmpgt_epi32_mask(exponent, limit), result, _mm512_set1_ps(2.0f));
    result = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, lowest, _CMP_LT_OQ), result, _mm512_setzero_ps());
    result = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, highest, _CMP_GT_OQ), result, _mm512_set1_ps(__builtin_inff()));
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), result, x);
}
#endif

}  // namespace trainbench
