#include "plan/graph_plan.hpp"

#include <algorithm>
#include <numeric>
#include <set>
#include <stdexcept>

#include "memory/tracking_arena.hpp"
#include "nn/activation.hpp"
#include "nn/attention.hpp"
#include "nn/conv2d.hpp"
#include "nn/layernorm.hpp"
#include "nn/dora.hpp"
#include "nn/lora.hpp"
#include "nn/loss.hpp"
#include "nn/onednn_linear.hpp"
#include "optim/optimizer_step.hpp"

namespace trainbench {
namespace {

constexpr int64_t kAlignFloats = 16;  // 64 bytes: every planned offset starts a cache line

int64_t align(int64_t floats) { return (floats + kAlignFloats - 1) / kAlignFloats * kAlignFloats; }

// Who reads each tensor, and which op writes it; the first and last op to read each parameter.
struct Uses {
    std::vector<int> producer;                                  // -1: the micro-batch's input
    std::vector<std::vector<std::pair<int, int>>> consumers;    // (op, input index)
    std::vector<int> first_param_reader, last_param_reader;
};

Uses find_uses(const ModelDesc& model) {
    Uses uses;
    uses.producer.assign(model.tensors.size(), -1);
    uses.consumers.resize(model.tensors.size());
    for (size_t o = 0; o < model.ops.size(); ++o) {
        const OpDesc& op = model.ops[o];
        for (size_t k = 0; k < op.inputs.size(); ++k)
            uses.consumers[static_cast<size_t>(op.inputs[k])].push_back({static_cast<int>(o), static_cast<int>(k)});
        for (int t : op.outputs) uses.producer[static_cast<size_t>(t)] = static_cast<int>(o);
    }
    uses.first_param_reader.assign(model.params.size(), static_cast<int>(model.ops.size()));
    uses.last_param_reader.assign(model.params.size(), -1);
    for (size_t o = 0; o < model.ops.size(); ++o)
        for (int p : model.ops[o].params) {
            auto& first = uses.first_param_reader[static_cast<size_t>(p)];
            auto& last = uses.last_param_reader[static_cast<size_t>(p)];
            first = std::min(first, static_cast<int>(o));
            last = std::max(last, static_cast<int>(o));
        }
    return uses;
}

// torch's requires_grad: a tensor needs a gradient when a trainable parameter or a tensor that
// needs one went into it. Frozen layers before the first trainable one (a LoRA fine-tune's
// embedding and first LayerNorm) run no backward at all.
std::vector<bool> find_requires_grad(const ModelDesc& model) {
    std::vector<bool> needs(model.tensors.size(), false);
    if (model.input_gradient && !needs.empty()) needs[0] = true;  // a pipeline stage's input
    for (const OpDesc& op : model.ops) {
        bool any = false;
        for (int p : op.params) any = any || model.params[static_cast<size_t>(p)].trainable;
        for (int t : op.inputs) any = any || needs[static_cast<size_t>(t)];
        for (int t : op.outputs) needs[static_cast<size_t>(t)] = any;
    }
    return needs;
}

// What the backward kernels support of frozen parameters: a Linear or LayerNorm wholly frozen,
// an embedding frozen, a LoRA layer's base frozen and its adapter (DoRA: and magnitude) trainable.
void check_frozen_params(const ModelDesc& model) {
    for (const OpDesc& op : model.ops) {
        size_t frozen = 0;
        for (int p : op.params) frozen += model.params[static_cast<size_t>(p)].trainable ? 0 : 1;
        if (op.kind == OpKind::lora_linear) {
            const bool dora = has_dora_magnitude(op) && op.outputs.size() == 3;
            if ((op.params.size() != 4 && !dora) || frozen != 2 || model.params[static_cast<size_t>(op.params[0])].trainable ||
                model.params[static_cast<size_t>(op.params[1])].trainable)
                throw std::logic_error("planner: a LoRA layer needs a frozen W, b and trainable A, B (DoRA: and m)");
            continue;
        }
        if (frozen == 0) continue;
        const bool supported = op.kind == OpKind::linear || op.kind == OpKind::layernorm || op.kind == OpKind::embedding;
        if (!supported || frozen != op.params.size())
            throw std::logic_error("planner: frozen parameters are supported on whole linear, layernorm and embedding ops");
    }
}

// An activation whose backward reads only its output (ReLU, tanh, sigmoid; not GELU) runs in
// place: its output takes its input's storage, as the input has no other reader. An MLP then
// holds one buffer per hidden layer, not two.
void assign_in_place_outputs(GraphPlan& plan, const Uses& uses) {
    const ModelDesc& m = plan.model;
    plan.tensor_alias.assign(m.tensors.size(), -1);
    for (const OpDesc& op : m.ops) {
        if (op.kind != OpKind::activation || op.activation == Activation::gelu) continue;
        const int in = op.inputs[0], out = op.outputs[0];
        if (uses.producer[static_cast<size_t>(in)] < 0 || uses.consumers[static_cast<size_t>(in)].size() != 1) continue;
        if (plan.tensor_elements[static_cast<size_t>(in)] != plan.tensor_elements[static_cast<size_t>(out)] ||
            plan.element_bytes(in) != plan.element_bytes(out))
            continue;
        plan.tensor_alias[static_cast<size_t>(out)] = in;
    }
}

// Parameter ids in the order of their offsets in the flat store.
std::vector<int> in_store_order(const GraphPlan& plan) {
    std::vector<int> order(plan.model.params.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int a, int b) {
        return plan.params.offset[static_cast<size_t>(a)] < plan.params.offset[static_cast<size_t>(b)];
    });
    return order;
}

// --fused on (GraphPlan::fused_into): a linear or convolution op whose output only an activation
// reads takes that activation into its epilogue (a convolution only in place: its epilogue runs
// before its output is transposed into planes), and a residual add takes the LayerNorm that
// reads its sum. With checkpointing both ops of a pair must be in one segment, so that
// recomputing a segment rebuilds both.
void assign_fusions(GraphPlan& plan, const Uses& uses) {
    const ModelDesc& m = plan.model;
    plan.fused_into.assign(m.ops.size(), -1);
    plan.fused_with.assign(m.ops.size(), -1);
    if (!plan.fused) return;
    auto op_at = [&m](int o) -> const OpDesc& { return m.ops[static_cast<size_t>(o)]; };
    auto fusable = [&](int a, int b) {
        return plan.fused_into[static_cast<size_t>(b)] < 0 && (!plan.checkpointing || op_at(a).segment == op_at(b).segment);
    };
    auto link = [&plan](int o, int into) {
        plan.fused_with[static_cast<size_t>(o)] = into;
        plan.fused_into[static_cast<size_t>(into)] = o;
    };
    for (int o = 0; o < static_cast<int>(m.ops.size()); ++o) {
        const OpDesc& op = op_at(o);
        if (op.outputs.empty()) continue;
        const auto& readers = uses.consumers[static_cast<size_t>(op.outputs[0])];
        if (op.kind == OpKind::linear || op.kind == OpKind::conv2d) {
            if (readers.size() != 1) continue;
            const int a = readers[0].first;
            if (op_at(a).kind != OpKind::activation || !fusable(o, a)) continue;
            if (op.kind == OpKind::conv2d && plan.tensor_alias[static_cast<size_t>(op_at(a).outputs[0])] != op.outputs[0])
                continue;
            link(o, a);
        } else if (op.kind == OpKind::residual_add) {
            for (const auto& [reader, k] : readers) {
                if (op_at(reader).kind != OpKind::layernorm || !fusable(o, reader)) continue;
                link(o, reader);
                break;
            }
        }
    }
}

// --fused off: the optimizer updates one trainable tensor after the other (its range in the
// shard, from the shard's start), its temporaries as large as the largest.
void plan_eager_optimizer(GraphPlan& plan, const OptimizerConfig& optimizer) {
    if (plan.fused) return;
    const ShardRange shard = plan.optimizer_shard;
    int64_t largest = 0;
    for (int p : in_store_order(plan)) {
        if (!plan.model.params[static_cast<size_t>(p)].trainable) continue;
        const ShardRange part = overlap(plan.param_range(p), shard);
        if (part.size() == 0) continue;
        plan.optimizer_tensors.push_back({part.begin - shard.begin, part.end - shard.begin});
        largest = std::max(largest, part.size());
    }
    plan.optimizer_scratch_floats = eager_optimizer_scratch_floats(optimizer, largest);
}

// Checkpointing: a tensor made and read only inside one segment is dropped after the forward
// and rebuilt before that segment's backward; tensors crossing segments are kept. A tensor
// computed in place in another's storage follows that storage.
void assign_recompute_slots(GraphPlan& plan, const Uses& uses) {
    const ModelDesc& m = plan.model;
    plan.tensor_slot.assign(m.tensors.size(), -1);
    if (!plan.checkpointing) return;
    std::vector<int> next_slot_of_segment;
    for (size_t t = 0; t < m.tensors.size(); ++t) {
        if (plan.tensor_alias[t] >= 0) continue;
        const int producer = uses.producer[t];
        if (producer < 0) continue;
        const int segment = m.ops[static_cast<size_t>(producer)].segment;
        if (segment < 0) continue;
        bool internal = !uses.consumers[t].empty();
        for (size_t u = 0; u < m.tensors.size(); ++u) {
            if (u != t && plan.tensor_alias[u] != static_cast<int>(t)) continue;
            for (const auto& [op, k] : uses.consumers[u]) internal = internal && m.ops[static_cast<size_t>(op)].segment == segment;
        }
        if (!internal) continue;
        if (next_slot_of_segment.size() <= static_cast<size_t>(segment)) next_slot_of_segment.resize(static_cast<size_t>(segment) + 1, 0);
        const int slot = next_slot_of_segment[static_cast<size_t>(segment)]++;
        if (plan.slot_elements.size() <= static_cast<size_t>(slot)) {
            plan.slot_elements.resize(static_cast<size_t>(slot) + 1, 0);
            plan.slot_bytes.resize(static_cast<size_t>(slot) + 1, 0);
        }
        plan.slot_elements[static_cast<size_t>(slot)] = std::max(plan.slot_elements[static_cast<size_t>(slot)], plan.tensor_elements[t]);
        plan.slot_bytes[static_cast<size_t>(slot)] =
            std::max(plan.slot_bytes[static_cast<size_t>(slot)], plan.tensor_elements[t] * plan.element_bytes(static_cast<int>(t)));
        plan.tensor_slot[t] = slot;
        plan.last_segment = std::max(plan.last_segment, segment);
        if (plan.segment_uses_slots.size() <= static_cast<size_t>(segment))
            plan.segment_uses_slots.resize(static_cast<size_t>(segment) + 1, 0);
        plan.segment_uses_slots[static_cast<size_t>(segment)] = 1;
    }
    for (size_t t = 0; t < m.tensors.size(); ++t)
        if (plan.tensor_alias[t] >= 0) plan.tensor_slot[t] = plan.tensor_slot[static_cast<size_t>(plan.tensor_alias[t])];
}

// A buffer that lives over steps [start, end] of the backward pass (step b runs op n-1-b).
struct Lifetime {
    int start = 1 << 30, end = -1;
    int64_t floats = 0;
    int64_t offset = -1;
};

// First-fit offsets in one block, in order of first use: each buffer takes the lowest offset
// that overlaps no placed buffer whose lifetime overlaps its own. Returns the block's floats.
int64_t place_first_fit(std::vector<Lifetime>& lifetimes) {
    std::vector<size_t> order;
    for (size_t g = 0; g < lifetimes.size(); ++g)
        if (lifetimes[g].end >= 0) order.push_back(g);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return lifetimes[a].start < lifetimes[b].start; });
    std::vector<size_t> placed;
    int64_t block = 0;
    for (size_t g : order) {
        Lifetime& iv = lifetimes[g];
        std::vector<std::pair<int64_t, int64_t>> busy;
        for (size_t p : placed) {
            const Lifetime& other = lifetimes[p];
            if (other.end < iv.start || iv.end < other.start) continue;
            busy.push_back({other.offset, other.offset + other.floats});
        }
        std::sort(busy.begin(), busy.end());
        int64_t offset = 0;
        for (const auto& [begin, end] : busy) {
            if (offset + iv.floats <= begin) break;
            offset = std::max(offset, end);
        }
        iv.offset = offset;
        block = std::max(block, offset + iv.floats);
        placed.push_back(g);
    }
    return block;
}

