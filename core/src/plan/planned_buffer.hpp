#pragma once
// One allocation an engine makes for its plan, and what it holds. Engines bind each buffer by
// its role (exec/buffer_bindings.hpp), never by its place in the plan's list, so the planner
// may add, drop or reorder buffers without an engine reading the wrong one.
#include <cstdint>

#include "trainbench/memory.hpp"

namespace trainbench {

enum class BufferRole : uint8_t {
    // Persistent.
    weights,                // fp32 runs: every weight; 16-bit runs: the trainable ones' master copy
    working_weights,        // 16-bit runs: the working copy of every weight
    nf4_store,              // QLoRA's 4-bit base weights
    gradients,              // the trainable weights' (with ZeRO-2 buckets: this process's shard)
    optimizer_state,
    optimizer_scratch,      // --fused off: the optimizer's temporaries
    packed_weights,         // the CPU's products: packed or widened weights
    nf4_tile,               // QLoRA: one weight dequantized for its products
    nf4_packed_tile,        // ... and packed for Eigen's
    dora_norms,
    onednn_scratchpads,     // one per worker thread
    stage_input,            // a pipeline stage's messages (fp32)
    stage_input_gradient,
    stage_output,
    stage_output_gradient,
    preloaded_split,        // CUDA, --preload-device: the train split on the device
    device_workspace,       // CUDA: cuBLAS workspace, reductions, labels (cuda_device_plan.hpp)
    // Kept by a micro-batch from its forward to its backward (once per micro-batch in flight).
    tokens,                 // token models: inputs, then targets
    tensor,                 // index: the tensor
    loss_gradient,          // the last stage of a GPipe pipeline: its loss's gradient
    // What a pass needs while it runs.
    recompute_slot,         // index: the slot
    activation_gradients,
    gradient_buckets,       // ZeRO-2
    kernel_scratch,
    input_staging,          // 16-bit runs; index: 0 or 1
    output_staging,         // 16-bit runs; index: 0 or 1
    weight_staging,         // 16-bit runs on Eigen's products
    attention_scratch,      // CUDA: the fused attention backward's
};

struct PlannedBuffer {
    MemoryCategory category = MemoryCategory::workspace;
    int64_t bytes = 0;
    BufferRole role = BufferRole::kernel_scratch;
    int index = 0;  // which tensor, slot or staging, for the roles that come several times
};

}  // namespace trainbench
