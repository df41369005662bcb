#include "nn/activation.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

// Eigen's erf and exp of whole vector registers, for the exact GELU (Eigen is the engine's
// math library already). libm's erff, called one value at a time, was 12% of a GPT update on
// one thread (docs/BENCHMARKS.md, "Data parallelism").
#include <unsupported/Eigen/SpecialFunctions>

#include "parallel/parallel_range.hpp"
#include "precision/half_float.hpp"

// GCC 12 warns that the AVX-512 intrinsics Eigen's vector erf and exp expand to leave their own
// unused "undefined" operands uninitialized (as in nn/onednn_linear.cpp): not this code's.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace trainbench {
namespace {
constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;

namespace vec = Eigen::internal;
using Packet = vec::packet_traits<float>::type;
constexpr int64_t kLanes = vec::packet_traits<float>::size;

// A range's last, partial register is padded rather than computed with scalar code, so every
// element goes through the same vector arithmetic wherever the range was split: the bits do not
// depend on the number of threads.
Packet load(const float* values, int64_t count) {
    if (count == kLanes) return vec::ploadu<Packet>(values);
    alignas(64) float padded[kLanes] = {};
    std::memcpy(padded, values, static_cast<size_t>(count) * sizeof(float));
    return vec::pload<Packet>(padded);
}

void store(float* values, const Packet& packet, int64_t count) {
    if (count == kLanes) return vec::pstoreu(values, packet);
    alignas(64) float padded[kLanes];
    vec::pstore(padded, packet);
    std::memcpy(values, padded, static_cast<size_t>(count) * sizeof(float));
}

// Phi(z) = 0.5 (1 + erf(z / sqrt 2)), the exact GELU's gate (torch's default, not the tanh
// approximation). Eigen's erf is a rational approximation clamped to +-1 beyond |x| = 4, within
// 6 ulp of erf everywhere, about 4e-7 at most in absolute terms (PyTorch's own vectorised erf
// is an approximation too).
Packet gelu_gate(const Packet& z) {
    const Packet erf = vec::generic_fast_erf_float(vec::pmul(z, vec::pset1<Packet>(kInvSqrt2)));
    return vec::pmul(vec::pset1<Packet>(0.5f), vec::padd(vec::pset1<Packet>(1.0f), erf));
}

Packet gelu(const Packet& x) { return vec::pmul(x, gelu_gate(x)); }

// grad d/dz [z Phi(z)] = grad (Phi(z) + z phi(z)), phi(z) = exp(-z^2 / 2) / sqrt(2 pi).
Packet gelu_backward(const Packet& x, const Packet& grad) {
    const Packet density =
        vec::pmul(vec::pset1<Packet>(kInvSqrt2Pi), vec::pexp(vec::pmul(vec::pset1<Packet>(-0.5f), vec::pmul(x, x))));
    return vec::pmul(grad, vec::padd(gelu_gate(x), vec::pmul(x, density)));
}

void gelu_forward_range(const float* z, float* a, int64_t first, int64_t end) {
    for (int64_t i = first; i < end; i += kLanes) {
        const int64_t count = std::min(kLanes, end - i);
        store(a + i, gelu(load(z + i, count)), count);
    }
}

void gelu_backward_range(const float* z, const float* grad, float* result, int64_t first, int64_t end) {
    for (int64_t i = first; i < end; i += kLanes) {
        const int64_t count = std::min(kLanes, end - i);
        store(result + i, gelu_backward(load(z + i, count), load(grad + i, count)), count);
    }
}

// GELU and ReLU on 16-bit codes a register at a time (sixteen with AVX-512, eight with AVX2 and
// F16C): widened, activated (or their gradient computed) and rounded without a staging buffer
// or a piece on the stack. The arithmetic is forward_range's and backward_range's vector
// arithmetic, so the bits are theirs. Each returns where it stopped: the rest (a tail shorter
// than a register, or every element of the other kinds) is left to the staged path.
#if defined(__AVX512F__)
static_assert(kLanes == 16, "AVX-512 builds: Eigen's float packet is one register of sixteen");
#define TRAINBENCH_CODES_IN_REGISTERS 1

Packet widen_codes(Precision precision, const uint16_t* codes) { return widen_16_codes(precision, codes); }
void round_codes(Precision precision, const Packet& values, uint16_t* codes) { round_16_codes(precision, values, codes); }

// z > 0 ? z : 0 (and a > 0 ? grad : 0), as forward_range's and backward_range's selects.
Packet positive_or_zero(const Packet& test, const Packet& value) {
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(test, _mm512_setzero_ps(), _CMP_GT_OQ), value);
}
#elif defined(__AVX2__) && defined(__F16C__)
static_assert(kLanes == 8, "AVX2 builds: Eigen's float packet is one register of eight");
#define TRAINBENCH_CODES_IN_REGISTERS 1