// Lifetimes of activation gradients over the backward pass, placed first fit in one block. An
// activation's input gradient is its output gradient scaled in place, so the two share a buffer.
void assign_gradient_offsets(GraphPlan& plan, const Uses& uses, const std::vector<bool>& requires_grad) {
    const ModelDesc& m = plan.model;
    const int n_ops = static_cast<int>(m.ops.size());
    const size_t n = m.tensors.size();
    std::vector<int> group(n);
    std::iota(group.begin(), group.end(), 0);
    std::vector<bool> needed(n, false);
    // A result's gradient (not an op's saved statistics); a pipeline stage's input too, sent back.
    for (size_t t = 0; t < n; ++t)
        needed[t] = requires_grad[t] && !uses.consumers[t].empty() &&
                    (uses.producer[t] >= 0 ? m.ops[static_cast<size_t>(uses.producer[t])].outputs[0] == static_cast<int>(t)
                                           : t == 0 && m.input_gradient);
    for (const OpDesc& op : m.ops)
        if (op.kind == OpKind::activation && needed[static_cast<size_t>(op.inputs[0])])
            group[static_cast<size_t>(op.inputs[0])] = group[static_cast<size_t>(op.outputs[0])];
    std::vector<Lifetime> intervals(n);
    for (size_t t = 0; t < n; ++t) {
        if (!needed[t]) continue;
        Lifetime& iv = intervals[static_cast<size_t>(group[t])];
        for (const auto& [op, k] : uses.consumers[t]) iv.start = std::min(iv.start, n_ops - 1 - op);
        iv.end = std::max(iv.end, n_ops - 1 - uses.producer[t]);
        iv.floats = std::max(iv.floats, align(plan.tensor_elements[t]));
    }
    plan.grad_floats = place_first_fit(intervals);
    plan.grad_offset.assign(n, -1);
    for (size_t t = 0; t < n; ++t)
        if (needed[t]) plan.grad_offset[t] = intervals[static_cast<size_t>(group[t])].offset;
}

