#include "precision/half_float.hpp"

#include "parallel/parallel_range.hpp"

namespace trainbench {

void store_16bit(Precision precision, const float* source, uint16_t* destination, int64_t n) {
    parallel_range(n, 1, [&](int64_t begin, int64_t end) {
        if (precision == Precision::bf16) {
#pragma omp simd
            for (int64_t i = begin; i < end; ++i) destination[i] = float_to_bf16(source[i]);
        } else {
#pragma omp simd
            for (int64_t i = begin; i < end; ++i) destination[i] = float_to_fp16(source[i]);
        }
    });
}

void load_16bit(Precision precision, const uint16_t* source, float* destination, int64_t n) {
    parallel_range(n, 1, [&](int64_t begin, int64_t end) {
        if (precision == Precision::bf16) {
#pragma omp simd
            for (int64_t i = begin; i < end; ++i) destination[i] = bf16_to_float(source[i]);
        } else {
#pragma omp simd
            for (int64_t i = begin; i < end; ++i) destination[i] = fp16_to_float(source[i]);
        }
    });
}

void round_to_16bit_serial(Precision precision, float* values, int64_t n) {
    if (precision == Precision::bf16) {
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) values[i] = bf16_to_float(float_to_bf16(values[i]));
    } else {
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) values[i] = fp16_to_float(float_to_fp16(values[i]));
    }
}

void round_to_16bit(Precision precision, float* values, int64_t n) {
    parallel_range(n, 1, [&](int64_t begin, int64_t end) { round_to_16bit_serial(precision, values + begin, end - begin); });
}

}  // namespace trainbench
