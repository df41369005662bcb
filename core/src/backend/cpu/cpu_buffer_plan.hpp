#pragma once
// Every buffer the CPU engine allocates, with its category and size, derived from the spec
// alone. The engine allocates exactly these, and the run plan (memory budget, --auto-fit, the
// app's "planned memory") sums the same list, so the plan and the measurement agree.
#include <cstdint>
#include <vector>

#include "backend/compute_engine.hpp"
#include "nn/packed_weights.hpp"

namespace trainbench {

struct LayerSlice {
    int64_t in = 0, out = 0;
    int64_t weight_offset = 0, bias_offset = 0;  // into the flat parameter array
    // Into the packed-weights buffer: W packed for the forward product, then b, then W^T
    // packed for the input gradient (not for the first layer, which has none).
    PackedLayout packed;
    int64_t packed_offset = 0;
    PackedLayout packed_transposed;
    int64_t packed_transposed_offset = 0;
};

struct CpuBufferPlan {
    std::vector<LayerSlice> layers;
    int64_t parameter_count = 0;
    int optimizer_slots = 0;
    Activation activation = Activation::relu;
    bool half = false;               // 16-bit weights and saved activations
    int64_t hidden_layers = 0;       // n: activations A_1..A_n (A_0 is the input)
    int64_t segment = 1;             // checkpointing keeps A_l with l % segment == 0
    bool save_preactivation = false; // GELU needs z as well as a
    int64_t widest = 0;              // widest layer (input and output included)
    int64_t widest_hidden = 0;
    int64_t micro_batch = 0;
    int64_t largest_layer_parameters = 0;
    int64_t packed_floats = 0;       // every layer's packed W and its bias
    int threads = 1;                 // the spec's thread count, 0 resolved to all cores

    bool kept(int64_t l) const { return l % segment == 0; }
    int64_t recompute_slots() const { return segment - 1; }
    int64_t element_bytes() const { return half ? 2 : 4; }
    // Bytes by category at the peak of an update (persistent + per-micro-batch buffers).
    BytesByCategory planned_bytes() const;
};

CpuBufferPlan make_cpu_buffer_plan(const EngineSpec& spec);

}  // namespace trainbench