// ZeRO-2's gradient buckets (GraphPlan::gradient_buckets): a parameter's gradient is first
// written by the backward of its last reader in the forward and complete after that of its
// first; the parameters an op completes form one bucket, live from its first write to its
// reduce-scatter right after that op.
void assign_gradient_buckets(GraphPlan& plan, const Uses& uses, int shard_count) {
    const ModelDesc& m = plan.model;
    const int n_ops = static_cast<int>(m.ops.size());
    const std::vector<int> params_in_store_order = in_store_order(plan);
    plan.op_bucket.assign(m.ops.size(), -1);
    std::vector<Lifetime> lifetimes;
    for (int o = n_ops - 1; o >= 0; --o) {  // the backward's order
        GraphPlan::GradientBucket bucket;
        bucket.op = o;
        Lifetime life;
        life.end = n_ops - 1 - o;
        for (int p : params_in_store_order) {
            if (!m.params[static_cast<size_t>(p)].trainable || uses.first_param_reader[static_cast<size_t>(p)] != o) continue;
            bucket.params.push_back(p);
            bucket.floats += m.params[static_cast<size_t>(p)].numel();
            life.start = std::min(life.start, n_ops - 1 - uses.last_param_reader[static_cast<size_t>(p)]);
        }
        if (bucket.params.empty()) continue;
        for (int r = 0; r < shard_count; ++r) {
            const ShardRange shard = shard_of(plan.params.trainable_end, r, shard_count);
            int64_t in_shard = 0;
            for (int p : bucket.params) in_shard += overlap(plan.param_range(p), shard).size();
            bucket.counts.push_back(in_shard);
        }
        life.floats = align(bucket.floats);
        plan.op_bucket[static_cast<size_t>(o)] = static_cast<int>(plan.gradient_buckets.size());
        plan.gradient_buckets.push_back(std::move(bucket));
        lifetimes.push_back(life);
    }
    plan.bucket_floats = place_first_fit(lifetimes);
    plan.param_bucket_offset.assign(m.params.size(), -1);
    for (size_t b = 0; b < plan.gradient_buckets.size(); ++b) {
        GraphPlan::GradientBucket& bucket = plan.gradient_buckets[b];
        bucket.offset = lifetimes[b].offset;
        int64_t next = bucket.offset;
        for (int p : bucket.params) {
            plan.param_bucket_offset[static_cast<size_t>(p)] = next;
            next += m.params[static_cast<size_t>(p)].numel();
        }
    }
}