Packet widen_codes(Precision precision, const uint16_t* codes) { return widen_8_codes(precision, codes); }
void round_codes(Precision precision, const Packet& values, uint16_t* codes) { round_8_codes(precision, values, codes); }

Packet positive_or_zero(const Packet& test, const Packet& value) {
    return _mm256_and_ps(_mm256_cmp_ps(test, _mm256_setzero_ps(), _CMP_GT_OQ), value);
}
#endif

#if defined(TRAINBENCH_CODES_IN_REGISTERS)
bool activates_in_registers(Activation kind) { return kind == Activation::gelu || kind == Activation::relu; }

int64_t forward_codes_in_registers(Activation kind, Precision precision, const uint16_t* z, uint16_t* a, int64_t n) {
    if (!activates_in_registers(kind)) return 0;
    const int64_t whole = n / kLanes * kLanes;
    for (int64_t i = 0; i < whole; i += kLanes) {
        const Packet x = widen_codes(precision, z + i);
        round_codes(precision, kind == Activation::gelu ? gelu(x) : positive_or_zero(x, x), a + i);
    }
    return whole;
}

// grad f'(.) over [first, end) from the saved codes (z for GELU, a for ReLU): into grad, or
// rounded into dy_codes (bf16) where given.
int64_t backward_codes_in_registers(Activation kind, Precision precision, const uint16_t* saved, float* grad,
                                    uint16_t* dy_codes, int64_t first, int64_t end) {
    if (!activates_in_registers(kind)) return first;
    const int64_t whole = first + (end - first) / kLanes * kLanes;
    for (int64_t i = first; i < whole; i += kLanes) {
        const Packet x = widen_codes(precision, saved + i);
        const Packet g = vec::ploadu<Packet>(grad + i);
        const Packet result = kind == Activation::gelu ? gelu_backward(x, g) : positive_or_zero(x, g);
        if (dy_codes) round_codes(Precision::bf16, result, dy_codes + i);
        else vec::pstoreu(grad + i, result);
    }
    return whole;
}
#else
int64_t forward_codes_in_registers(Activation, Precision, const uint16_t*, uint16_t*, int64_t) { return 0; }
int64_t backward_codes_in_registers(Activation, Precision, const uint16_t*, float*, uint16_t*, int64_t first, int64_t) {
    return first;
}
#endif

// Rough cost of one element in multiply-adds, for parallel_range's is-it-worth-waking-the-team
// test: ReLU is a compare; tanh and sigmoid call libm; GELU's erf and exp are vector
// polynomials of some 20 multiply-adds per element.
int64_t element_work(Activation kind) {
    switch (kind) {
        case Activation::relu: return 1;
        case Activation::gelu: return 20;
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
        case Activation::gelu: gelu_forward_range(z, a, first, end); break;
        case Activation::tanh:
            for (int64_t i = first; i < end; ++i) a[i] = std::tanh(z[i]);
            break;
        case Activation::sigmoid:
            for (int64_t i = first; i < end; ++i) a[i] = 1.0f / (1.0f + std::exp(-z[i]));
            break;
    }
}

// result = grad f'(.) over [first, end); result may be grad itself.
void backward_range(Activation kind, const float* z, const float* a, const float* grad, float* result, int64_t first,
                    int64_t end) {
    switch (kind) {
        case Activation::relu:
#pragma omp simd
            for (int64_t i = first; i < end; ++i) result[i] = a[i] > 0.0f ? grad[i] : 0.0f;
            break;
        case Activation::gelu: gelu_backward_range(z, grad, result, first, end); break;
        case Activation::tanh:
#pragma omp simd
            for (int64_t i = first; i < end; ++i) result[i] = grad[i] * (1.0f - a[i] * a[i]);
            break;
        case Activation::sigmoid:
#pragma omp simd
            for (int64_t i = first; i < end; ++i) result[i] = grad[i] * (a[i] * (1.0f - a[i]));
            break;
    }
}
}  // namespace

void activation_forward(Activation kind, const float* z, float* a, int64_t n) {
    parallel_range(n, element_work(kind), [&](int64_t first, int64_t end) { forward_range(kind, z, a, first, end); });
}

