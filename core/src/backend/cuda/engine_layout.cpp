#include "backend/cuda/engine_layout.hpp"

#include <algorithm>
#include <cmath>

#include "backend/cuda/device_allocator.hpp"
#include "backend/cuda/gemm.hpp"
#include "optim/optimizer_step.hpp"
#include "trainbench/error.hpp"

namespace trainbench::cuda {
namespace {

constexpr int64_t kParameterAlignment = 128;  // elements: 512 B in fp32, 256 B in 16-bit
constexpr int64_t kByteAlignment = 256;

int64_t align_up(int64_t value, int64_t alignment) {
    return (value + alignment - 1) / alignment * alignment;
}

// Appends `bytes` to a block being laid out and returns where they start.
int64_t take(int64_t& cursor, int64_t bytes) {
    const int64_t offset = align_up(cursor, kByteAlignment);
    cursor = offset + bytes;
    return offset;
}

// Saved-activation buffers the backward needs for a segment length k (see EngineLayout):
// checkpoints between segments, scratch inside one segment, and gelu's pre-activations.
int64_t buffers_kept(int layers, int k, bool keeps_preactivation) {
    const int segments = (layers + k - 1) / k;
    return (segments - 1) + (k - 1) + (keeps_preactivation ? k : 0);
}

int best_segment_length(int layers, bool keeps_preactivation) {
    const int64_t without = (layers - 1) * (keeps_preactivation ? 2 : 1);
    int best = 0;
    int64_t best_count = without;
    for (int k = 1; k <= layers; ++k) {
        const int64_t count = buffers_kept(layers, k, keeps_preactivation);
        if (count < best_count) {
            best = k;
            best_count = count;
        }
    }
    return best;  // 0: checkpointing would keep as much as plain backprop, so stay plain
}

}  // namespace

EngineLayout make_engine_layout(const EngineSpec& spec) {
    const std::vector<int64_t> sizes = mlp_layer_sizes(spec.model);
    if (sizes.size() < 2) throw Error("the model needs an input and an output size");
    for (int64_t size : sizes) {
        if (size <= 0) throw Error("every layer size must be positive");
    }
    EngineLayout layout;
    layout.storage = storage_type_for(spec.precision);
    layout.batch = std::max<int64_t>(1, spec.max_micro_batch);
    layout.sizes = sizes;
    layout.activation = mlp_activation(spec.model);
    layout.classification = spec.model.classes > 0;
    const int layer_count = static_cast<int>(sizes.size()) - 1;
    const int64_t element = storage_bytes(layout.storage);
    const int64_t batch = layout.batch;

    int64_t cursor = 0;
    for (int l = 0; l < layer_count; ++l) {
        LinearSlice slice;
        slice.in = sizes[l];
        slice.out = sizes[l + 1];
        slice.weight_offset = align_up(cursor, kParameterAlignment);
        slice.bias_offset = align_up(slice.weight_offset + slice.in * slice.out, kParameterAlignment);
        cursor = slice.bias_offset + slice.out;
        layout.unpadded_count += slice.in * slice.out + slice.out;
        layout.layers.push_back(slice);
    }
    layout.parameter_count = align_up(cursor, kParameterAlignment);
    layout.optimizer_slots = optimizer_state_slots(spec.optimizer);

    // Activations.
    const bool keeps_preactivation = layout.activation == Activation::gelu;
    const int k = spec.gradient_checkpointing ? best_segment_length(layer_count, keeps_preactivation) : 0;
    layout.checkpoint_segment = k;
    int64_t widest_hidden = 0;
    for (int l = 1; l < layer_count; ++l) widest_hidden = std::max(widest_hidden, sizes[l]);
    layout.output_offset.assign(layer_count, -1);
    layout.preact_offset.assign(layer_count, -1);
    int64_t arena = 0;
    layout.output_offset[0] = take(arena, sizes[0] * batch * element);
    std::vector<int64_t> scratch_outputs, scratch_preacts;
    if (k > 0) {
        for (int p = 0; p + 1 < k; ++p) scratch_outputs.push_back(take(arena, widest_hidden * batch * element));
        if (keeps_preactivation) {
            for (int p = 0; p < k; ++p) scratch_preacts.push_back(take(arena, widest_hidden * batch * element));
        }
    }
    for (int l = 1; l < layer_count; ++l) {
        const int64_t bytes = sizes[l] * batch * element;
        if (k == 0) {
            layout.output_offset[l] = take(arena, bytes);
            if (keeps_preactivation) layout.preact_offset[l] = take(arena, bytes);
        } else {
            const int position = (l - 1) % k;
            layout.output_offset[l] = position == k - 1 ? take(arena, bytes) : scratch_outputs[position];
            if (keeps_preactivation) layout.preact_offset[l] = scratch_preacts[position];
        }
    }
    layout.logits_offset = take(arena, sizes[layer_count] * batch * element);
    layout.activation_bytes = arena;

    // Workspace.
    int64_t widest_output = 0;
    for (int l = 1; l <= layer_count; ++l) widest_output = std::max(widest_output, sizes[l]);
    int64_t work = 0;
    layout.gemm_workspace_bytes = static_cast<int64_t>(GemmRunner::kWorkspaceBytes);
    layout.gemm_workspace_offset = take(work, layout.gemm_workspace_bytes);
    layout.grad_offset[0] = take(work, widest_output * batch * element);
    layout.grad_offset[1] = take(work, widest_output * batch * element);
    if (layout.storage != StorageType::f32) {
        layout.upload_offset = take(work, sizes[0] * batch * 4);
    }
    layout.labels_offset = take(work, batch * 4);
    layout.targets_offset = take(work, batch * 4);
    layout.indices_offset = take(work, batch * 8);
    layout.sample_loss_offset = take(work, batch * 8);
    layout.sample_correct_offset = take(work, batch * 4);
    layout.totals_offset = take(work, 2 * 8);
    layout.norm_partials_offset = take(work, kSumSquaresPartials * 8);
    layout.norm_result_offset = take(work, 8);
    layout.workspace_bytes = work;

    if (spec.preload != nullptr && spec.preload->train.count > 0) {
        const DataSplit& train = spec.preload->train;
        const int64_t values = train.count * train.features;
        int64_t preload = 0;
        layout.preload_features_offset =
            take(preload, train.pixels_u8.empty() ? values * 4 : values);
        layout.preload_labels_offset = take(preload, train.count * 4);
        layout.preload_bytes = preload;
    }
    return layout;
}

std::array<int64_t, kMemoryCategoryCount> planned_bytes(const EngineLayout& layout) {
    std::array<int64_t, kMemoryCategoryCount> bytes{};
    auto add = [&](MemoryCategory category, int64_t size) {
        bytes[static_cast<int>(category)] += DeviceAllocator::rounded_size(size);
    };
    const int64_t n = layout.parameter_count;
    if (layout.storage == StorageType::f32) {
        add(MemoryCategory::parameters, n * 4);
    } else {
        add(MemoryCategory::parameters, n * 2);
        add(MemoryCategory::master_weights, n * 4);
    }
    add(MemoryCategory::gradients, n * 4);
    add(MemoryCategory::optimizer_state, n * 4 * layout.optimizer_slots);
    add(MemoryCategory::activations, layout.activation_bytes);
    add(MemoryCategory::workspace, layout.workspace_bytes);
    add(MemoryCategory::workspace, layout.preload_bytes);
    return bytes;
}

}  // namespace trainbench::cuda
