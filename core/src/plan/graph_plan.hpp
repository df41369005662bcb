#pragma once
// The planner: turns a model description, the micro-batch and the techniques into the schedule
// of a micro-batch (forward, recompute, backward) and every buffer the engine holds, with its
// category and size. The engine acquires exactly the buffers listed here, in this order, and
// the run plan sums the same list, so the memory plan equals the allocation by construction.
#include <cstdint>
#include <vector>

#include "model/model_desc.hpp"
#include "model/param_layout.hpp"
#include "nn/linear.hpp"
#include "nn/packed_weights.hpp"
#include "trainbench/memory.hpp"

namespace trainbench {

// One allocation of the engine.
struct PlannedBuffer {
    MemoryCategory category = MemoryCategory::workspace;
    int64_t bytes = 0;
};

// W packed for the forward product and, when the op's input needs a gradient, W^T for it.
struct PackedLinear {
    PackedLayout forward;
    int64_t forward_offset = -1;  // floats into the packed block; the bias follows W
    PackedLayout transposed;
    int64_t transposed_offset = -1;  // -1: the input needs no gradient
};

struct GraphPlan {
    ModelDesc model;
    ParamLayout params;
    int64_t micro_batch = 0;  // samples the buffers hold (training and evaluation)
    int threads = 1;
    int optimizer_slots = 0;
    bool checkpointing = false;

    // Per tensor: elements at micro_batch samples; its own buffer (kept) or a shared
    // recompute slot (checkpointing drops it and rebuilds its segment before the backward).
    std::vector<int64_t> tensor_elements;
    std::vector<int> tensor_slot;     // -1: its own buffer
    std::vector<int64_t> slot_elements;
    int last_segment = -1;            // still resident after the forward: never recomputed

    // Gradients of intermediate tensors share one workspace block, at offsets from their
    // lifetimes in the backward pass (first fit); -1 where no gradient is needed.
    std::vector<int64_t> grad_offset;
    int64_t grad_floats = 0;

    // Per op: whether its backward overwrites (first writer) or adds to each input's gradient,
    // and, in an update's first micro-batch, to each parameter's gradient.
    std::vector<std::vector<GradientWrite>> input_write;
    std::vector<std::vector<GradientWrite>> first_param_write;

    std::vector<PackedLinear> packed;  // per op (linear ops only)
    int64_t packed_floats = 0;
    int64_t scratch_floats = 0;        // the largest kernel scratch
    int64_t token_elements = 0;        // int32 inputs and targets of a token micro-batch

    // Every allocation, persistent ones first; per-micro-batch ones after `first_step_buffer`.
    std::vector<PlannedBuffer> buffers;
    size_t first_step_buffer = 0;
    BytesByCategory planned_bytes() const;

    int64_t rows(const OpDesc& op, int64_t samples) const { return samples * op.rows_per_sample; }
};

GraphPlan make_graph_plan(const ModelDesc& model, int64_t micro_batch, int threads, int optimizer_slots,
                          bool checkpointing);

}  // namespace trainbench
