#include "exec/buffer_bindings.hpp"

namespace trainbench {

BufferBindings::BufferBindings(const GraphPlan& plan)
    : tensors(plan.model.tensors.size(), nullptr), recompute_slots(plan.slot_elements.size(), nullptr) {}

void BufferBindings::bind(const PlannedBuffer& buffer, void* at) {
    const auto index = static_cast<size_t>(buffer.index);
    switch (buffer.role) {
        case BufferRole::weights: weights = static_cast<float*>(at); return;
        case BufferRole::working_weights: working_weights = static_cast<uint16_t*>(at); return;
        case BufferRole::nf4_store: nf4_store = static_cast<uint8_t*>(at); return;
        case BufferRole::gradients: gradients = static_cast<float*>(at); return;
        case BufferRole::optimizer_state: optimizer_state = static_cast<float*>(at); return;
        case BufferRole::optimizer_scratch: optimizer_scratch = static_cast<float*>(at); return;
        case BufferRole::packed_weights: packed_weights = static_cast<float*>(at); return;
        case BufferRole::nf4_tile: nf4_tile = at; return;
        case BufferRole::nf4_packed_tile: nf4_packed_tile = static_cast<float*>(at); return;
        case BufferRole::dora_norms: dora_norms = static_cast<float*>(at); return;
        case BufferRole::onednn_scratchpads: onednn_scratchpads = at; return;
        case BufferRole::stage_input: stage_input = static_cast<float*>(at); return;
        case BufferRole::stage_input_gradient: stage_input_gradient = static_cast<float*>(at); return;
        case BufferRole::stage_output: stage_output = static_cast<float*>(at); return;
        case BufferRole::stage_output_gradient: stage_output_gradient = static_cast<float*>(at); return;
        case BufferRole::preloaded_split: preloaded_split = static_cast<char*>(at); return;
        case BufferRole::device_workspace: device_workspace = static_cast<char*>(at); return;
        case BufferRole::tokens: tokens = static_cast<int32_t*>(at); return;
        case BufferRole::tensor: tensors.at(index) = at; return;
        case BufferRole::loss_gradient: loss_gradient = static_cast<float*>(at); return;
        case BufferRole::recompute_slot: recompute_slots.at(index) = at; return;
        case BufferRole::activation_gradients: activation_gradients = static_cast<float*>(at); return;
        case BufferRole::gradient_buckets: gradient_buckets = static_cast<float*>(at); return;
        case BufferRole::kernel_scratch: kernel_scratch = static_cast<float*>(at); return;
        case BufferRole::input_staging: input_staging.at(index) = static_cast<float*>(at); return;
        case BufferRole::output_staging: output_staging.at(index) = static_cast<float*>(at); return;
        case BufferRole::weight_staging: weight_staging = static_cast<float*>(at); return;
        case BufferRole::attention_scratch: attention_scratch = static_cast<float*>(at); return;
    }
}

void BufferBindings::bind_tensor_views(const GraphPlan& plan) {
    for (size_t t = 0; t < tensors.size(); ++t)
        if (plan.tensor_slot[t] >= 0) tensors[t] = recompute_slots[static_cast<size_t>(plan.tensor_slot[t])];
    for (size_t t = 0; t < tensors.size(); ++t)  // in-place results share their input's storage
        if (plan.tensor_alias[t] >= 0) tensors[t] = tensors[static_cast<size_t>(plan.tensor_alias[t])];
}

}  // namespace trainbench
