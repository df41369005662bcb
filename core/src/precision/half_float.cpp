#include "precision/half_float.hpp"

// Every loop runs on the full OpenMP team: a team of another size (an `if` clause) makes
// libgomp allocate a new team, and the training step must not allocate.
namespace trainbench {

void store_16bit(Precision precision, const float* source, uint16_t* destination, int64_t n) {
    if (precision == Precision::bf16) {
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; ++i) destination[i] = float_to_bf16(source[i]);
    } else {
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; ++i) destination[i] = float_to_fp16(source[i]);
    }
}

void load_16bit(Precision precision, const uint16_t* source, float* destination, int64_t n) {
    if (precision == Precision::bf16) {
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; ++i) destination[i] = bf16_to_float(source[i]);
    } else {
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; ++i) destination[i] = fp16_to_float(source[i]);
    }
}

void round_to_16bit(Precision precision, float* values, int64_t n) {
    if (precision == Precision::bf16) {
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; ++i) values[i] = bf16_to_float(float_to_bf16(values[i]));
    } else {
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; ++i) values[i] = fp16_to_float(float_to_fp16(values[i]));
    }
}

}  // namespace trainbench
