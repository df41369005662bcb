#include "nn/activation.hpp"

#include <cmath>

#include "parallel/parallel_range.hpp"

namespace trainbench {
namespace {
constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;

// Rough cost of one element in multiply-adds, for parallel_range's is-it-worth-waking-the-team
// test: ReLU is a compare; tanh, sigmoid and GELU call libm (erf and exp for GELU).
int64_t element_work(Activation kind) {
    switch (kind) {
        case Activation::relu: return 1;
        case Activation::gelu: return 40;
        case Activation::tanh:
        case Activation::sigmoid: return 20;
    }
    return 1;
}

// Elements [first, end). Each element's arithmetic is independent of the split, so the bits
// do not depend on the number of threads.
void forward_range(Activation kind, const float* z, float* a, int64_t first, int64_t end) {
    switch (kind) {
        case Activation::relu:
#pragma omp simd
            for (int64_t i = first; i < end; ++i) a[i] = z[i] > 0.0f ? z[i] : 0.0f;
            break;
        case Activation::gelu:
            for (int64_t i = first; i < end; ++i) a[i] = 0.5f * z[i] * (1.0f + std::erf(z[i] * kInvSqrt2));
            break;
        case Activation::tanh:
            for (int64_t i = first; i < end; ++i) a[i] = std::tanh(z[i]);
            break;
        case Activation::sigmoid:
            for (int64_t i = first; i < end; ++i) a[i] = 1.0f / (1.0f + std::exp(-z[i]));
            break;
    }
}

void backward_range(Activation kind, const float* z, const float* a, float* grad, int64_t first, int64_t end) {
    switch (kind) {
        case Activation::relu:
#pragma omp simd
            for (int64_t i = first; i < end; ++i) grad[i] = a[i] > 0.0f ? grad[i] : 0.0f;
            break;
        case Activation::gelu:
            for (int64_t i = first; i < end; ++i) {
                const float cdf = 0.5f * (1.0f + std::erf(z[i] * kInvSqrt2));
                const float pdf = kInvSqrt2Pi * std::exp(-0.5f * z[i] * z[i]);
                grad[i] *= cdf + z[i] * pdf;
            }
            break;
        case Activation::tanh:
#pragma omp simd
            for (int64_t i = first; i < end; ++i) grad[i] *= 1.0f - a[i] * a[i];
            break;
        case Activation::sigmoid:
#pragma omp simd
            for (int64_t i = first; i < end; ++i) grad[i] *= a[i] * (1.0f - a[i]);
            break;
    }
}
}  // namespace

void activation_forward(Activation kind, const float* z, float* a, int64_t n) {
    parallel_range(n, element_work(kind), [&](int64_t first, int64_t end) { forward_range(kind, z, a, first, end); });
}

void activation_backward(Activation kind, const float* z, const float* a, float* grad, int64_t n) {
    parallel_range(n, element_work(kind),
                   [&](int64_t first, int64_t end) { backward_range(kind, z, a, grad, first, end); });
}

}  // namespace trainbench