// The first writer of a gradient in the backward pass (the last reader in the forward)
// overwrites it; the others add to it. Parameters: the same within an update's first micro-batch.
void assign_write_modes(GraphPlan& plan, const Uses& uses) {
    const ModelDesc& m = plan.model;
    plan.input_write.resize(m.ops.size());
    plan.first_param_write.resize(m.ops.size());
    for (size_t o = 0; o < m.ops.size(); ++o) {
        const OpDesc& op = m.ops[o];
        for (int t : op.inputs) {
            int last = -1;
            for (const auto& [reader, k] : uses.consumers[static_cast<size_t>(t)]) last = std::max(last, reader);
            plan.input_write[o].push_back(last == static_cast<int>(o) ? GradientWrite::overwrite : GradientWrite::accumulate);
            // Kernels that write an input gradient with a product overwrite it; such an input
            // must have no other reader.
            if ((op.kind == OpKind::linear || op.kind == OpKind::lora_linear || op.kind == OpKind::attention ||
                 op.kind == OpKind::activation || op.kind == OpKind::conv2d) &&
                uses.consumers[static_cast<size_t>(t)].size() > 1)
                throw std::logic_error("planner: the input of a linear, convolution, attention or activation op has several readers");
        }
        for (int p : op.params)
            plan.first_param_write[o].push_back(uses.last_param_reader[static_cast<size_t>(p)] == static_cast<int>(o)
                                                    ? GradientWrite::overwrite
                                                    : GradientWrite::accumulate);
    }
}