void activation_forward_serial(Activation kind, const float* z, float* a, int64_t n) { forward_range(kind, z, a, 0, n); }

void activation_forward_16bit_serial(Activation kind, Precision precision, const uint16_t* z, uint16_t* a, int64_t n) {
    const int64_t done = forward_codes_in_registers(kind, precision, z, a, n);
    constexpr int64_t kPiece = 256;  // on the stack: widened, activated, rounded back
    alignas(64) float values[kPiece];
    for (int64_t piece = done; piece < n; piece += kPiece) {
        const int64_t length = std::min(kPiece, n - piece);
        load_16bit_serial(precision, z + piece, values, length);
        forward_range(kind, values, values, 0, length);
        store_16bit_serial(precision, values, a + piece, length);
    }
}

void activation_forward_rounding_serial(Activation kind, Precision precision, const float* z, uint16_t* z_codes,
                                        uint16_t* a_codes, int64_t n) {
    int64_t done = 0;
#if defined(TRAINBENCH_CODES_IN_REGISTERS)
    if (activates_in_registers(kind)) {
        // z's codes go to memory and come straight back (store to load forwarding): widened
        // codes are the rounded values, so f reads exactly what the staged path's would.
        alignas(64) uint16_t scratch[kLanes];
        for (; done + kLanes <= n; done += kLanes) {
            uint16_t* codes = z_codes ? z_codes + done : scratch;
            round_codes(precision, vec::ploadu<Packet>(z + done), codes);
            const Packet x = widen_codes(precision, codes);
            round_codes(precision, kind == Activation::gelu ? gelu(x) : positive_or_zero(x, x), a_codes + done);
        }
    }
#endif
    constexpr int64_t kPiece = 256;  // on the stack: rounded, its codes kept, activated, rounded
    alignas(64) float rounded[kPiece], activated[kPiece];
    for (int64_t piece = done; piece < n; piece += kPiece) {
        const int64_t length = std::min(kPiece, n - piece);
        std::copy(z + piece, z + piece + length, rounded);
        round_to_16bit_serial(precision, rounded, length);
        if (z_codes) store_16bit_serial(precision, rounded, z_codes + piece, length);
        forward_range(kind, rounded, activated, 0, length);
        store_16bit_serial(precision, activated, a_codes + piece, length);
    }
}

void activation_backward(Activation kind, const float* z, const float* a, float* grad, int64_t n) {
    parallel_range(n, element_work(kind),
                   [&](int64_t first, int64_t end) { backward_range(kind, z, a, grad, grad, first, end); });
}

void activation_backward_16bit(Activation kind, Precision precision, const uint16_t* saved, float* staging, float* grad,
                               int64_t n, uint16_t* dy_codes) {
    // Blocks small enough that the widened values are still in cache when f' reads them, each
    // into the same place at the start of the thread's share of staging: widening block by
    // block across the whole of staging wrote fresh lines each time, and in an fp16 GPT update
    // those writes cost more than the conversions.
    constexpr int64_t kBlock = 4096;
    constexpr int64_t kCodesPiece = 256;
    const bool from_input = activation_needs_input(kind);
    parallel_range(n, element_work(kind) + 2, [&](int64_t first, int64_t end) {
        const int64_t done = backward_codes_in_registers(kind, precision, saved, grad, dy_codes, first, end);
        float* widened = staging + done;
        for (int64_t block = done; block < end; block += kBlock) {
            const int64_t count = std::min(end, block + kBlock) - block;
            load_16bit_serial(precision, saved + block, widened, count);
            if (!dy_codes) {
                backward_range(kind, from_input ? widened : nullptr, from_input ? nullptr : widened, grad + block,
                               grad + block, 0, count);
                continue;
            }
            // The gradient a piece at a time onto the stack, rounded from there: the same values as
            // in place, and the fp32 gradient is never written to memory.
            for (int64_t piece = 0; piece < count; piece += kCodesPiece) {
                const int64_t length = std::min(kCodesPiece, count - piece);
                alignas(64) float g[kCodesPiece];
                const float* f = widened + piece;
                backward_range(kind, from_input ? f : nullptr, from_input ? nullptr : f, grad + block + piece, g, 0,
                               length);
                store_16bit_serial(Precision::bf16, g, dy_codes + block + piece, length);
            }
        }
    });
}

}  // namespace trainbench

#pragma GCC diagnostic pop
