#pragma once
// Weight matrices packed once per update into the panel layout of Eigen's matrix-product
// kernel, so that the micro-batches of an update share one packing of each W.
//
// An ordinary product packs its large operand on every call. With gradient accumulation the
// same W meets step_size micro-batches of step_size-times fewer columns, so the share of time
// spent packing grows with step_size (perf, benchmark MLP, step_size 4: the forward's packing
// of W took ~9% of an update, the input gradient's packing of W^T ~3%). The engine packs each
// layer's W (for Z = W X) and W^T (for dX = W^T dZ) the first time they are needed after the
// weights changed, and every product of the update reads those copies: two more W-sized
// buffers, counted as workspace.
#include <cstdint>

#include "trainbench/run_config.hpp"

namespace trainbench {

// Which matrix a packed block holds, given W stored [out x in] row-major (torch's layout).
enum class PackedOperand {
    weights,             // W: rows = out, depth = in (forward)
    weights_transposed,  // W^T: rows = in, depth = out (input gradient)
};

// Where each block of a packed [rows x depth] matrix lives. The rows are split into `slices`
// contiguous slices (one per worker thread) and the depth into blocks of `depth_block`; each
// (slice, depth block) is one packed block, 64-byte aligned.
struct PackedLayout {
    PackedOperand operand = PackedOperand::weights;
    int64_t rows = 0;
    int64_t depth = 0;
    int64_t slices = 1;
    int64_t depth_block = 1;

    int64_t depth_blocks() const { return (depth + depth_block - 1) / depth_block; }
    int64_t slice_begin(int64_t slice) const { return rows * slice / slices; }
    // Offset (in floats) of block (slice, k_block), and the total size in floats.
    int64_t block_offset(int64_t slice, int64_t k_block) const;
    int64_t total_floats() const { return block_offset(slices, 0); }
};

// The layout for W of a Linear layer with `in` inputs and `out` outputs.
PackedLayout make_packed_layout(PackedOperand operand, int64_t in, int64_t out, int slices);

// Packs W ([out x in], row-major) or its transpose, as the layout says, into `packed`.
void pack_weights(const PackedLayout& layout, const float* weight, float* packed);

// What a product does to each block of its output while the block is still in cache (--fused
// on): the activation that follows the product in the model, in place or into a second buffer
// of the output's layout (when the backward needs the pre-activation too). In 16-bit runs the
// output is first rounded as its storage will hold it, since that is what the activation reads
// when it runs on its own.
struct ProductEpilogue {
    Activation activation = Activation::relu;
    float* activated = nullptr;            // null: in place
    Precision rounding = Precision::fp32;  // fp32: none
    // 16-bit runs: the storage the rounded product and its activation are written to as codes,
    // straight from the epilogue while the block is in cache; the fp32 output is then only read
    // and `activated` is not used. Null output_codes with activated_codes: an in-place
    // activation, whose product is not kept.
    uint16_t* output_codes = nullptr;
    uint16_t* activated_codes = nullptr;
};

// The epilogue over rows [row, row + rows) of columns [column, column + columns) of a
// column-major product output whose columns hold `height` rows, on the calling thread.
void apply_epilogue(const ProductEpilogue& epilogue, float* output, int64_t height, int64_t row, int64_t rows,
                    int64_t column, int64_t columns);

// Rows [slice_begin(first), slice_begin(end)) of C = M B (+ bias), where M is the packed
// matrix, B is [depth x batch] and C [rows x batch], both column-major. With a bias, C starts
// as the bias; without, C is overwritten. Runs on the calling thread; each element of C is
// summed in the same order whatever the slicing.
void packed_product_slices(const PackedLayout& layout, const float* packed, const float* bias,
                           const float* input, float* output, int64_t batch, int64_t first, int64_t end,
                           const ProductEpilogue* epilogue = nullptr);

// Z = W X + b over the worker team, W packed as PackedOperand::weights.
void packed_linear_forward(const PackedLayout& layout, const float* packed, const float* bias,
                           const float* input, float* output, int64_t batch,
                           const ProductEpilogue* epilogue = nullptr);

}  // namespace trainbench