void plan_kernels(GraphPlan& plan, const std::vector<bool>& requires_grad) {
    const ModelDesc& m = plan.model;
    plan.packed.resize(m.ops.size());
    auto take = [&plan](int64_t floats) {
        const int64_t offset = plan.packed_floats;
        plan.packed_floats += align(floats);
        return offset;
    };
    for (size_t o = 0; o < m.ops.size(); ++o) {
        const OpDesc& op = m.ops[o];
        switch (op.kind) {
            case OpKind::linear:
            case OpKind::lora_linear:
            case OpKind::conv2d: {
                // A convolution's products are a Linear layer's over its rows of receptive fields.
                const auto& shape = m.params[static_cast<size_t>(op.params[0])].shape;
                const int64_t out = shape[0], in = m.params[static_cast<size_t>(op.params[0])].numel() / out;
                // DoRA's backward keeps the scaled output gradient (and in 16-bit runs its widened
                // unscaled result) at the start of the scratch, before what the products and the
                // adapter's backward use; its forward computes the norms, then (16-bit runs) the
                // unscaled result, in the scratch.
                int64_t dora_prefix = 0;
                if (op.kind == OpKind::lora_linear) {
                    const int64_t rank = m.params[static_cast<size_t>(op.params[2])].shape[0];
                    const int64_t rows = plan.micro_batch * op.rows_per_sample;
                    if (has_dora_magnitude(op)) {
                        dora_prefix = align(rows * out) * (plan.sixteen_bit() ? 2 : 1);
                        plan.packed[o].dora_unscaled_offset = align(rows * out);
                        plan.packed[o].dora_scratch_prefix = dora_prefix;
                        plan.packed[o].dora_norm_offset = plan.dora_norm_floats;
                        plan.dora_norm_floats += align(out);
                        plan.scratch_floats = std::max({plan.scratch_floats, dora_norm_scratch_floats(in, plan.threads),
                                                        plan.sixteen_bit() ? rows * out : 0});
                    }
                    plan.scratch_floats = std::max(plan.scratch_floats, dora_prefix + lora_backward_scratch_floats(rows, rank));
                }
                const bool nf4 = m.params[static_cast<size_t>(op.params[0])].nf4;
                if (nf4) {
                    plan.packed[o].nf4 = true;
                    const int64_t bytes = plan.products == ProductKernel::onednn_bf16 ? 2 : 4;
                    plan.nf4_tile_bytes = std::max(plan.nf4_tile_bytes, align(in * out) * bytes);
                }
                if (op.kind != OpKind::conv2d && plan.products != ProductKernel::eigen) {
                    PackedLinear& p = plan.packed[o];
                    p.onednn = true;
                    p.input_grad = requires_grad[static_cast<size_t>(op.inputs[0])];
                    const bool bias = op.params.size() > 1;
                    if (plan.sixteen_bit() && plan.products == ProductKernel::onednn_f32 && !nf4)
                        p.widened_weight_offset = take(in * out);
                    if (plan.sixteen_bit() && bias) p.widened_bias_offset = take(out);
                    const MatmulOperands operands =
                        plan.products == ProductKernel::onednn_bf16 ? MatmulOperands::bf16 : MatmulOperands::f32;
                    plan.scratch_floats = std::max(plan.scratch_floats,
                                                   dora_prefix + onednn_linear_scratch_floats(operands, in, out,
                                                                                              plan.micro_batch * op.rows_per_sample,
                                                                                              plan.threads));
                    for (int64_t n : plan.sample_counts) {
                        plan.onednn_scratchpad_bytes =
                            std::max(plan.onednn_scratchpad_bytes,
                                     onednn_linear_scratchpad_bytes(operands, in, out, plan.rows(op, n), bias,
                                                                    p.input_grad, plan.threads, !plan.widens_input_rows(op)));
                        if (plan.widens_input_rows(op))
                            plan.onednn_scratchpad_bytes = std::max(
                                plan.onednn_scratchpad_bytes,
                                onednn_linear_16bit_rows_scratchpad_bytes(in, out, plan.rows(op, n), bias, plan.threads));
                    }
                    break;
                }
                if (op.kind == OpKind::conv2d)
                    plan.scratch_floats = std::max(plan.scratch_floats, conv2d_scratch_floats(conv_shape(m, op), plan.micro_batch));
                PackedLinear& p = plan.packed[o];
                p.forward = make_packed_layout(PackedOperand::weights, in, out, plan.threads);
                const bool input_grad = requires_grad[static_cast<size_t>(op.inputs[0])];
                if (input_grad) p.transposed = make_packed_layout(PackedOperand::weights_transposed, in, out, plan.threads);
                if (nf4) {  // packed into the tile per product; the bias is read where it is stored
                    plan.nf4_packed_tile_floats = std::max(
                        {plan.nf4_packed_tile_floats, p.forward.total_floats(), input_grad ? p.transposed.total_floats() : 0});
                    break;
                }
                p.forward_offset = take(p.forward.total_floats() + out);
                if (input_grad) p.transposed_offset = take(p.transposed.total_floats());
                break;
            }
            case OpKind::layernorm: {
                const int64_t C = m.params[static_cast<size_t>(op.params[0])].shape[0];
                plan.scratch_floats = std::max(plan.scratch_floats, layernorm_backward_scratch_floats(C));
                break;
            }
            case OpKind::attention: {
                const int64_t T = op.rows_per_sample;
                const int64_t C = m.tensors[static_cast<size_t>(op.outputs[0])].per_sample / T;
                // Eager attention's backward holds the gradient of every pair's att at once; the
                // fused one works a pair at a time, in 16-bit runs on widened copies of its tensors.
                const int64_t floats = !plan.fused                ? attention_eager_scratch_floats(plan.micro_batch, T, op.heads)
                                       : plan.attention_in_onednn() ? attention_onednn_scratch_floats(T, C, op.heads, plan.threads)
                                       : plan.sixteen_bit()         ? attention_16bit_scratch_floats(T, C, op.heads, plan.threads)
                                                                    : attention_scratch_floats(plan.micro_batch, T, C, op.heads, plan.threads);
                plan.scratch_floats = std::max(plan.scratch_floats, floats);
                if (plan.attention_in_onednn())
                    plan.onednn_scratchpad_bytes =
                        std::max(plan.onednn_scratchpad_bytes, attention_onednn_scratchpad_bytes(T, C, op.heads));
                break;
            }
            case OpKind::cross_entropy:
                // Eager: the log-probabilities and their gradient, as log_softmax and nll_loss keep them.
                if (!plan.fused)
                    plan.scratch_floats = std::max(plan.scratch_floats,
                                                   eager_cross_entropy_scratch_floats(m.classes, plan.micro_batch * op.rows_per_sample));
                break;
            case OpKind::activation:
            case OpKind::embedding:
            case OpKind::residual_add:
            case OpKind::max_pool:
            case OpKind::mean_squared_error:
            case OpKind::pipeline_output: break;
        }
    }
}

