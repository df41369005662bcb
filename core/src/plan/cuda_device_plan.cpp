#include "plan/cuda_device_plan.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "backend/backend_support.hpp"
#include "trainbench/error.hpp"

namespace trainbench {
namespace cuda {
namespace {

constexpr int64_t kByteAlignment = 256;

int64_t align_up(int64_t value, int64_t alignment) { return (value + alignment - 1) / alignment * alignment; }

// Appends `bytes` to a block being laid out and returns where they start.
int64_t take(int64_t& cursor, int64_t bytes) {
    const int64_t offset = align_up(cursor, kByteAlignment);
    cursor = offset + bytes;
    return offset;
}

}  // namespace

GraphPlan plan_cuda_graph(const EngineSpec& spec) {
    if (std::string why = unsupported_in(Backend::cuda, spec.model); !why.empty()) throw Error(why);
    // One "thread": the CPU kernels' per-thread scratch has no meaning here; the planner's kernel
    // scratch then still holds the LayerNorm backward's partial sums, which the GPU uses too, and
    // with --fused off the eager attention's and loss's buffers, which are the same size on
    // both engines. The planner's fusions are the CPU backend's; the CUDA backend runs its own
    // fused kernels, or with --fused off the eager ones (eager_kernels.hpp), whose optimizer
    // temporaries the planner also sizes.
    return make_graph_plan(spec.model, std::max<int64_t>(1, std::max(spec.max_micro_batch, spec.max_eval_batch)),
                           {.threads = 1,
                            .optimizer = spec.optimizer,
                            .checkpointing = spec.gradient_checkpointing,
                            .precision = spec.precision,
                            .fused = spec.fused});
}

bool attention_keeps_probabilities(const GraphPlan& g, const OpDesc& op) {
    const int64_t C = g.model.tensors[static_cast<size_t>(op.outputs[0])].per_sample / op.rows_per_sample;
    return !(g.attention_in_storage(op) && attention_in_tile_kernels(op.rows_per_sample, C, op.heads));
}

namespace {

// The tensor index of every att that attention_keeps_probabilities says the GPU does not keep.
std::vector<int> unkept_probabilities(const GraphPlan& g) {
    std::vector<int> att;
    for (const OpDesc& op : g.model.ops)
        if (op.kind == OpKind::attention && !attention_keeps_probabilities(g, op)) att.push_back(op.outputs[1]);
    return att;
}

}  // namespace

int64_t recomputed_probability_bytes(const GraphPlan& g) {
    int64_t bytes = 0;
    for (const int att : unkept_probabilities(g))
        bytes += allocation_bytes(g.tensor_elements[static_cast<size_t>(att)] * g.element_bytes(att));
    return bytes;
}

DevicePlan make_device_plan(const EngineSpec& spec, const GraphPlan& g) {
    DevicePlan plan;
    const ModelDesc& m = g.model;
    std::vector<char> unkept(m.tensors.size(), 0);
    for (const int att : unkept_probabilities(g)) unkept[static_cast<size_t>(att)] = 1;
    // The planner's buffers but the CPU products' and the probabilities computed again (see the
    // file comment).
    for (size_t i = 0; i < g.buffers.size(); ++i) {
        const PlannedBuffer& b = g.buffers[i];
        if (b.role == BufferRole::packed_weights || b.role == BufferRole::weight_staging) continue;
        if (b.role == BufferRole::tensor && unkept[static_cast<size_t>(b.index)] != 0) continue;
        (i < g.first_step_buffer ? plan.persistent : plan.per_micro_batch).push_back(b);
    }

    int64_t needed_scratch = 0;
    int64_t widest_bias = 0;
    for (const OpDesc& op : m.ops) {
        if (op.kind == OpKind::linear && op.params.size() > 1) {
            widest_bias = std::max(widest_bias, m.params[static_cast<size_t>(op.params[1])].numel());
        } else if (op.kind == OpKind::layernorm) {
            const int64_t C = m.params[static_cast<size_t>(op.params[0])].shape[0];
            needed_scratch = std::max(needed_scratch, layernorm_backward_scratch_floats_cuda(C));
        } else if (op.kind == OpKind::attention && spec.fused) {
            const int64_t C = m.tensors[static_cast<size_t>(op.outputs[0])].per_sample / op.rows_per_sample;
            const int64_t floats = g.sixteen_bit()
                                       ? attention_16bit_scratch_floats(g.micro_batch, op.rows_per_sample, C, op.heads)
                                       : attention_backward_scratch_floats(g.micro_batch, op.rows_per_sample);
            plan.attention_scratch_floats = std::max(plan.attention_scratch_floats, floats);
        } else if (op.kind == OpKind::attention) {
            needed_scratch = std::max(needed_scratch, attention_backward_eager_scratch_floats(
                                                          g.micro_batch, op.rows_per_sample, op.heads));
        } else if (op.kind == OpKind::cross_entropy && !spec.fused) {
            needed_scratch = std::max(needed_scratch,
                                      cross_entropy_eager_scratch_floats(m.classes, g.rows(op, g.micro_batch)));
        }
    }
    if (needed_scratch > g.scratch_floats)
        throw std::logic_error("CUDA engine: the planner's scratch is smaller than its kernels need");
    // The fused attention works one head at a time in a scratch of its own (the 16-bit forward
    // outside the tile kernels: every head's scores).
    if (plan.attention_scratch_floats > 0)
        plan.per_micro_batch.push_back({MemoryCategory::workspace, plan.attention_scratch_floats * 4, BufferRole::attention_scratch});

    const int64_t loss_terms = g.micro_batch * m.loss_terms_per_sample;
    int64_t work = 0;
    plan.gemm_workspace_bytes = kCublasWorkspaceBytes;
    plan.gemm_workspace_offset = take(work, plan.gemm_workspace_bytes);
    plan.norm_partials_offset = take(work, kSumSquaresPartials * 8);
    plan.norm_result_offset = take(work, 8);
    plan.totals_offset = take(work, 2 * 8);
    plan.sample_loss_offset = take(work, loss_terms * 8);
    plan.sample_correct_offset = take(work, loss_terms * 4);
    if (widest_bias > 0) plan.bias_partials_offset = take(work, bias_grad_partials_floats(widest_bias) * 4);
    if (!m.token_input) {
        if (m.classes > 0) plan.labels_offset = take(work, loss_terms * 4);
        else plan.targets_offset = take(work, g.micro_batch * 4);
    }
    if (spec.preload != nullptr && !m.token_input && spec.preload->train.count > 0) {
        const DataSplit& train = spec.preload->train;
        if (train.features != m.input_per_sample)
            throw std::logic_error("CUDA engine: the preloaded split's features differ from the model's input");
        plan.indices_offset = take(work, g.micro_batch * 8);
        const int64_t values = train.count * train.features;
        int64_t preload = 0;
        plan.preload_features_offset = take(preload, train.pixels_u8.empty() ? values * 4 : values);
        plan.preload_labels_offset = take(preload, train.count * 4);  // int32 labels or fp32 targets
        plan.preload_bytes = preload;
        plan.persistent.push_back({MemoryCategory::workspace, plan.preload_bytes, BufferRole::preloaded_split});
    }
    plan.workspace_bytes = work;
    plan.persistent.push_back({MemoryCategory::workspace, plan.workspace_bytes, BufferRole::device_workspace});
    return plan;
}

}  // namespace cuda

BytesByCategory plan_cuda_engine_memory(const EngineSpec& spec) {
    return plan_cuda_engine_memory(spec, cuda::plan_cuda_graph(spec));
}

BytesByCategory plan_cuda_engine_memory(const EngineSpec& spec, const GraphPlan& graph) {
    return cuda::make_device_plan(spec, graph).bytes();
}

}  // namespace trainbench
