#include "backend/cpu/cpu_buffer_plan.hpp"

#include <algorithm>
#include <cmath>

#include "memory/tracking_arena.hpp"
#include "nn/activation.hpp"
#include "optim/optimizer_step.hpp"
#include "parallel/worker_team.hpp"

namespace trainbench {
namespace {
int idx(MemoryCategory c) { return static_cast<int>(c); }
}  // namespace

CpuBufferPlan make_cpu_buffer_plan(const EngineSpec& spec) {
    CpuBufferPlan plan;
    const std::vector<int64_t> sizes = mlp_layer_sizes(spec.model);
    plan.activation = mlp_activation(spec.model);
    int64_t offset = 0;
    for (size_t i = 0; i + 1 < sizes.size(); ++i) {
        LayerSlice slice;
        slice.in = sizes[i];
        slice.out = sizes[i + 1];
        slice.weight_offset = offset;
        slice.bias_offset = offset + sizes[i] * sizes[i + 1];
        offset = slice.bias_offset + slice.out;
        plan.largest_layer_parameters = std::max(plan.largest_layer_parameters, slice.in * slice.out + slice.out);
        plan.layers.push_back(slice);
    }
    plan.parameter_count = offset;
    plan.threads = WorkerTeam::resolved_size(spec.threads);
    auto take_packed = [&plan](int64_t floats) {
        const int64_t offset = plan.packed_floats;
        plan.packed_floats += (floats + 15) / 16 * 16;  // keeps every block 64-byte aligned
        return offset;
    };
    for (size_t i = 0; i < plan.layers.size(); ++i) {
        auto& slice = plan.layers[i];
        slice.packed = make_packed_layout(PackedOperand::weights, slice.in, slice.out, plan.threads);
        slice.packed_offset = take_packed(slice.packed.total_floats() + slice.out);
        if (i == 0) continue;
        slice.packed_transposed = make_packed_layout(PackedOperand::weights_transposed, slice.in, slice.out, plan.threads);
        slice.packed_transposed_offset = take_packed(slice.packed_transposed.total_floats());
    }
    plan.optimizer_slots = optimizer_state_slots(spec.optimizer);
    plan.half = spec.precision != Precision::fp32;
    plan.hidden_layers = static_cast<int64_t>(sizes.size()) - 2;
    plan.save_preactivation = activation_needs_input(plan.activation);
    plan.widest = *std::max_element(sizes.begin(), sizes.end());
    for (int64_t l = 1; l <= plan.hidden_layers; ++l) plan.widest_hidden = std::max(plan.widest_hidden, sizes[l]);
    plan.micro_batch = std::max(spec.max_micro_batch, spec.max_eval_batch);
    if (spec.gradient_checkpointing && plan.hidden_layers >= 2) {
        // sqrt(n) segments: n/s checkpoints plus one segment of s-1 recomputed activations.
        plan.segment = std::max<int64_t>(2, static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(plan.hidden_layers)))));
    }
    return plan;
}

BytesByCategory CpuBufferPlan::planned_bytes() const {
    BytesByCategory bytes{};
    auto add = [&bytes](MemoryCategory c, int64_t n) { bytes[idx(c)] += TrackingArena::rounded_size(n); };
    const int64_t p = parameter_count;
    if (half) {
        add(MemoryCategory::master_weights, p * 4);
        add(MemoryCategory::parameters, p * 2);
    } else {
        add(MemoryCategory::parameters, p * 4);
    }
    add(MemoryCategory::gradients, p * 4);
    if (optimizer_slots > 0) add(MemoryCategory::optimizer_state, p * 4 * optimizer_slots);

    const int64_t e = element_bytes();
    const int64_t per_slot_sets = save_preactivation ? 2 : 1;
    // A_0 (the input copy) is always kept; z has no slot for l = 0.
    add(MemoryCategory::activations, layers.front().in * micro_batch * e);
    for (int64_t l = 1; l <= hidden_layers; ++l) {
        if (!kept(l)) continue;
        const int64_t width = layers[l].in;
        for (int64_t k = 0; k < per_slot_sets; ++k) add(MemoryCategory::activations, width * micro_batch * e);
    }
    for (int64_t r = 0; r < recompute_slots(); ++r)
        for (int64_t k = 0; k < per_slot_sets; ++k) add(MemoryCategory::activations, widest_hidden * micro_batch * e);

    add(MemoryCategory::workspace, packed_floats * 4);         // packed W and W^T (nn/packed_weights.hpp)
    add(MemoryCategory::workspace, widest * micro_batch * 4);  // gradient ping
    add(MemoryCategory::workspace, widest * micro_batch * 4);  // gradient pong
    if (half) {
        add(MemoryCategory::workspace, widest * micro_batch * 4);  // widened activation
        add(MemoryCategory::workspace, widest * micro_batch * 4);  // widened pre-activation
        add(MemoryCategory::workspace, largest_layer_parameters * 4);  // widened weights
    }
    return bytes;
}

BytesByCategory plan_cpu_engine_memory(const EngineSpec& spec) {
    if (spec.model.family != ModelFamily::mlp) return plan_cpu_graph_memory(spec);
    return make_cpu_buffer_plan(spec).planned_bytes();
}

}  // namespace trainbench