// 16-bit runs: the fp32 stagings, each as large as the largest tensor that passes through it
// (evaluation widens the loss's input, the logits, into input staging 0).
void plan_staging(GraphPlan& plan) {
    if (!plan.sixteen_bit()) return;
    const ModelDesc& m = plan.model;
    auto widen = [&plan](std::array<int64_t, 2>& staging, size_t k, int t) {
        if (!plan.stored_16bit(t)) return;
        staging.at(k) = std::max(staging.at(k), align(plan.tensor_elements[static_cast<size_t>(t)]));
    };
    for (size_t o = 0; o < m.ops.size(); ++o) {
        const OpDesc& op = m.ops[o];
        // Fused attention reads and writes its 16-bit tensors itself (nn/attention.hpp, and on
        // CUDA on the tensor cores); bf16 products read their 16-bit input, and without an
        // epilogue after them write their 16-bit output.
        const bool own_io = op.kind == OpKind::attention && plan.fused;
        const bool bf16_product = op.kind == OpKind::linear && plan.products == ProductKernel::onednn_bf16;
        if (!own_io && !bf16_product)
            for (size_t k = 0; k < op.inputs.size(); ++k) widen(plan.input_staging_floats, k, op.inputs[k]);
        if (!own_io && !(bf16_product && plan.fused_with[o] < 0))
            for (size_t k = 0; k < std::min<size_t>(op.outputs.size(), 2); ++k) widen(plan.output_staging_floats, k, op.outputs[k]);
        // A fused pair computes the second op's result in output staging 1 (an in-place
        // activation works in its product's output), except a linear op's epilogue, which
        // stores its activation's 16-bit codes itself (ProductEpilogue::activated_codes).
        const int with = plan.fused_with[o];
        if (with >= 0 && op.kind != OpKind::linear) {
            const int t = m.ops[static_cast<size_t>(with)].outputs[0];
            if (plan.tensor_alias[static_cast<size_t>(t)] < 0) widen(plan.output_staging_floats, 1, t);
        }
        // The products' weights (W, then b, then a LoRA layer's A and B, one after the other), and
        // the frozen weights LayerNorm and the embedding read, which only the 16-bit copy holds.
        const bool widened_weights = (op.kind == OpKind::linear && plan.products == ProductKernel::eigen) ||
                                     op.kind == OpKind::lora_linear || op.kind == OpKind::conv2d ||
                                     ((op.kind == OpKind::layernorm || op.kind == OpKind::embedding) &&
                                      !m.params[static_cast<size_t>(op.params[0])].trainable);
        if (!widened_weights) continue;
        int64_t weights = 0;
        for (int p : op.params) weights += plan.staged_floats(p);
        plan.weight_staging_floats = std::max(plan.weight_staging_floats, weights);
    }
}

}  // namespace

