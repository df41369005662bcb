#pragma once
// e^x in float for loops the compiler vectorises. std::exp is a libm call per element, and was
// the largest share of a GPT update's softmax (perf: 14% of a bf16 update on 2 cores). This is
// Cephes' expf: x = n ln 2 + r with |r| <= ln 2 / 2, e^r from a degree-6 polynomial, 2^n put
// into the exponent bits; within 2 ulp of the correctly rounded value wherever the result is a
// normal float (test_gpt_ops checks it against std::exp), exactly 0 below that range (expf
// would give a subnormal there), +inf above it, and NaN for NaN.
#include <cstdint>
#include <cstring>

namespace trainbench {

inline float exp_vectorizable(float x) {
    constexpr float kLowest = -87.3365478515625f;  // e^x below this is not a normal float
    constexpr float kHighest = 88.72283172607422f;  // e^x above this overflows
    const float clamped = x < kLowest ? kLowest : (x > kHighest ? kHighest : x);
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

}  // namespace trainbench
