#include "nn/activation.hpp"

#include <cmath>

namespace trainbench {
namespace {
constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;
}  // namespace

void activation_forward(Activation kind, const float* z, float* a, int64_t n) {
    switch (kind) {
        case Activation::relu:
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) a[i] = z[i] > 0.0f ? z[i] : 0.0f;
            break;
        case Activation::gelu:
            for (int64_t i = 0; i < n; ++i) a[i] = 0.5f * z[i] * (1.0f + std::erf(z[i] * kInvSqrt2));
            break;
        case Activation::tanh:
            for (int64_t i = 0; i < n; ++i) a[i] = std::tanh(z[i]);
            break;
        case Activation::sigmoid:
            for (int64_t i = 0; i < n; ++i) a[i] = 1.0f / (1.0f + std::exp(-z[i]));
            break;
    }
}

void activation_backward(Activation kind, const float* z, const float* a, float* grad, int64_t n) {
    switch (kind) {
        case Activation::relu:
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) grad[i] = a[i] > 0.0f ? grad[i] : 0.0f;
            break;
        case Activation::gelu:
            for (int64_t i = 0; i < n; ++i) {
                const float cdf = 0.5f * (1.0f + std::erf(z[i] * kInvSqrt2));
                const float pdf = kInvSqrt2Pi * std::exp(-0.5f * z[i] * z[i]);
                grad[i] *= cdf + z[i] * pdf;
            }
            break;
        case Activation::tanh:
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) grad[i] *= 1.0f - a[i] * a[i];
            break;
        case Activation::sigmoid:
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) grad[i] *= a[i] * (1.0f - a[i]);
            break;
    }
}

}  // namespace trainbench