GraphPlan make_graph_plan(const ModelDesc& model, int64_t micro_batch, const PlanOptions& options) {
    GraphPlan plan;
    plan.model = model;
    plan.params = make_param_layout(model);
    plan.micro_batch = micro_batch;
    plan.sample_counts = {micro_batch};
    for (int64_t n : options.sample_counts)
        if (n >= 1 && n < micro_batch) plan.sample_counts.push_back(n);
    std::sort(plan.sample_counts.begin(), plan.sample_counts.end());
    plan.sample_counts.erase(std::unique(plan.sample_counts.begin(), plan.sample_counts.end()), plan.sample_counts.end());
    plan.threads = options.threads;
    plan.optimizer_slots = optimizer_state_slots(options.optimizer);
    plan.optimizer_shard = shard_of(plan.params.trainable_end, options.shard_rank, options.shard_count);
    plan.checkpointing = options.checkpointing;
    plan.precision = options.precision;
    plan.fused = options.fused;
    plan.products = options.products;
    for (const TensorDesc& t : model.tensors) plan.tensor_elements.push_back(t.per_sample * micro_batch);
    check_frozen_params(model);
    const Uses uses = find_uses(model);
    const std::vector<bool> requires_grad = find_requires_grad(model);
    assign_in_place_outputs(plan, uses);
    assign_fusions(plan, uses);
    assign_recompute_slots(plan, uses);
    assign_gradient_offsets(plan, uses, requires_grad);
    assign_write_modes(plan, uses);
    if (options.shard_gradients && options.shard_count > 1) assign_gradient_buckets(plan, uses, options.shard_count);
    plan_kernels(plan, requires_grad);
    plan_staging(plan);
    plan_eager_optimizer(plan, options.optimizer);
    if (model.token_input) plan.token_elements = model.input_per_sample * micro_batch;

    const int64_t p = plan.params.count;
    auto add = [&plan](MemoryCategory c, int64_t bytes, BufferRole role, int index = 0) {
        plan.buffers.push_back({c, bytes, role, index});
    };
    using R = BufferRole;
    using C = MemoryCategory;
    if (plan.sixteen_bit()) {
        add(C::master_weights, plan.fp32_weight_floats() * 4, R::weights);
        add(C::parameters, p * 2, R::working_weights);
    } else {
        add(C::parameters, p * 4, R::weights);
    }
    if (plan.params.nf4_bytes > 0) add(C::parameters, plan.params.nf4_bytes, R::nf4_store);
    add(C::gradients, plan.gradient_floats() * 4, R::gradients);
    if (plan.optimizer_slots > 0)
        add(C::optimizer_state, plan.optimizer_shard.size() * 4 * plan.optimizer_slots, R::optimizer_state);
    if (plan.optimizer_scratch_floats > 0) add(C::workspace, plan.optimizer_scratch_floats * 4, R::optimizer_scratch);
    add(C::workspace, plan.packed_floats * 4, R::packed_weights);
    if (plan.nf4_tile_bytes > 0) add(C::workspace, plan.nf4_tile_bytes, R::nf4_tile);
    if (plan.nf4_packed_tile_floats > 0) add(C::workspace, plan.nf4_packed_tile_floats * 4, R::nf4_packed_tile);
    if (plan.dora_norm_floats > 0) add(C::workspace, plan.dora_norm_floats * 4, R::dora_norms);
    if (plan.onednn_scratchpad_bytes > 0)
        add(C::workspace, plan.threads * plan.onednn_scratchpad_bytes, R::onednn_scratchpads);
    // A pipeline stage's messages, fp32: the input it receives and the gradient it sends back;
    // the output it sends and the gradient it receives for it. Sends and receives have buffers of
    // their own, so that a send can be on its way while the next message arrives.
    if (model.input_gradient) {
        plan.stage_input_floats = model.input_per_sample * micro_batch;
        add(C::workspace, plan.stage_input_floats * 4, R::stage_input);
        add(C::workspace, plan.stage_input_floats * 4, R::stage_input_gradient);
    }
    if (!model.ops.empty() && model.ops.back().kind == OpKind::pipeline_output) {
        plan.stage_output_floats = plan.tensor_elements[static_cast<size_t>(model.ops.back().inputs[0])];
        add(C::workspace, plan.stage_output_floats * 4, R::stage_output);
        add(C::workspace, plan.stage_output_floats * 4, R::stage_output_gradient);
    }
    plan.first_step_buffer = plan.buffers.size();
    plan.in_flight = std::max(1, options.in_flight);
    plan.keeps_loss_gradient = model.input_gradient && plan.in_flight > 1 && model.ops.back().kind != OpKind::pipeline_output;
    for (int set = 0; set < plan.in_flight; ++set) {
        if (model.token_input) add(C::activations, plan.token_elements * 4 * 2, R::tokens);  // inputs and targets
        for (size_t t = 0; t < model.tensors.size(); ++t)
            if (plan.tensor_slot[t] < 0 && plan.tensor_alias[t] < 0)
                add(C::activations, plan.tensor_elements[t] * plan.element_bytes(static_cast<int>(t)), R::tensor,
                    static_cast<int>(t));
        if (plan.keeps_loss_gradient)
            add(C::activations, plan.tensor_elements[static_cast<size_t>(model.ops.back().inputs[0])] * 4, R::loss_gradient);
        if (set == 0) plan.kept_buffers = plan.buffers.size() - plan.first_step_buffer;
    }
    plan.first_pass_buffer = plan.buffers.size();
    for (size_t slot = 0; slot < plan.slot_bytes.size(); ++slot)
        add(C::activations, plan.slot_bytes[slot], R::recompute_slot, static_cast<int>(slot));
    add(C::workspace, plan.grad_floats * 4, R::activation_gradients);
    if (plan.reduces_in_backward()) add(C::gradients, plan.bucket_floats * 4, R::gradient_buckets);
    add(C::workspace, plan.scratch_floats * 4, R::kernel_scratch);
    if (plan.sixteen_bit()) {
        for (int k = 0; k < 2; ++k) add(C::workspace, plan.input_staging_floats[static_cast<size_t>(k)] * 4, R::input_staging, k);
        for (int k = 0; k < 2; ++k) add(C::workspace, plan.output_staging_floats[static_cast<size_t>(k)] * 4, R::output_staging, k);
        add(C::workspace, plan.weight_staging_floats * 4, R::weight_staging);
    }
    return plan;
}

