#pragma once
// Where every tensor of the CUDA engine lives, decided once from the EngineSpec. The same
// layout drives plan_cuda_engine_memory and the engine's allocations, so the plan the app
// shows is what the device really holds.
#include <array>
#include <cstdint>
#include <vector>

#include "backend/compute_engine.hpp"
#include "backend/cuda/kernels.hpp"

namespace trainbench::cuda {

struct LinearSlice {
    int64_t in = 0, out = 0;
    int64_t weight_offset = 0;  // in floats (or 16-bit values) from the flat parameter start
    int64_t bias_offset = 0;
};

struct EngineLayout {
    StorageType storage = StorageType::f32;
    int64_t batch = 0;  // columns every activation buffer holds (max_micro_batch)
    std::vector<int64_t> sizes;  // input, hidden..., output
    Activation activation = Activation::relu;
    bool classification = true;  // softmax cross-entropy, else mean squared error
    std::vector<LinearSlice> layers;
    // Flat parameters, each tensor starting on a 512-byte boundary so that cuBLASLt sees
    // aligned operands; the padding is zero and stays zero under every optimizer.
    int64_t parameter_count = 0;   // padded length
    int64_t unpadded_count = 0;    // what torch would count
    int optimizer_slots = 0;

    // Activation arena (bytes). output_offset[l] holds the activation a_l for l = 0..L-1
    // (a_0 is the input batch), preact_offset[l] the pre-activation z_l where the backward
    // needs it (gelu), -1 elsewhere; logits are the last layer's output.
    std::vector<int64_t> output_offset;
    std::vector<int64_t> preact_offset;
    int64_t logits_offset = 0;
    int64_t activation_bytes = 0;
    // Gradient checkpointing: layers per segment, 0 when off. Segment s covers layers
    // s*k+1 .. min((s+1)*k, L); only segment ends keep their own activation buffer, the
    // layers inside a segment share scratch buffers and are recomputed during backward.
    int checkpoint_segment = 0;

    // Workspace block (bytes).
    int64_t gemm_workspace_offset = 0;
    int64_t gemm_workspace_bytes = 0;
    int64_t grad_offset[2] = {0, 0};   // ping-pong activation gradients, storage type
    int64_t upload_offset = -1;        // fp32 input as uploaded, 16-bit runs only
    int64_t labels_offset = 0, targets_offset = 0, indices_offset = 0;
    int64_t sample_loss_offset = 0;     // double per sample
    int64_t sample_correct_offset = 0;  // int32 per sample
    int64_t totals_offset = 0;         // double[2]: loss sum, correct count
    int64_t norm_partials_offset = 0;  // double[kSumSquaresPartials]
    int64_t norm_result_offset = 0;    // double
    int64_t workspace_bytes = 0;

    // Preloaded train split (bytes), 0 without --preload-device.
    int64_t preload_features_offset = 0;
    int64_t preload_labels_offset = 0;
    int64_t preload_bytes = 0;

    int layer_count() const { return static_cast<int>(layers.size()); }
};

EngineLayout make_engine_layout(const EngineSpec& spec);

// Bytes per category the engine allocates for this layout, as the allocator rounds them.
std::array<int64_t, kMemoryCategoryCount> planned_bytes(const EngineLayout& layout);

}  // namespace trainbench::cuda
