#include "precision/half_float.hpp"

#include "parallel/parallel_range.hpp"

#if defined(__F16C__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

// GCC 12 warns that the AVX-512 conversion intrinsics' own unused "undefined" operands may be
// uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace trainbench {
namespace {

// fp16 codes of [0, n), eight at a time with F16C where the build targets it (round to nearest
// even, as float_to_fp16), and back. The inline serial conversions (half_float.hpp) do whole
// registers of sixteen with AVX-512 and of eight with AVX2 and F16C, so only a build with F16C
// but no AVX2 comes here with eight or more.
void floats_to_fp16(const float* source, uint16_t* destination, int64_t n) {
    int64_t i = 0;
#if defined(__F16C__)
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(destination + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(source + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
    for (; i < n; ++i) destination[i] = float_to_fp16(source[i]);
}

void fp16_to_floats(const uint16_t* source, float* destination, int64_t n) {
    int64_t i = 0;
#if defined(__F16C__)
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(destination + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(source + i))));
#endif
    for (; i < n; ++i) destination[i] = fp16_to_float(source[i]);
}

}  // namespace

void store_16bit_rest(Precision precision, const float* source, uint16_t* destination, int64_t n) {
    if (precision == Precision::bf16) {
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) destination[i] = float_to_bf16(source[i]);
    } else {
        floats_to_fp16(source, destination, n);
    }
}

void store_16bit(Precision precision, const float* source, uint16_t* destination, int64_t n) {
    parallel_range(n, 1, [&](int64_t begin, int64_t end) {
        store_16bit_serial(precision, source + begin, destination + begin, end - begin);
    });
}

void load_16bit_rest(Precision precision, const uint16_t* source, float* destination, int64_t n) {
    if (precision == Precision::bf16) {
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) destination[i] = bf16_to_float(source[i]);
    } else {
        fp16_to_floats(source, destination, n);
    }
}

void load_16bit_rows(Precision precision, const uint16_t* source, int64_t source_row, float* destination,
                     int64_t destination_row, int64_t rows, int64_t columns) {
    for (int64_t r = 0; r < rows; ++r)
        load_16bit_serial(precision, source + r * source_row, destination + r * destination_row, columns);
}

void store_16bit_rows(Precision precision, const float* source, int64_t source_row, uint16_t* destination,
                      int64_t destination_row, int64_t rows, int64_t columns) {
    for (int64_t r = 0; r < rows; ++r)
        store_16bit_serial(precision, source + r * source_row, destination + r * destination_row, columns);
}

void load_16bit(Precision precision, const uint16_t* source, float* destination, int64_t n) {
    parallel_range(n, 1, [&](int64_t begin, int64_t end) {
        load_16bit_serial(precision, source + begin, destination + begin, end - begin);
    });
}

void round_to_16bit_serial(Precision precision, const float* source, float* destination, int64_t n) {
    if (precision == Precision::bf16) {
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) destination[i] = bf16_to_float(float_to_bf16(source[i]));
    } else {
        int64_t i = 0;
#if defined(__AVX512F__)
        for (; i + 16 <= n; i += 16)
            _mm512_storeu_ps(destination + i, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_loadu_ps(source + i),
                                                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
#endif
#if defined(__F16C__)
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(destination + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(source + i),
                                                                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
#endif
        for (; i < n; ++i) destination[i] = fp16_to_float(float_to_fp16(source[i]));
    }
}

void round_to_16bit(Precision precision, float* values, int64_t n) {
    parallel_range(n, 1, [&](int64_t begin, int64_t end) { round_to_16bit_serial(precision, values + begin, end - begin); });
}

}  // namespace trainbench