ProductKernel choose_product_kernel(CpuProducts requested, Precision precision) {
    switch (requested) {
        case CpuProducts::eigen: return ProductKernel::eigen;
        case CpuProducts::onednn:
            return precision == Precision::bf16 && onednn_has_native_bf16() ? ProductKernel::onednn_bf16
                                                                             : ProductKernel::onednn_f32;
        case CpuProducts::automatic: break;
    }
    // Measured (docs/ARCHITECTURE.md, "Products on the CPU"): oneDNN's bf16 kernels beat every
    // fp32 product only where the CPU multiplies bf16 natively; its fp32 kernels beat Eigen's
    // on AVX-512 and on AVX2 (an AVX2-only Zen 3: 1.5x Eigen's peak, every update 0.70-0.77 of
    // Eigen's time). Below AVX2 Eigen stays.
    if (precision == Precision::bf16 && onednn_has_native_bf16()) return ProductKernel::onednn_bf16;
    if (onednn_has_avx2()) return ProductKernel::onednn_f32;
    return ProductKernel::eigen;
}

std::string describe(ProductKernel kernel) {
    switch (kernel) {
        case ProductKernel::eigen: return "Eigen fp32";
        case ProductKernel::onednn_f32: return std::string("oneDNN fp32 (") + onednn_isa_name(false) + ")";
        case ProductKernel::onednn_bf16: return std::string("oneDNN bf16 (") + onednn_isa_name(true) + ")";
    }
    return "";
}

ConvShape conv_shape(const ModelDesc& model, const OpDesc& op) {
    const auto& weight = model.params[static_cast<size_t>(op.params[0])].shape;
    return ConvShape{.in_channels = weight[1], .out_channels = weight[0], .height = op.height, .width = op.width,
                     .kernel = weight[2]};
}

bool GraphPlan::attention_in_storage(const OpDesc& op) const {
    return fused && sixteen_bit() && stored_16bit(op.inputs[0]) && stored_16bit(op.outputs[0]) &&
           stored_16bit(op.outputs[1]);
}

bool GraphPlan::hands_dy_codes(int a, int64_t samples) const {
    if (products != ProductKernel::onednn_bf16 || a < 1 || a >= static_cast<int>(model.ops.size())) return false;
    const OpDesc& op = model.ops[static_cast<size_t>(a)];
    const int o = a - 1;
    const OpDesc& product = model.ops[static_cast<size_t>(o)];
    if (product.kind != OpKind::linear || !packed[static_cast<size_t>(o)].onednn || op.inputs.empty() ||
        product.outputs[0] != op.inputs[0] || product.segment != op.segment)
        return false;
    const ParamDesc& weight = model.params[static_cast<size_t>(product.params[0])];
    if (!onednn_linear_takes_dy_codes(weight.shape[1], weight.shape[0], rows(product, samples), weight.trainable,
                                      grad_offset[static_cast<size_t>(product.inputs[0])] >= 0, threads))
        return false;
    if (op.kind == OpKind::activation)
        return stored_16bit(activation_saved_tensor(op));
    return op.kind == OpKind::attention && attention_in_storage(op) && attention_in_onednn();
}

BytesByCategory GraphPlan::planned_bytes() const {
    BytesByCategory bytes{};
    for (const PlannedBuffer& b : buffers) bytes[static_cast<size_t>(b.category)] += TrackingArena::rounded_size(b.bytes);
    return bytes;
}

std::vector<WidenedTrainableParam> widened_trainable_params(const GraphPlan& plan) {
    std::vector<WidenedTrainableParam> widened;
    for (size_t o = 0; o < plan.model.ops.size(); ++o) {
        const OpDesc& op = plan.model.ops[o];
        const PackedLinear& p = plan.packed[o];
        if (!p.onednn) continue;
        auto add = [&](size_t k, int64_t offset) {
            if (offset < 0) return;  // none (a linear op without a bias has no params[1])
            const int param = op.params[k];
            if (plan.model.params[static_cast<size_t>(param)].trainable) widened.push_back({param, offset});
        };
        add(0, p.widened_weight_offset);
        add(1, p.widened_bias_offset);
    }
    std::sort(widened.begin(), widened.end(), [&](const WidenedTrainableParam& a, const WidenedTrainableParam& b) {
        return plan.params.offset[static_cast<size_t>(a.param)] < plan.params.offset[static_cast<size_t>(b.param)];
    });
    return widened;
}

int rebuilt_segments(const GraphPlan& plan) {
    std::set<int> segments;
    for (const OpDesc& op : plan.model.ops)
        if (plan.rebuilt_in_backward(op.segment)) segments.insert(op.segment);
    return static_cast<int>(segments.size());
}

}  // namespace trainbench
