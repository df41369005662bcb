#include "precision/nf4.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "precision/half_float.hpp"

// Compiled with -ffp-contract=off (core/CMakeLists.txt says why).

namespace trainbench {
namespace {

// The paper's NF4 values (bitsandbytes' table), as doubles so their midpoints are exact.
constexpr std::array<double, 16> kNf4Values{
    -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
    -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
    0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
    0.7229568362236023, 1.0};

// bitsandbytes' create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8): for each
// exponent i in 0..6, the 2^i means of neighbouring points of linspace(0.1, 1, 2^i + 1) times
// 10^(i-6), positive and negative, then 0 and 1, sorted. Written out as torch computes them in
// float32 (tests/core/test_nf4.cpp compares it with the table make_nf4_fixtures.py writes): its
// vectorised linspace moves 44 of the values an ulp away from what the scalar formula gives,
// and quantized states saved by bitsandbytes carry torch's values.
constexpr std::array<float, 256> kDynamicMap{
    -0x1.fc6666p-1f, -0x1.f53332p-1f, -0x1.eep-1f, -0x1.e6ccccp-1f, -0x1.df9998p-1f, -0x1.d86666p-1f,
    -0x1.d13334p-1f, -0x1.cap-1f, -0x1.c2ccccp-1f, -0x1.bb9998p-1f, -0x1.b46666p-1f, -0x1.ad3332p-1f,
    -0x1.a6p-1f, -0x1.9eccccp-1f, -0x1.979998p-1f, -0x1.906666p-1f, -0x1.893334p-1f, -0x1.82p-1f,
    -0x1.7acccep-1f, -0x1.73999ap-1f, -0x1.6c6668p-1f, -0x1.653334p-1f, -0x1.5ep-1f, -0x1.56cccep-1f,
    -0x1.4f999ap-1f, -0x1.486666p-1f, -0x1.413334p-1f, -0x1.3ap-1f, -0x1.32ccccp-1f, -0x1.2b999ap-1f,
    -0x1.246668p-1f, -0x1.1d3334p-1f, -0x1.16p-1f, -0x1.0eccccp-1f, -0x1.07999ap-1f, -0x1.006666p-1f,
    -0x1.f26668p-2f, -0x1.e4p-2f, -0x1.d59998p-2f, -0x1.c73334p-2f, -0x1.b8ccccp-2f, -0x1.aa6664p-2f,
    -0x1.9cp-2f, -0x1.8d9998p-2f, -0x1.7f3334p-2f, -0x1.70ccccp-2f, -0x1.626664p-2f, -0x1.54p-2f,
    -0x1.459998p-2f, -0x1.373334p-2f, -0x1.28ccccp-2f, -0x1.1a6668p-2f, -0x1.0cp-2f, -0x1.fb3334p-3f,
    -0x1.de6668p-3f, -0x1.c1999ap-3f, -0x1.a4ccccp-3f, -0x1.88p-3f, -0x1.6b3332p-3f, -0x1.4e6666p-3f,
    -0x1.31999ap-3f, -0x1.14ccccp-3f, -0x1.fp-4f, -0x1.b66668p-4f, -0x1.93d70ap-4f, -0x1.8851eap-4f,
    -0x1.7ccccep-4f, -0x1.7147aep-4f, -0x1.65c29p-4f, -0x1.5a3d7p-4f, -0x1.4eb85p-4f, -0x1.433334p-4f,
    -0x1.37ae14p-4f, -0x1.2c28f6p-4f, -0x1.20a3d6p-4f, -0x1.151ebap-4f, -0x1.09999ap-4f, -0x1.fc28f4p-5f,
    -0x1.e51ebap-5f, -0x1.ce147ap-5f, -0x1.b70a3ep-5f, -0x1.ap-5f, -0x1.88f5c2p-5f, -0x1.71eb86p-5f,
    -0x1.5ae146p-5f, -0x1.43d70ap-5f, -0x1.2ccccep-5f, -0x1.15c28ep-5f, -0x1.fd70a4p-6f, -0x1.cf5c26p-6f,
    -0x1.a147aep-6f, -0x1.733334p-6f, -0x1.451eb8p-6f, -0x1.170a3ep-6f, -0x1.d1eb86p-7f, -0x1.75c29p-7f,
    -0x1.3e76c8p-7f, -0x1.2c083p-7f, -0x1.19999ap-7f, -0x1.072b02p-7f, -0x1.e978d4p-8f, -0x1.c49ba6p-8f,
    -0x1.9fbe76p-8f, -0x1.7ae148p-8f, -0x1.56041ap-8f, -0x1.3126e8p-8f, -0x1.0c49bap-8f, -0x1.ced914p-9f,
    -0x1.851eb8p-9f, -0x1.3b645ap-9f, -0x1.e353f8p-10f, -0x1.4fdf3ap-10f, -0x1.eecbfep-11f, -0x1.b3d07cp-11f,
    -0x1.78d5p-11f, -0x1.3dd982p-11f, -0x1.02de02p-11f, -0x1.8fc506p-12f, -0x1.19ce0ap-12f, -0x1.47ae16p-13f,
    -0x1.743e96p-14f, -0x1.15df66p-14f, -0x1.6f0068p-15f, -0x1.64840cp-16f, -0x1.040bfep-17f, -0x1.b43528p-19f,
    -0x1.27476ep-21f, 0.0f, 0x1.27476ep-21f, 0x1.b43528p-19f, 0x1.040bfep-17f, 0x1.64840cp-16f,
    0x1.6f0068p-15f, 0x1.15df66p-14f, 0x1.743e96p-14f, 0x1.47ae16p-13f, 0x1.19ce0ap-12f, 0x1.8fc506p-12f,
    0x1.02de02p-11f, 0x1.3dd982p-11f, 0x1.78d5p-11f, 0x1.b3d07cp-11f, 0x1.eecbfep-11f, 0x1.4fdf3ap-10f,
    0x1.e353f8p-10f, 0x1.3b645ap-9f, 0x1.851eb8p-9f, 0x1.ced914p-9f, 0x1.0c49bap-8f, 0x1.3126e8p-8f,
    0x1.56041ap-8f, 0x1.7ae148p-8f, 0x1.9fbe76p-8f, 0x1.c49ba6p-8f, 0x1.e978d4p-8f, 0x1.072b02p-7f,
    0x1.19999ap-7f, 0x1.2c083p-7f, 0x1.3e76c8p-7f, 0x1.75c29p-7f, 0x1.d1eb86p-7f, 0x1.170a3ep-6f,
    0x1.451eb8p-6f, 0x1.733334p-6f, 0x1.a147aep-6f, 0x1.cf5c26p-6f, 0x1.fd70a4p-6f, 0x1.15c28ep-5f,
    0x1.2ccccep-5f, 0x1.43d70ap-5f, 0x1.5ae146p-5f, 0x1.71eb86p-5f, 0x1.88f5c2p-5f, 0x1.ap-5f,
    0x1.b70a3ep-5f, 0x1.ce147ap-5f, 0x1.e51ebap-5f, 0x1.fc28f4p-5f, 0x1.09999ap-4f, 0x1.151ebap-4f,
    0x1.20a3d6p-4f, 0x1.2c28f6p-4f, 0x1.37ae14p-4f, 0x1.433334p-4f, 0x1.4eb85p-4f, 0x1.5a3d7p-4f,
    0x1.65c29p-4f, 0x1.7147aep-4f, 0x1.7ccccep-4f, 0x1.8851eap-4f, 0x1.93d70ap-4f, 0x1.b66668p-4f,
    0x1.fp-4f, 0x1.14ccccp-3f, 0x1.31999ap-3f, 0x1.4e6666p-3f, 0x1.6b3332p-3f, 0x1.88p-3f,
    0x1.a4ccccp-3f, 0x1.c1999ap-3f, 0x1.de6668p-3f, 0x1.fb3334p-3f, 0x1.0cp-2f, 0x1.1a6668p-2f,
    0x1.28ccccp-2f, 0x1.373334p-2f, 0x1.459998p-2f, 0x1.54p-2f, 0x1.626664p-2f, 0x1.70ccccp-2f,
    0x1.7f3334p-2f, 0x1.8d9998p-2f, 0x1.9cp-2f, 0x1.aa6664p-2f, 0x1.b8ccccp-2f, 0x1.c73334p-2f,
    0x1.d59998p-2f, 0x1.e4p-2f, 0x1.f26668p-2f, 0x1.006666p-1f, 0x1.07999ap-1f, 0x1.0eccccp-1f,
    0x1.16p-1f, 0x1.1d3334p-1f, 0x1.246668p-1f, 0x1.2b999ap-1f, 0x1.32ccccp-1f, 0x1.3ap-1f,
    0x1.413334p-1f, 0x1.486666p-1f, 0x1.4f999ap-1f, 0x1.56cccep-1f, 0x1.5ep-1f, 0x1.653334p-1f,
    0x1.6c6668p-1f, 0x1.73999ap-1f, 0x1.7acccep-1f, 0x1.82p-1f, 0x1.893334p-1f, 0x1.906666p-1f,
    0x1.979998p-1f, 0x1.9eccccp-1f, 0x1.a6p-1f, 0x1.ad3332p-1f, 0x1.b46666p-1f, 0x1.bb9998p-1f,
    0x1.c2ccccp-1f, 0x1.cap-1f, 0x1.d13334p-1f, 0x1.d86666p-1f, 0x1.df9998p-1f, 0x1.e6ccccp-1f,
    0x1.eep-1f, 0x1.f53332p-1f, 0x1.fc6666p-1f, 0x1p+0f};

// The index of the nearest of `values` (ascending) to x; ties to the lower index.
template <size_t N>
uint8_t nearest_of(const std::array<float, N>& values, float x) {
    const auto above = std::lower_bound(values.begin(), values.end(), x);
    if (above == values.begin()) return 0;
    if (above == values.end()) return static_cast<uint8_t>(N - 1);
    const auto below = above - 1;
    return static_cast<uint8_t>((*above - x < x - *below ? above : below) - values.begin());
}

}  // namespace

const std::array<float, 16>& nf4_code_values() {
    static const std::array<float, 16> values = [] {
        std::array<float, 16> v{};
        for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(kNf4Values[i]);
        return v;
    }();
    return values;
}

const std::array<float, 256>& dynamic_map_values() { return kDynamicMap; }

uint8_t nearest_nf4_code(float normalised) {
    // bitsandbytes' dQuantizeNF4: x > midpoint(code k, code k+1) picks k+1, so a tie goes low.
    static const std::array<float, 15> midpoints = [] {
        std::array<float, 15> m{};
        for (size_t i = 0; i < m.size(); ++i) m[i] = static_cast<float>((kNf4Values[i] + kNf4Values[i + 1]) / 2.0);
        return m;
    }();
    uint8_t code = 0;
    for (float midpoint : midpoints) code += normalised > midpoint ? 1 : 0;
    return code;
}

uint8_t nearest_dynamic_map_code(float normalised) { return nearest_of(dynamic_map_values(), normalised); }

Nf4Sizes nf4_sizes(int64_t elements) {
    Nf4Sizes s;
    s.elements = elements;
    s.code_bytes = (elements + 1) / 2;
    s.blocks = (elements + kNf4BlockSize - 1) / kNf4BlockSize;
    s.scale_blocks = (s.blocks + kNf4ScaleBlockSize - 1) / kNf4ScaleBlockSize;
    return s;
}

Nf4Tensor nf4_tensor(void* storage, int64_t elements) {
    Nf4Tensor q;
    q.sizes = nf4_sizes(elements);
    auto* bytes = static_cast<uint8_t*>(storage);
    q.codes = bytes;
    q.absmax_codes = bytes + q.sizes.absmax_offset();
    q.scales = reinterpret_cast<float*>(bytes + q.sizes.scales_offset());
    q.offset = reinterpret_cast<float*>(bytes + q.sizes.offset_offset());
    return q;
}

void quantize_nf4(const float* values, const Nf4Tensor& q) {
    const Nf4Sizes& s = q.sizes;
    std::vector<float> absmax(static_cast<size_t>(s.blocks));
    std::fill(q.codes, q.codes + s.code_bytes, uint8_t{0});
    for (int64_t b = 0; b < s.blocks; ++b) {
        const int64_t begin = b * kNf4BlockSize, end = std::min(begin + kNf4BlockSize, s.elements);
        float largest = 0.0f;
        for (int64_t i = begin; i < end; ++i) largest = std::max(largest, std::fabs(values[i]));
        absmax[static_cast<size_t>(b)] = largest;
        // bitsandbytes multiplies by the reciprocal; an all-zero block's values stay code 7 (0.0).
        const float inverse = largest > 0.0f ? 1.0f / largest : 0.0f;
        for (int64_t i = begin; i < end; ++i) {
            const uint8_t code = nearest_nf4_code(values[i] * inverse);
            q.codes[i / 2] |= static_cast<uint8_t>(i % 2 == 0 ? code << 4 : code);
        }
    }
    double sum = 0.0;
    for (float a : absmax) sum += a;
    const float offset = static_cast<float>(sum / static_cast<double>(s.blocks));
    *q.offset = offset;
    for (int64_t c = 0; c < s.scale_blocks; ++c) {
        const int64_t begin = c * kNf4ScaleBlockSize, end = std::min(begin + kNf4ScaleBlockSize, s.blocks);
        float largest = 0.0f;
        for (int64_t b = begin; b < end; ++b)
            largest = std::max(largest, std::fabs(absmax[static_cast<size_t>(b)] - offset));
        q.scales[c] = largest;
        const float inverse = largest > 0.0f ? 1.0f / largest : 0.0f;
        for (int64_t b = begin; b < end; ++b)
            q.absmax_codes[b] = nearest_dynamic_map_code((absmax[static_cast<size_t>(b)] - offset) * inverse);
    }
}

float nf4_block_absmax(const Nf4Tensor& q, int64_t block) {
    const float scaled = dynamic_map_values()[q.absmax_codes[block]] * q.scales[block / kNf4ScaleBlockSize];
    return scaled + *q.offset;
}

void dequantize_nf4(const Nf4Tensor& q, int64_t begin, int64_t end, Precision precision, void* out) {
    const std::array<float, 16>& codes = nf4_code_values();
    // A block at a time: its codes unpacked to indices, looked up (a gather the compiler
    // vectorises) and scaled into fp32, then copied or rounded to 16 bits in one pass.
    alignas(64) int32_t index[kNf4BlockSize];
    alignas(64) float values[kNf4BlockSize];
    int64_t i = begin;
    while (i < end) {
        const int64_t block = i / kNf4BlockSize;
        const int64_t first = block * kNf4BlockSize;
        const int64_t stop = std::min(first + kNf4BlockSize, end);
        const int64_t width = std::min(first + kNf4BlockSize, q.sizes.elements) - first;
        const uint8_t* bytes = q.codes + first / 2;
        for (int64_t k = 0; k < (width + 1) / 2; ++k) {
            index[2 * k] = bytes[k] >> 4;
            index[2 * k + 1] = bytes[k] & 0x0f;
        }
        const float absmax = nf4_block_absmax(q, block);
#pragma omp simd
        for (int64_t k = 0; k < width; ++k) values[k] = codes[static_cast<size_t>(index[k])] * absmax;
        const int64_t offset = i - first, count = stop - i;
        if (precision == Precision::fp32)
            std::copy(values + offset, values + offset + count, static_cast<float*>(out) + i);
        else
            store_16bit_serial(precision, values + offset, static_cast<uint16_t*>(out) + i, count);
        i = stop;
    }
}

}  // namespace trainbench
