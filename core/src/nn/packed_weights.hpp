#pragma once
// Weight matrices packed once per update into the panel layout of Eigen's matrix-product
// kernel, so that the micro-batches of an update share one packing of each W.
//
// An ordinary product packs its large operand on every call. With gradient accumulation the
// same W meets step_size micro-batches of step_size-times fewer columns, so the share of time
// spent packing grows with step_size (measured: ~+9% of an update at step_size 4 on the
// benchmark MLP). The engine packs each layer's W after every optimizer step (it changes
// nowhere else) and every forward product reads the packed copy. The copy costs one more
// W-sized buffer, counted as workspace.
#include <cstdint>

namespace trainbench {

// Where each block of a packed [rows x depth] matrix lives. The rows are split into `slices`
// contiguous slices (one per worker thread when packed) and the depth into blocks of
// `depth_block`; each (slice, depth block) is one packed block, 64-byte aligned.
struct PackedLayout {
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

PackedLayout make_packed_layout(int64_t rows, int64_t depth, int slices);

// Packs W ([rows x depth], row-major, as torch stores Linear weights) into `packed`.
void pack_weights(const PackedLayout& layout, const float* weight, float* packed);

// Z = W X + b with W packed: X is [depth x batch] and Z [rows x batch], both column-major.
// Each element of Z is summed in the same order whatever the number of threads.
void packed_linear_forward(const PackedLayout& layout, const float* packed, const float* bias,
                           const float* input, float* output, int64_t batch);

}  // namespace trainbench
