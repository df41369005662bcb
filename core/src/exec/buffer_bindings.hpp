#pragma once
// Where an engine's buffers are, by role (plan/planned_buffer.hpp). A backend allocates each of
// the plan's buffers in its own memory and binds it here by its role; the walk and the kernels
// then read them by name. What a plan does not ask for stays null. Tensors in a recompute slot,
// and in-place results, have no buffer of their own: bind_tensor_views points them at theirs.
#include <array>
#include <cstdint>
#include <vector>

#include "plan/graph_plan.hpp"

namespace trainbench {

struct BufferBindings {
    // Persistent.
    float* weights = nullptr;             // fp32: every weight; 16-bit runs: the trainable ones' master copy
    uint16_t* working_weights = nullptr;  // 16-bit runs: the copy the products read
    uint8_t* nf4_store = nullptr;
    float* gradients = nullptr;
    float* optimizer_state = nullptr;
    float* optimizer_scratch = nullptr;
    float* packed_weights = nullptr;
    void* nf4_tile = nullptr;
    float* nf4_packed_tile = nullptr;
    float* dora_norms = nullptr;
    void* onednn_scratchpads = nullptr;
    float* stage_input = nullptr;
    float* stage_input_gradient = nullptr;
    float* stage_output = nullptr;
    float* stage_output_gradient = nullptr;
    char* preloaded_split = nullptr;
    char* device_workspace = nullptr;
    // A micro-batch's, kept from its forward to its backward.
    int32_t* tokens = nullptr;          // inputs, then targets at GraphPlan::token_elements
    std::vector<void*> tensors;         // fp32, or 16-bit codes where the plan stores the tensor in 16 bits
    float* loss_gradient = nullptr;
    // A pass's.
    std::vector<void*> recompute_slots;
    float* activation_gradients = nullptr;
    float* gradient_buckets = nullptr;
    float* kernel_scratch = nullptr;
    std::array<float*, 2> input_staging{};
    std::array<float*, 2> output_staging{};
    float* weight_staging = nullptr;
    float* attention_scratch = nullptr;

    BufferBindings() = default;
    // Sized for `plan`'s tensors and recompute slots.
    explicit BufferBindings(const GraphPlan& plan);
    void bind(const PlannedBuffer& buffer, void* at);
    // Once the tensors with buffers of their own and the recompute slots are bound: the others.
    void bind_tensor_views(const GraphPlan& plan);
};

}  // namespace trainbench
