#pragma once
// QLoRA's 4-bit NormalFloat (Dettmers et al. 2023) with double quantization, laid out as
// bitsandbytes stores a Linear4bit weight, so a tensor quantized here dequantizes to the same
// values there:
// - the tensor in blocks of 64 elements (flattened, row-major), each scaled by its absmax and
//   each element rounded to the nearest of the 16 NF4 code values; two codes a byte, the even
//   element in the high nibble;
// - the blocks' absmax themselves quantized ("double quantization"): their mean subtracted
//   (the offset), then in blocks of 256 scaled by their absmax and rounded to the nearest value
//   of bitsandbytes' signed 8-bit dynamic map;
// - dequantized: absmax_b = map[q_b] * scale_{b/256} + offset, value = nf4[code] * absmax_b.
// Storage: 4 bits a weight, 8 bits per 64 weights and 32 per 16,384: about 4.127 bits a weight.
#include <array>
#include <cstdint>

#include "trainbench/run_config.hpp"

namespace trainbench {

inline constexpr int64_t kNf4BlockSize = 64;        // elements per absmax
inline constexpr int64_t kNf4ScaleBlockSize = 256;  // absmax per second-level scale

// The 16 NF4 values, ascending (code 7 is 0.0, codes 0 and 15 are -1 and 1).
const std::array<float, 16>& nf4_code_values();
// bitsandbytes' create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8), ascending.
const std::array<float, 256>& dynamic_map_values();
// The nearest code to a value normalised by its block's absmax (ties to the lower code, as
// bitsandbytes' comparisons with the midpoints give).
uint8_t nearest_nf4_code(float normalised);
uint8_t nearest_dynamic_map_code(float normalised);

// Where one quantized tensor's parts lie in its storage: the packed codes, the blocks' 8-bit
// absmax codes, then (4-byte aligned) the second-level scales and the offset.
struct Nf4Sizes {
    int64_t elements = 0;
    int64_t code_bytes = 0;    // ceil(elements / 2)
    int64_t blocks = 0;        // ceil(elements / 64)
    int64_t scale_blocks = 0;  // ceil(blocks / 256)
    int64_t absmax_offset() const { return code_bytes; }
    int64_t scales_offset() const { return (code_bytes + blocks + 3) / 4 * 4; }
    int64_t offset_offset() const { return scales_offset() + scale_blocks * 4; }
    int64_t total_bytes() const { return offset_offset() + 4; }
};
Nf4Sizes nf4_sizes(int64_t elements);

struct Nf4Tensor {
    Nf4Sizes sizes;
    uint8_t* codes = nullptr;
    uint8_t* absmax_codes = nullptr;
    float* scales = nullptr;
    float* offset = nullptr;
};
// The parts of a tensor of `elements` stored at `storage` (total_bytes, 4-byte aligned).
Nf4Tensor nf4_tensor(void* storage, int64_t elements);

// Quantizes values[0, elements) into q. The offset is the blocks' absmax mean rounded once
// from a double sum (torch's float32 mean, which bitsandbytes takes, can differ in its last bit).
void quantize_nf4(const float* values, const Nf4Tensor& q);
// Each block's absmax as dequantization uses it: map[q_b] * scale + offset.
float nf4_block_absmax(const Nf4Tensor& q, int64_t block);
// Elements [begin, end) dequantized into out[begin, end): fp32 values, or in a 16-bit
// precision their codes (uint16_t), rounded once from the fp32 product as bitsandbytes
// dequantizes to its compute dtype.
void dequantize_nf4(const Nf4Tensor& q, int64_t begin, int64_t end, Precision precision, void* out);

}  // namespace trainbench
