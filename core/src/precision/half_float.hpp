#pragma once
// IEEE binary16 (fp16) and bfloat16 storage, converted with round-to-nearest-even. The CPU
// engine stores 16-bit weights and saved activations in these formats and widens them to
// fp32 for the matrix products (emulated 16-bit arithmetic: round to 16 bits, multiply and
// accumulate in fp32), which is what tensor cores do with 16-bit inputs too.
#include <cstdint>
#include <cstring>

#include "trainbench/run_config.hpp"

namespace trainbench {

inline uint32_t float_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}
inline float bits_float(uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

inline uint16_t float_to_bf16(float f) {
    const uint32_t u = float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
    const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>((u + rounding) >> 16);
}
inline float bf16_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

inline uint16_t float_to_fp16(float f) {
    const uint32_t u = float_bits(f);
    const uint32_t sign = (u >> 16) & 0x8000u;
    const uint32_t abs = u & 0x7fffffffu;
    // NaN: quieted, the payload's top bits kept, as the CPU's F16C conversion does.
    if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
    if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504: inf
    if (abs < 0x38800000u) {  // below the smallest normal half: subnormal or zero
        // Adding 0.5 makes the FPU round the mantissa to the half's subnormal step (2^-24).
        const float magnitude = bits_float(abs) + 0.5f;
        return static_cast<uint16_t>(sign | (float_bits(magnitude) - 0x3f000000u));
    }
    const uint32_t mantissa_odd = (abs >> 13) & 1u;
    const uint32_t rebiased = abs + ((15u - 127u) << 23) + 0xfffu + mantissa_odd;
    return static_cast<uint16_t>(sign | (rebiased >> 13));
}
inline float fp16_to_float(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exponent = (h >> 10) & 0x1fu;
    const uint32_t mantissa = h & 0x3ffu;
    if (exponent == 0) {
        const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;  // 2^-24
        return bits_float(sign | float_bits(magnitude));
    }
    if (exponent == 31)  // inf, or a NaN quieted as F16C's conversion quiets it
        return bits_float(sign | 0x7f800000u | (mantissa << 13) | (mantissa != 0 ? 0x400000u : 0u));
    return bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// Rounds n floats to `precision` and writes the 16-bit codes (fp32: not used). fp16 uses the
// CPU's AVX-512 or F16C conversions where the build targets them (-march=native on x86), which
// give the scalar functions' bits, NaNs included.
void store_16bit(Precision precision, const float* source, uint16_t* destination, int64_t n);
void load_16bit(Precision precision, const uint16_t* source, float* destination, int64_t n);
// The same on the calling thread (inside a kernel that already has its share of the work):
// inline, since kernels call them on rows of 32 to a few hundred values (sixteen at a time in
// registers where the build has AVX-512, eight where it has AVX2 and F16C, the rest out of line).
inline void store_16bit_serial(Precision precision, const float* source, uint16_t* destination, int64_t n);
inline void load_16bit_serial(Precision precision, const uint16_t* source, float* destination, int64_t n);
// Their out-of-line part: the scalar functions for the tail (and F16C's eight at a time in a
// build with F16C but no AVX2).
void store_16bit_rest(Precision precision, const float* source, uint16_t* destination, int64_t n);
void load_16bit_rest(Precision precision, const uint16_t* source, float* destination, int64_t n);
// A block of `rows` rows of `columns` values each, row r at source + r * source_row, into
// destination + r * destination_row (and back): a head's columns of a wider tensor.
void load_16bit_rows(Precision precision, const uint16_t* source, int64_t source_row, float* destination,
                     int64_t destination_row, int64_t rows, int64_t columns);
void store_16bit_rows(Precision precision, const float* source, int64_t source_row, uint16_t* destination,
                      int64_t destination_row, int64_t rows, int64_t columns);
// Rounds in place to the nearest value representable in 16 bits (fp16 overflows to inf).
void round_to_16bit(Precision precision, float* values, int64_t n);
// The same on the calling thread (inside a kernel that already has its share of the work),
// in place or from `source` into `destination`.
void round_to_16bit_serial(Precision precision, const float* source, float* destination, int64_t n);
inline void round_to_16bit_serial(Precision precision, float* values, int64_t n) {
    round_to_16bit_serial(precision, values, values, n);
}

}  // namespace trainbench

#include "precision/half_float_avx2.hpp"
#include "precision/half_float_avx512.hpp"

namespace trainbench {

inline void store_16bit_serial(Precision precision, const float* source, uint16_t* destination, int64_t n) {
    int64_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16) round_16_codes(precision, _mm512_loadu_ps(source + i), destination + i);
#endif
#if defined(__AVX2__) && defined(__F16C__)
    for (; i + 8 <= n; i += 8) round_8_codes(precision, _mm256_loadu_ps(source + i), destination + i);
#endif
    if (i < n) store_16bit_rest(precision, source + i, destination + i, n - i);
}

inline void load_16bit_serial(Precision precision, const uint16_t* source, float* destination, int64_t n) {
    int64_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(destination + i, widen_16_codes(precision, source + i));
#endif
#if defined(__AVX2__) && defined(__F16C__)
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(destination + i, widen_8_codes(precision, source + i));
#endif
    if (i < n) load_16bit_rest(precision, source + i, destination + i, n - i);
}

}  // namespace trainbench
