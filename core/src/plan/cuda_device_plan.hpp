#pragma once
// What the CUDA engine allocates for one EngineSpec, buffer by buffer: the planner's (graph_plan)
// except the CPU products' packed weights and weight staging and the attention probabilities
// that the tile kernels compute again, plus what CUDA needs besides.
// Plain C++ computed on the host, so that every build, with CUDA or not, can plan a GPU run
// (trainbench-cli plan --device cuda); the CUDA engine allocates exactly this list, so plan ==
// allocation holds by construction.
#include <cstdint>
#include <vector>

#include "backend/compute_engine.hpp"
#include "plan/cuda_buffer_sizes.hpp"
#include "plan/graph_plan.hpp"

namespace trainbench::cuda {

// What the device holds for one EngineSpec, besides the graph plan it was made from.
struct DevicePlan {
    // Allocation order. Persistent: parameters, [16-bit working copy], gradients, [optimizer
    // state], [eager optimizer scratch], [preloaded train split], CUDA workspace.
    // Per micro-batch: the planner's (tokens, tensors but the probabilities the tile kernels
    // compute again, recompute slots, gradient block, kernel scratch), then the fused
    // attention's scratch.
    std::vector<PlannedBuffer> persistent;
    std::vector<PlannedBuffer> per_micro_batch;

    // The CUDA workspace block, in bytes from its start.
    int64_t gemm_workspace_offset = 0;
    int64_t gemm_workspace_bytes = 0;
    int64_t norm_partials_offset = 0;  // double[kSumSquaresPartials]
    int64_t norm_result_offset = 0;    // double
    int64_t totals_offset = 0;         // double[2]: loss sum, correct count
    int64_t sample_loss_offset = 0;    // double per loss term
    int64_t sample_correct_offset = 0; // int32 per loss term
    int64_t labels_offset = -1;        // int32 per loss term (feature models; token models use the planner's)
    int64_t targets_offset = -1;       // float per sample (regression)
    int64_t indices_offset = -1;       // int64 per sample: rows of the preloaded split
    int64_t bias_partials_offset = -1; // float[bias_grad_partials_floats]: the widest bias's (linear ops with one)
    int64_t workspace_bytes = 0;

    // --preload-device (feature models): the train split, copied once, gathered per micro-batch.
    // Features as the data set holds them (u8 pixels or fp32 values), then labels or targets.
    int64_t preload_features_offset = 0;
    int64_t preload_labels_offset = 0;
    int64_t preload_bytes = 0;

    int64_t attention_scratch_floats = 0;

    BytesByCategory bytes() const {
        BytesByCategory total{};
        for (const auto* list : {&persistent, &per_micro_batch})
            for (const PlannedBuffer& b : *list)
                total[static_cast<size_t>(b.category)] += allocation_bytes(b.bytes);
        return total;
    }
};

// Whether the CUDA engine keeps attention op `op`'s probabilities (att, its output 1) from the
// forward to the backward: not where a 16-bit fused attention runs in the tile kernels
// (attention_in_tile_kernels), whose backward computes them again. Such an att has no buffer on
// the GPU (it is never in a checkpointing recompute slot: nothing reads it in the forward).
bool attention_keeps_probabilities(const GraphPlan& g, const OpDesc& op);

// The bytes of every att that attention_keeps_probabilities says the GPU does not keep: what the
// tile kernels save against keeping them, as the CPU engine does.
int64_t recomputed_probability_bytes(const GraphPlan& g);

// The planner's plan as the CUDA engine runs it. Throws Error for a model the CUDA engine has no
// kernels for (backend/backend_support.hpp).
GraphPlan plan_cuda_graph(const EngineSpec& spec);
// What CUDA allocates for `spec`, planned by plan_cuda_graph(spec).
DevicePlan make_device_plan(const EngineSpec& spec, const GraphPlan& graph);

}  // namespace trainbench::cuda
