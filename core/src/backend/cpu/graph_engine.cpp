// The CPU backend: the executor (exec/plan_executor.hpp) walks the plan; this file gives it the
// op kernels (one switch over op kinds for the forward, one for the backward), host memory, the
// loss, the optimizer step, ZeRO's collectives (exec/zero_sharding.hpp) and pipeline stages.
// Persistent state (parameters, gradients, optimizer state, packed weights) is allocated once;
// the buffers of a micro-batch are taken from the TrackingArena when it starts and given back
// when it ends, as a framework's caching allocator does, so they show up as activations during
// the step and as cache between steps, and the steady state reuses the same blocks without
// touching the system allocator.
//
// The linear ops' products run in Eigen on packed weights or in oneDNN on the weights as stored
// (GraphPlan::products, --cpu-products; nn/onednn_linear.hpp); convolutions in Eigen.
//
// Mixed precision (exec/mixed_precision.cpp has its rounding points): the kernels that read and
// write 16-bit storage themselves here are oneDNN's bf16 products, the fused attention, LayerNorm
// and the residual + LayerNorm pair; LayerNorm and the embedding read the fp32 master weights, as
// torch's autocast leaves those ops in fp32. tests/core/test_mlp_goldens.cpp pins an MLP's
// weights at these rounding points, bit for bit (with Eigen's products).
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/compute_engine.hpp"
#include "exec/buffer_bindings.hpp"
#include "exec/plan_executor.hpp"
#include "exec/zero_sharding.hpp"
#include "memory/tracking_arena.hpp"
#include "model/param_layout.hpp"
#include "nn/activation.hpp"
#include "nn/attention.hpp"
#include "nn/conv2d.hpp"
#include "nn/dora.hpp"
#include "nn/embedding.hpp"
#include "nn/layernorm.hpp"
#include "nn/linear.hpp"
#include "nn/lora.hpp"
#include "nn/loss.hpp"
#include "nn/max_pool.hpp"
#include "nn/onednn_linear.hpp"
#include "nn/packed_weights.hpp"
#include "optim/gradient_norm.hpp"
#include "optim/optimizer_state_tensors.hpp"
#include "optim/optimizer_step.hpp"
#include "parallel/collective_timer.hpp"
#include "parallel/parallel_range.hpp"
#include "parallel/process_group.hpp"
#include "parallel/shard_range.hpp"
#include "parallel/worker_team.hpp"
#include "plan/graph_plan.hpp"
#include "plan/memory_traffic.hpp"
#include "precision/half_float.hpp"
#include "precision/nf4.hpp"
#include "trainbench/error.hpp"

namespace trainbench {
namespace {

GraphPlan plan_for(const EngineSpec& spec) {
    const bool sharded = spec.zero_stage > 0;
    return make_graph_plan(spec.model, std::max(spec.max_micro_batch, spec.max_eval_batch),
                           {.threads = WorkerTeam::resolved_size(spec.threads),
                            .optimizer = spec.optimizer,
                            .checkpointing = spec.gradient_checkpointing,
                            .precision = spec.precision,
                            .fused = spec.fused,
                            .products = choose_product_kernel(spec.cpu_products, spec.precision),
                            .shard_rank = sharded ? spec.shard_rank : 0,
                            .shard_count = sharded ? spec.shard_count : 1,
                            .shard_gradients = spec.zero_stage >= 2,
                            .sample_counts = spec.sample_counts,
                            .in_flight = spec.pipeline_in_flight});
}

class GraphEngine final : public PlanExecutor {
public:
    explicit GraphEngine(const EngineSpec& spec)
        : PlanExecutor(plan_for(spec)), spec_(spec), arena_(spec.memory_limit_bytes) {
        if (sharded() && (zero_group().size() != spec.shard_count || zero_group().rank() != spec.shard_rank))
            throw Error("internal: a ZeRO shard planned for process " + std::to_string(spec.shard_rank) + " of " +
                        std::to_string(spec.shard_count) + " in process " + std::to_string(zero_group().rank()) +
                        " of " + std::to_string(zero_group().size()));
        WorkerTeam::shared().resize(plan_.threads);
        // The persistent buffers.
        for (size_t i = 0; i < plan_.first_step_buffer; ++i)
            buffers_.bind(plan_.buffers[i], arena_.acquire(plan_.buffers[i].category, plan_.buffers[i].bytes));
        if (plan_.optimizer_slots > 0) optimizer_init_state(spec.optimizer, buffers_.optimizer_state, plan_.optimizer_shard.size());
        if (plan_.products != ProductKernel::eigen) {
            onednn_ = std::make_unique<OnednnProducts>(plan_.threads, buffers_.onednn_scratchpads, plan_.onednn_scratchpad_bytes);
            prepare_products();
        }
        std::fill(buffers_.gradients, buffers_.gradients + plan_.gradient_floats(), 0.0f);
        kept_sets_.resize(static_cast<size_t>(plan_.in_flight));
        for (auto& set : kept_sets_) set.reserve(plan_.kept_buffers);
        evaluation_set_.reserve(plan_.kept_buffers);
        set_samples_.assign(static_cast<size_t>(plan_.in_flight), 0);
        pass_buffers_.reserve(plan_.buffers.size());
        widened_parameters_ = widened_parameters();
    }

    void set_weights(const ModelWeights& weights) override {
        packed_stale_ = true;
        frozen_packed_ = false;
        widened_in_update_ = false;
        if (!keeps_frozen_16bit()) {
            scatter_weights(plan_.model, plan_.params, weights, buffers_.weights, buffers_.nf4_store);
            round_working_weights();
            return;
        }
        // Frozen weights go to the 16-bit copy only.
        std::vector<float> all(static_cast<size_t>(plan_.params.count));
        scatter_weights(plan_.model, plan_.params, weights, all.data(), buffers_.nf4_store);
        std::copy(all.begin(), all.begin() + plan_.params.trainable_end, buffers_.weights);
        store_16bit(plan_.precision, all.data(), buffers_.working_weights, plan_.params.count);
    }
    ModelWeights weights() const override {
        if (!keeps_frozen_16bit()) return gather_weights(plan_.model, plan_.params, buffers_.weights, buffers_.nf4_store);
        std::vector<float> all(static_cast<size_t>(plan_.params.count));
        std::copy(buffers_.weights, buffers_.weights + plan_.params.trainable_end, all.begin());
        const int64_t frozen = plan_.params.count - plan_.params.trainable_end;
        load_16bit(plan_.precision, buffers_.working_weights + plan_.params.trainable_end, all.data() + plan_.params.trainable_end, frozen);
        return gather_weights(plan_.model, plan_.params, all.data(), buffers_.nf4_store);
    }
    // QLoRA: each NF4 tensor's storage, a byte per value, for a checkpoint to restore the same
    // bits: quantizing the dequantized values again would not (the offset is a mean that moves).
    std::vector<NamedTensor> quantized_weights() const override {
        std::vector<NamedTensor> out;
        for (size_t p = 0; p < plan_.model.params.size(); ++p) {
            const int64_t offset = plan_.params.nf4_offset[p];
            if (offset < 0) continue;
            const int64_t bytes = nf4_sizes(plan_.model.params[p].numel()).total_bytes();
            out.push_back({kNf4StoragePrefix + plan_.model.params[p].name, {bytes},
                           std::vector<float>(buffers_.nf4_store + offset, buffers_.nf4_store + offset + bytes)});
        }
        return out;
    }
    void set_quantized_weights(const std::vector<NamedTensor>& tensors) override {
        for (size_t p = 0; p < plan_.model.params.size(); ++p) {
            const int64_t offset = plan_.params.nf4_offset[p];
            if (offset < 0) continue;
            const std::string name = kNf4StoragePrefix + plan_.model.params[p].name;
            const int64_t bytes = nf4_sizes(plan_.model.params[p].numel()).total_bytes();
            auto t = std::find_if(tensors.begin(), tensors.end(), [&](const NamedTensor& n) { return n.name == name; });
            if (t == tensors.end() || static_cast<int64_t>(t->data.size()) != bytes)
                throw Error("no NF4 storage '" + name + "' of " + std::to_string(bytes) + " bytes: the file was not "
                            "written by a run with this model and --lora-base nf4");
            for (int64_t i = 0; i < bytes; ++i) {
                const float v = t->data[static_cast<size_t>(i)];
                if (!(v >= 0.0f && v <= 255.0f) || v != std::floor(v))
                    throw Error("NF4 storage '" + name + "' holds " + std::to_string(v) + ", not a byte: the file is damaged");
                buffers_.nf4_store[offset + i] = static_cast<uint8_t>(v);
            }
        }
    }
    // With ZeRO-2's buckets each process holds its shard of the sum: all of them call this
    // together to gather it whole.
    ModelWeights gradients() const override {
        if (grads_stale_) throw Error("gradients read after zero_grad() without a micro-batch");
        if (!plan_.reduces_in_backward()) return gather_trainable(plan_.model, plan_.params, buffers_.gradients);
        std::vector<float> whole(static_cast<size_t>(plan_.params.trainable_end));
        gather_shards(buffers_.gradients, plan_.optimizer_shard, whole.data(), plan_.params.trainable_end, zero_group());
        return gather_trainable(plan_.model, plan_.params, whole.data());
    }

    void sum_gradient_of(const std::string& name, ProcessGroup& holders) override {
        const ShardRange range = trainable_range(name);
        materialise_zero_grad();
        if (!plan_.reduces_in_backward()) {
            holders.sum(buffers_.gradients + range.begin, range.size());
            return;
        }
        // ZeRO-2: the copies' shards tile the tensor once per stage, so the sum is both stages' whole.
        with_bucket_block([&] { sum_sharded_gradient(plan_, range, buffers_.gradient_buckets, buffers_.gradients, holders); });
    }

    double gradient_norm_squared_of(const std::string& name) override {
        const ShardRange range = trainable_range(name);
        materialise_zero_grad();
        if (!plan_.reduces_in_backward()) return gradient_norm_squared(buffers_.gradients + range.begin, range.size());
        return sharded_gradient_norm_squared(plan_, range, buffers_.gradients, zero_group());
    }

    double forward_backward(const MicroBatch& batch, double normaliser, double loss_scale) override {
        begin_gradient_pass();
        const auto start = std::chrono::steady_clock::now();
        begin_micro_batch(batch);
        forward(batch.count);
        const double loss = loss_forward(batch, static_cast<float>(loss_scale / normaliser));
        last_forward_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        backward(batch.count, plan_.last_segment);
        end_gradient_pass();
        send_input_gradient(batch.count);
        end_micro_batch();
        return loss;
    }

    double last_forward_ms() const override { return last_forward_ms_; }
    float* stage_input() override { return buffers_.stage_input; }
    float* stage_input_gradient() override { return buffers_.stage_input_gradient; }
    float* stage_output() override { return buffers_.stage_output; }
    float* stage_output_gradient() override { return buffers_.stage_output_gradient; }

    double stage_forward(const MicroBatch& batch, int slot, double normaliser, double loss_scale) override {
        const OpDesc& last = plan_.model.ops.back();
        const bool sends = last.kind == OpKind::pipeline_output;
        if (!sends && !plan_.keeps_loss_gradient)
            throw Error("internal: stage_forward on a model that is not a pipeline stage");
        const bool keep = slot >= 0;
        if (slot >= plan_.in_flight || (keep && !kept_sets_[static_cast<size_t>(slot)].empty()) || (!keep && !sends))
            throw Error("internal: pipeline slot " + std::to_string(slot) + " of " + std::to_string(plan_.in_flight) +
                        " is not free");
        std::vector<void*>& kept = keep ? kept_sets_[static_cast<size_t>(slot)] : evaluation_set_;
        begin_micro_batch(batch, keep ? slot : 0, kept);
        forward(batch.count);
        double loss = 0.0;
        const int in = last.inputs[0];
        const auto floats = static_cast<size_t>(elements(in, batch.count));
        if (sends) {
            const float* values = read(in, batch.count, buffers_.stage_output);
            if (values != buffers_.stage_output) std::memcpy(buffers_.stage_output, values, floats * sizeof(float));
        } else {
            // The last stage under GPipe: the loss's gradient waits for the backward beside the
            // micro-batch's activations, as torch keeps its log-probabilities.
            loss = loss_forward(batch, static_cast<float>(loss_scale / normaliser));
            std::memcpy(buffers_.loss_gradient, grad(in), floats * sizeof(float));
        }
        release(pass_buffers_);
        if (keep) set_samples_[static_cast<size_t>(slot)] = batch.count;
        else release(kept);
        return loss;
    }

    // The recompute slots were handed back after the forward: every checkpointed segment is
    // rebuilt, the last one too.
    void stage_backward(int slot) override {
        if (slot < 0 || slot >= plan_.in_flight || kept_sets_[static_cast<size_t>(slot)].empty())
            throw Error("internal: no micro-batch in pipeline slot " + std::to_string(slot));
        std::vector<void*>& kept = kept_sets_[static_cast<size_t>(slot)];
        const int64_t n = set_samples_[static_cast<size_t>(slot)];
        begin_gradient_pass();
        take_pass();
        bind(kept);
        const int out = plan_.model.ops.back().inputs[0];
        const float* seed = plan_.keeps_loss_gradient ? buffers_.loss_gradient : buffers_.stage_output_gradient;
        std::memcpy(grad(out), seed, static_cast<size_t>(elements(out, n)) * sizeof(float));
        backward(n, -1);
        end_gradient_pass();
        send_input_gradient(n);
        release(pass_buffers_);
        release(kept);
    }

    // ZeRO-2 reduced each bucket during the backward passes: the shard is summed already.
    void sum_gradients(ProcessGroup& group) override {
        materialise_zero_grad();
        if (plan_.reduces_in_backward()) return;
        const CollectiveTimer timer(collective_ms_);
        group.sum(buffers_.gradients, plan_.params.trainable_end);
    }

    // A process whose share of a micro-batch is empty still takes part in ZeRO-2's
    // reduce-scatters, adding zeros, and receives its shard's sum.
    void skip_micro_batch() override {
        if (!plan_.reduces_in_backward()) return;
        begin_gradient_pass();
        end_gradient_pass();
        with_bucket_block([&] {
            reduce_empty_buckets(plan_, buffers_.gradient_buckets, buffers_.gradients, bucket_write(), zero_group(), collective_ms_);
        });
    }

    double grad_norm_squared() override {
        materialise_zero_grad();
        if (spec_.zero_stage < 2) return gradient_norm_squared(buffers_.gradients, plan_.params.trainable_end);
        // ZeRO-2: each process holds its slice of the reduced gradients; the norm is their sum.
        double norm_squared = gradient_norm_squared(shard_gradients(), plan_.optimizer_shard.size());
        const CollectiveTimer timer(collective_ms_);
        zero_group().sum(&norm_squared, 1);
        return norm_squared;
    }

    // ZeRO: this process updates its slice of the parameters with its slice of the state, then
    // every process gathers the others' updated slices.
    void optimizer_step(double lr, double grad_multiplier, int64_t step) override {
        materialise_zero_grad();
        const ShardRange shard = plan_.optimizer_shard;
        const int64_t decay_end = std::clamp(plan_.params.decay_end - shard.begin, int64_t{0}, shard.size());
        // Fused and unsharded, the update writes the 16-bit working copy as it goes; otherwise
        // it is rounded in a pass of its own (after ZeRO's gather, from every process's slice).
        const bool rounds_in_update = plan_.fused && plan_.sixteen_bit() && !sharded();
        const WorkingCopy copy{.precision = plan_.precision, .codes = buffers_.working_weights + shard.begin,
                               .widened = widened_parameters_};
        if (plan_.fused)
            optimizer_step_cpu(spec_.optimizer, buffers_.weights + shard.begin, shard_gradients(), buffers_.optimizer_state, shard.size(), lr,
                               grad_multiplier, step, decay_end, rounds_in_update ? &copy : nullptr);
        else
            optimizer_step_eager_cpu(spec_.optimizer, buffers_.weights + shard.begin, shard_gradients(), buffers_.optimizer_state, shard.size(), lr,
                                     grad_multiplier, step, decay_end, plan_.optimizer_tensors, buffers_.optimizer_scratch);
        if (sharded()) {
            const CollectiveTimer timer(collective_ms_);
            zero_group().all_gather(buffers_.weights, plan_.params.trainable_end);
        }
        if (!rounds_in_update) round_working_weights();
        packed_stale_ = true;
        widened_in_update_ = rounds_in_update;
    }

    std::vector<NamedTensor> optimizer_state() const override {
        const int64_t n = plan_.params.trainable_end;
        if (!sharded()) return optimizer_state_tensors(spec_.optimizer, buffers_.optimizer_state, n);
        // Each slot's slices gathered into a whole tensor, as one process would hold it.
        const ShardRange shard = plan_.optimizer_shard;
        std::vector<float> whole(static_cast<size_t>(n * plan_.optimizer_slots));
        for (int s = 0; s < plan_.optimizer_slots; ++s)
            gather_shards(buffers_.optimizer_state + s * shard.size(), shard, whole.data() + s * n, n, zero_group());
        return optimizer_state_tensors(spec_.optimizer, whole.data(), n);
    }

    void set_optimizer_state(const std::vector<NamedTensor>& tensors) override {
        load_optimizer_state_tensors(spec_.optimizer, tensors, buffers_.optimizer_state, plan_.params.trainable_end, plan_.optimizer_shard);
    }

    MemoryReport memory() const override { return arena_.report(); }
    void release_cache() override { arena_.release_cache(); }
    void begin_update_timing() override {
        arena_.begin_update();
        collective_ms_ = 0.0;
        update_start_ = std::chrono::steady_clock::now();
    }
    double collective_ms() const override { return collective_ms_; }
    double end_update_timing_ms() override {
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - update_start_).count();
    }

private:
    // --- The executor's primitives (exec/plan_executor.hpp) in host memory.
    void widen_16bit(const void* codes, float* values, int64_t count) const override {
        load_16bit(plan_.precision, static_cast<const uint16_t*>(codes), values, count);
    }
    void round_to_codes(const float* values, void* codes, int64_t count) const override {
        store_16bit(plan_.precision, values, static_cast<uint16_t*>(codes), count);
    }
    void fill_zeros(float* values, int64_t count) override { std::fill(values, values + count, 0.0f); }
    void copy_to_host(const float* values, float* host, int64_t count) override { std::copy(values, values + count, host); }

    EvalTotals evaluation_loss(const MicroBatch& batch) override {
        EvalTotals totals;
        const OpDesc& loss = plan_.model.ops.back();
        const float* out = read(loss.inputs[0], batch.count, buffers_.input_staging[0]);
        if (loss.kind == OpKind::cross_entropy) {
            totals.loss_sum = softmax_cross_entropy(out, labels_, plan_.model.classes, plan_.rows(loss, batch.count),
                                                    nullptr, 1.0f, &totals.correct);
        } else {
            totals.loss_sum = mean_squared_error(out, batch.targets, batch.count, nullptr, 1.0f);
        }
        return totals;
    }

    // oneDNN's products for every sample count of the plan, made before the first update.
    void prepare_products() {
        const ModelDesc& m = plan_.model;
        for (int64_t n : plan_.sample_counts) {
            for (size_t o = 0; o < m.ops.size(); ++o) {
                const OpDesc& op = m.ops[o];
                if (op.kind == OpKind::attention && plan_.attention_in_onednn()) {  // per sample: any n
                    attention_onednn_prepare(*onednn_, op.rows_per_sample, attention_width(op), op.heads);
                    continue;
                }
                const PackedLinear& p = plan_.packed[o];
                if (!p.onednn) continue;
                const auto& shape = m.params[static_cast<size_t>(op.params[0])].shape;
                const bool weight_grad = op.kind == OpKind::linear && trainable(op.params[0]) &&
                                         plan_.grad_offset[static_cast<size_t>(op.outputs[0])] >= 0;
                const bool has_bias = op.kind == OpKind::linear && op.params.size() > 1;
                onednn_linear_prepare(*onednn_, onednn_operands(), shape[1], shape[0], plan_.rows(op, n),
                                      has_bias || op.kind == OpKind::lora_linear, product_writes_bf16(static_cast<int>(o)),
                                      weight_grad,
                                      p.input_grad && plan_.grad_offset[static_cast<size_t>(op.inputs[0])] >= 0,
                                      !plan_.widens_input_rows(op));
                if (plan_.widens_input_rows(op))
                    onednn_linear_prepare_16bit_rows(*onednn_, shape[1], shape[0], plan_.rows(op, n), has_bias);
            }
        }
    }

    bool sharded() const { return spec_.zero_stage > 0 && spec_.shard_count > 1; }

    // ZeRO-2 outside a backward pass: `use` runs with the bucket block taken from the arena (it is
    // free between passes, so the peak does not move) and bound, and hands it back after.
    template <typename Use>
    void with_bucket_block(Use&& use) {
        buffers_.gradient_buckets = static_cast<float*>(arena_.acquire(MemoryCategory::gradients, plan_.bucket_floats * 4));
        use();
        arena_.release(buffers_.gradient_buckets);
        buffers_.gradient_buckets = nullptr;
    }

    // The summed gradients of this process's slice of the parameters (all of them without ZeRO).
    float* shard_gradients() const {
        return plan_.reduces_in_backward() ? buffers_.gradients : buffers_.gradients + plan_.optimizer_shard.begin;
    }

    // 16-bit runs: the working copy the products read, rounded from the master weights (the
    // frozen ones have no master copy and stay as set_weights rounded them).
    void round_working_weights() {
        if (plan_.sixteen_bit()) store_16bit(plan_.precision, buffers_.weights, buffers_.working_weights, plan_.params.trainable_end);
    }
    // A 16-bit run with frozen weights, which only the 16-bit copy holds.
    bool keeps_frozen_16bit() const { return plan_.fp32_weight_floats() < plan_.params.count; }

    bool trainable(int p) const { return plan_.model.params[static_cast<size_t>(p)].trainable; }
    // Trainable parameter `name`'s place in the flat store.
    ShardRange trainable_range(const std::string& name) const {
        const int p = plan_.model.find_param(name);
        if (p < 0 || !trainable(p)) throw Error("internal: '" + name + "' is not a trainable tensor of this engine's model");
        return plan_.param_range(p);
    }
    // The processes ZeRO shards over: all of them, or a pipeline stage's data-parallel copies.
    ProcessGroup& zero_group() const { return spec_.zero_group ? *spec_.zero_group : process_group(); }
    // Where an op's parameter k goes when widened: the op's parameters one after another.
    float* weight_staging(const OpDesc& op, size_t k) const {
        int64_t offset = 0;
        for (size_t j = 0; j < k; ++j) offset += plan_.staged_floats(op.params[j]);
        return buffers_.weight_staging + offset;
    }
    // fp32 values of an op's parameter k for the kernels that read fp32 weights (LayerNorm, the
    // embedding): the fp32 store, or a frozen weight's 16-bit copy widened into the weight staging.
    const float* fp32_param(const OpDesc& op, size_t k) const {
        const int p = op.params[k];
        const int64_t offset = plan_.params.offset[static_cast<size_t>(p)];
        if (offset < plan_.fp32_weight_floats()) return buffers_.weights + offset;
        float* staging = weight_staging(op, k);
        load_16bit(plan_.precision, buffers_.working_weights + offset, staging, plan_.model.params[static_cast<size_t>(p)].numel());
        return staging;
    }
    // A max-pool op's channels: its input's elements per sample over the image's.
    int64_t pooled_channels(const OpDesc& op) const {
        return plan_.model.tensors[static_cast<size_t>(op.inputs[0])].per_sample / (op.height * op.width);
    }
    // Where the backward writes parameter p's gradient: the flat gradient buffer, or with ZeRO-2
    // its place in its bucket.
    float* param_grad(int p) const {
        if (!trainable(p)) return nullptr;
        if (plan_.reduces_in_backward()) return buffers_.gradient_buckets + plan_.param_bucket_offset[static_cast<size_t>(p)];
        return buffers_.gradients + plan_.params.offset[static_cast<size_t>(p)];
    }

    void check_count(int64_t count) const {
        if (count < 1 || count > plan_.micro_batch)
            throw Error("internal: micro-batch of " + std::to_string(count) + " samples for buffers of " +
                        std::to_string(plan_.micro_batch));
    }
    // A micro-batch's buffers, in the planner's order (GraphPlan::buffers): what it keeps from
    // its forward to its backward (set `set` of them), then what a pass needs while it runs.
    void take_kept(int set, std::vector<void*>& kept) {
        kept.clear();
        const size_t first = plan_.first_step_buffer + static_cast<size_t>(set) * plan_.kept_buffers;
        for (size_t i = first; i < first + plan_.kept_buffers; ++i)
            kept.push_back(arena_.acquire(plan_.buffers[i].category, plan_.buffers[i].bytes));
    }
    void take_pass() {
        pass_buffers_.clear();
        for (size_t i = plan_.first_pass_buffer; i < plan_.buffers.size(); ++i) {
            pass_buffers_.push_back(arena_.acquire(plan_.buffers[i].category, plan_.buffers[i].bytes));
            buffers_.bind(plan_.buffers[i], pass_buffers_.back());
        }
    }
    // Points the tensors at a kept set and the pass's recompute slots.
    void bind(const std::vector<void*>& kept) {
        for (size_t i = 0; i < kept.size(); ++i) buffers_.bind(plan_.buffers[plan_.first_step_buffer + i], kept[i]);
        buffers_.bind_tensor_views(plan_);
        if (plan_.model.token_input) labels_ = buffers_.tokens + plan_.token_elements;
    }
    void release(std::vector<void*>& buffers) {
        for (void* pointer : buffers) arena_.release(pointer);
        buffers.clear();
    }
    // Copies the micro-batch's inputs into its buffers (token models: the targets too).
    void load_inputs(const MicroBatch& batch) {
        const ModelDesc& m = plan_.model;
        if (m.token_input) {
            const int64_t n = m.input_per_sample * batch.count;
            std::copy(batch.tokens, batch.tokens + n, buffers_.tokens);
            std::copy(batch.labels, batch.labels + n, buffers_.tokens + plan_.token_elements);
            return;
        }
        labels_ = batch.labels;
        const int64_t count = m.input_per_sample * batch.count;
        if (plan_.stored_16bit(0)) store_16bit(plan_.precision, batch.x, tensor_16bit(0), count);
        else std::memcpy(tensor(0), batch.x, static_cast<size_t>(count) * sizeof(float));
    }
    // A pipeline stage after the first: its input's gradient, for the stage before.
    void send_input_gradient(int64_t n) {
        if (!plan_.model.input_gradient) return;
        std::memcpy(buffers_.stage_input_gradient, grad(0), static_cast<size_t>(elements(0, n)) * sizeof(float));
    }

    // A micro-batch's buffers taken (its kept ones into `kept`, as set `set`), bound and loaded.
    void begin_micro_batch(const MicroBatch& batch, int set, std::vector<void*>& kept) {
        check_count(batch.count);
        take_kept(set, kept);
        take_pass();
        bind(kept);
        load_inputs(batch);
        refresh_packed_weights();
    }
    void begin_micro_batch(const MicroBatch& batch) override { begin_micro_batch(batch, 0, kept_sets_[0]); }

    void end_micro_batch() override {
        release(pass_buffers_);
        release(kept_sets_[0]);
    }

    // fp32 values of a linear op's parameter k as its products read them: the weights, or in
    // 16-bit runs the working copy widened into the weight staging (W, then b after it).
    const float* product_param(const OpDesc& op, size_t k) {
        const int p = op.params[k];
        if (!plan_.sixteen_bit()) return buffers_.weights + plan_.params.offset[static_cast<size_t>(p)];
        float* staging = weight_staging(op, k);
        const int64_t offset = plan_.params.offset[static_cast<size_t>(p)];
        load_16bit(plan_.precision, buffers_.working_weights + offset, staging, plan_.model.params[static_cast<size_t>(p)].numel());
        return staging;
    }

    // W (with its bias beside it) and W^T of every linear op, packed once per update; frozen
    // ones once after set_weights. Ops on oneDNN get what their products read widened instead.
    void refresh_packed_weights() {
        if (!packed_stale_) return;
        const ModelDesc& m = plan_.model;
        for (size_t o = 0; o < m.ops.size(); ++o) {
            const OpDesc& op = m.ops[o];
            if (op.kind != OpKind::linear && op.kind != OpKind::lora_linear && op.kind != OpKind::conv2d) continue;
            if (frozen_packed_ && !trainable(op.params[0])) continue;
            const PackedLinear& p = plan_.packed[o];
            if (p.nf4 && !p.onednn) continue;  // packed per product (nf4_packed)
            if (p.onednn) {
                if (!widened_in_update_) widen_for_onednn(op, p);
                continue;
            }
            const float* w = product_param(op, 0);
            float* packed = buffers_.packed_weights + p.forward_offset;
            pack_weights(p.forward, w, packed);
            if (op.params.size() > 1) {
                const float* b = product_param(op, 1);
                std::copy(b, b + p.forward.rows, packed + p.forward.total_floats());
            }
            if (p.transposed_offset >= 0) pack_weights(p.transposed, w, buffers_.packed_weights + p.transposed_offset);
        }
        packed_stale_ = false;
        frozen_packed_ = true;
    }

    void forward(int64_t n) { walk_forward(plan_, *this, n); }

    // --- A linear op's products in oneDNN (PackedLinear::onednn)
    bool bf16_products() const { return plan_.products == ProductKernel::onednn_bf16; }
    MatmulOperands onednn_operands() const { return bf16_products() ? MatmulOperands::bf16 : MatmulOperands::f32; }
    // The parameters the plan widens (widened_trainable_params), as the fused optimizer step
    // writes them. It writes no codes for them: after it, nothing reads those (their products
    // read the widened copy, and widen_for_onednn reads the codes only after a full rounding,
    // !widened_in_update_). DoRA reads its W and bias as codes (product_param), which holds
    // because LoRA freezes the base: frozen parameters are not in the list.
    std::vector<WidenedParameter> widened_parameters() const {
        std::vector<WidenedParameter> widened;
        for (const WidenedTrainableParam& w : widened_trainable_params(plan_)) {
            const ShardRange range = plan_.param_range(w.param);
            widened.push_back({.begin = range.begin, .end = range.end, .values = buffers_.packed_weights + w.packed_offset});
        }
        return widened;
    }
    // 16-bit runs: W (fp32 products) and the bias widened from the working copy, once per update.
    void widen_for_onednn(const OpDesc& op, const PackedLinear& p) {
        auto widen = [&](size_t k, int64_t offset) {
            const int param = op.params[k];
            load_16bit(plan_.precision, buffers_.working_weights + plan_.params.offset[static_cast<size_t>(param)], buffers_.packed_weights + offset,
                       plan_.model.params[static_cast<size_t>(param)].numel());
        };
        if (p.widened_weight_offset >= 0) widen(0, p.widened_weight_offset);
        if (p.widened_bias_offset >= 0) widen(1, p.widened_bias_offset);
    }
    // W as the products read it: bf16 codes of the working copy, the fp32 weights, or their
    // widened copy.
    const void* onednn_weight(const OpDesc& op, const PackedLinear& p) const {
        const int64_t offset = plan_.params.offset[static_cast<size_t>(op.params[0])];
        if (bf16_products()) return buffers_.working_weights + offset;
        return p.widened_weight_offset >= 0 ? buffers_.packed_weights + p.widened_weight_offset : buffers_.weights + offset;
    }
    const float* onednn_bias(const OpDesc& op, const PackedLinear& p) const {
        if (op.params.size() < 2) return nullptr;
        if (p.widened_bias_offset >= 0) return buffers_.packed_weights + p.widened_bias_offset;
        return buffers_.weights + plan_.params.offset[static_cast<size_t>(op.params[1])];
    }
    // Whether linear op o's product writes its 16-bit output itself (bf16 products with no
    // epilogue after them): rounded once, as the output staging and store_outputs would.
    bool writes_bf16(int o) const {
        const OpDesc& op = plan_.model.ops[static_cast<size_t>(o)];
        return bf16_products() && op.kind == OpKind::linear && plan_.fused_with[static_cast<size_t>(o)] < 0 &&
               plan_.stored_16bit(op.outputs[0]);
    }
    // Where op a's backward rounds its input gradient as the bf16 codes the oneDNN linear before it
    // reads as dY (GraphPlan::hands_dy_codes), or null where it hands none over: the activation
    // writes them in the product's scratch (it needs none of its own), attention in the
    // gradient's own buffer (which it only writes; the scratch holds its heads).
    uint16_t* handed_dy_codes(int a, int64_t n) const {
        if (!plan_.hands_dy_codes(a, n)) return nullptr;
        const OpDesc& op = plan_.model.ops[static_cast<size_t>(a)];
        if (op.kind == OpKind::activation) return onednn_linear_dy_codes(buffers_.kernel_scratch);
        return reinterpret_cast<uint16_t*>(grad(op.inputs[0]));
    }
    // An attention op's width C (its output's features per position).
    int64_t attention_width(const OpDesc& op) const {
        return plan_.model.tensors[static_cast<size_t>(op.outputs[0])].per_sample / op.rows_per_sample;
    }
    // --- QLoRA: W stored as NF4, dequantized into the NF4 tile right before each product.
    Nf4Tensor nf4_weight(const OpDesc& op) const {
        const int p = op.params[0];
        return nf4_tensor(buffers_.nf4_store + plan_.params.nf4_offset[static_cast<size_t>(p)],
                          plan_.model.params[static_cast<size_t>(p)].numel());
    }
    // W as the products read it, in the tile: bf16 codes for oneDNN's bf16 products, else fp32
    // values, in 16-bit runs rounded to the working precision (the values a 16-bit working
    // copy of the dequantized base would hold, as bitsandbytes dequantizes to its compute dtype).
    const void* dequantized_weight(const OpDesc& op) {
        const Nf4Tensor q = nf4_weight(op);
        const Precision into = bf16_products() ? Precision::bf16 : Precision::fp32;
        const int64_t n = q.sizes.elements;
        parallel_range(q.sizes.blocks, kNf4BlockSize, [&](int64_t first, int64_t end) {
            const int64_t begin = first * kNf4BlockSize, stop = std::min(end * kNf4BlockSize, n);
            dequantize_nf4(q, begin, stop, into, buffers_.nf4_tile);
            if (plan_.sixteen_bit() && into == Precision::fp32)
                round_to_16bit_serial(plan_.precision, static_cast<float*>(buffers_.nf4_tile) + begin, stop - begin);
        });
        return buffers_.nf4_tile;
    }
    // Eigen's products: W dequantized, then packed as `layout` (forward or transposed) wants.
    const float* nf4_packed(const OpDesc& op, const PackedLayout& layout) {
        pack_weights(layout, static_cast<const float*>(dequantized_weight(op)), buffers_.nf4_packed_tile);
        return buffers_.nf4_packed_tile;
    }

    // --- DoRA (nn/dora.hpp) on a lora_linear op's params {W, b, A, B, m}.
    // out holds the LoRA result r, computed from A and B as given: the norms of W + s B A as
    // the products read them, then out = r + (m / n - 1) (r - b), r - b saved as output 2
    // (through the scratch in 16-bit runs).
    void dora_forward_op(const OpDesc& op, const PackedLinear& p, const float* lora_a, const float* lora_b, float* out,
                         int64_t n) {
        const auto& a = plan_.model.params[static_cast<size_t>(op.params[2])].shape;
        const int64_t features = plan_.model.params[static_cast<size_t>(op.params[0])].shape[0];
        float* norms = buffers_.dora_norms + p.dora_norm_offset;
        dora_weight_norms(product_param(op, 0), lora_a, lora_b, op.lora_scale, a[1], features, a[0], norms, buffers_.kernel_scratch);
        const int unscaled = op.outputs[2];
        float* z = plan_.stored_16bit(unscaled) ? buffers_.kernel_scratch : tensor(unscaled);
        dora_forward(out, product_param(op, 1), fp32_param(op, 4), norms, z, plan_.rows(op, n), features);
        if (plan_.stored_16bit(unscaled)) store_16bit(plan_.precision, z, tensor_16bit(unscaled), elements(unscaled, n));
    }
    // dm from dout and the saved unscaled result; returns dout scaled by m / n, in the scratch.
    float* dora_backward_op(const OpDesc& op, int o, const PackedLinear& p, const float* dout, int64_t n) {
        const int64_t features = plan_.model.params[static_cast<size_t>(op.params[0])].shape[0];
        const int unscaled = op.outputs[2];
        float* scaled = buffers_.kernel_scratch;
        const float* z = read(unscaled, n, buffers_.kernel_scratch + p.dora_unscaled_offset);
        dora_backward(dout, z, fp32_param(op, 4), buffers_.dora_norms + p.dora_norm_offset, param_grad(op.params[4]), scaled,
                      plan_.rows(op, n), features, param_write(o, 4));
        return scaled;
    }

    // The op's input as the products read it: its 16-bit codes, or fp32 values.
    const void* onednn_input(const OpDesc& op, int64_t n) const {
        return bf16_products() ? static_cast<const void*>(tensor_16bit(op.inputs[0])) : input(op, 0, n);
    }

    // --fused on: the activation a product's epilogue computes (GraphPlan::fused_with), into its
    // own buffer or, where it runs in place, over the product's output.
    std::optional<ProductEpilogue> epilogue(int o) const {
        const int with = plan_.fused_with[static_cast<size_t>(o)];
        if (with < 0) return std::nullopt;
        const OpDesc& activation = plan_.model.ops[static_cast<size_t>(with)];
        const int t = activation.outputs[0];
        ProductEpilogue e{.activation = activation.activation, .rounding = plan_.precision};
        const bool in_place = plan_.tensor_alias[static_cast<size_t>(t)] >= 0;
        if (!in_place) e.activated = fused_output(t);
        // A linear op's 16-bit results go to their storage from the epilogue itself.
        if (activates_codes(o)) {
            e.activated_codes = tensor_16bit(t);
            if (!in_place) e.output_codes = tensor_16bit(plan_.model.ops[static_cast<size_t>(o)].outputs[0]);
        }
        return e;
    }
    // A linear op fused with its activation (GraphPlan::fused_with), both results stored in 16 bits.
    bool activates_codes(int o) const {
        const int with = plan_.fused_with[static_cast<size_t>(o)];
        const OpDesc& product = plan_.model.ops[static_cast<size_t>(o)];
        return with >= 0 && product.kind == OpKind::linear &&
               plan_.stored_16bit(plan_.model.ops[static_cast<size_t>(with)].outputs[0]) &&
               plan_.stored_16bit(product.outputs[0]);
    }
    // A bf16 run's oneDNN linear op whose product oneDNN itself rounds into bf16 codes: its stored
    // output, or the input of the activation fused with it (onednn_linear_forward_bf16).
    bool product_writes_bf16(int o) const { return writes_bf16(o) || (bf16_products() && activates_codes(o)); }
    // Where a fused pair's second result is computed: its buffer, or output staging 1.
    float* fused_output(int t) const { return plan_.stored_16bit(t) ? buffers_.output_staging[1] : tensor(t); }
    void store_fused_output(int o, int64_t n) {
        const int with = plan_.fused_with[static_cast<size_t>(o)];
        if (with < 0) return;
        const int t = plan_.model.ops[static_cast<size_t>(with)].outputs[0];
        if (plan_.tensor_alias[static_cast<size_t>(t)] < 0 && plan_.stored_16bit(t))
            store_16bit(plan_.precision, buffers_.output_staging[1], tensor_16bit(t), elements(t, n));
    }

    void forward_op(int o, int64_t n) override {
        if (plan_.fused_into[static_cast<size_t>(o)] >= 0) return;  // its partner's kernel computed it
        const OpDesc& op = plan_.model.ops[static_cast<size_t>(o)];
        const int64_t rows = plan_.rows(op, n);
        const std::optional<ProductEpilogue> fused_epilogue = epilogue(o);
        const ProductEpilogue* fused = fused_epilogue ? &*fused_epilogue : nullptr;
        switch (op.kind) {
            case OpKind::linear: {
                const PackedLinear& p = plan_.packed[static_cast<size_t>(o)];
                if (p.onednn) {
                    const auto& shape = plan_.model.params[static_cast<size_t>(op.params[0])].shape;
                    if (product_writes_bf16(o)) {
                        // Fused, the product's codes are the activation's input: its own storage, or
                        // the activation's where that runs in place.
                        uint16_t* codes = !fused ? tensor_16bit(op.outputs[0])
                                          : fused->output_codes ? fused->output_codes
                                                                : fused->activated_codes;
                        onednn_linear_forward_bf16(*onednn_, onednn_input(op, n), onednn_weight(op, p),
                                                   onednn_bias(op, p), codes, shape[1], shape[0], rows, fused);
                        return;  // stored
                    }
                    if (plan_.widens_input_rows(op)) {
                        const bool stores = plan_.stored_16bit(op.outputs[0]);
                        onednn_linear_forward_16bit_rows(
                            *onednn_, plan_.precision, tensor_16bit(op.inputs[0]), buffers_.input_staging[0],
                            static_cast<const float*>(onednn_weight(op, p)), onednn_bias(op, p), output(op, 0),
                            stores ? tensor_16bit(op.outputs[0]) : nullptr, shape[1], shape[0], rows, fused);
                        if (!stores) break;
                        if (!(fused && fused->activated_codes)) store_fused_output(o, n);
                        return;  // stored
                    }
                    onednn_linear_forward(*onednn_, onednn_operands(), onednn_input(op, n), onednn_weight(op, p),
                                          onednn_bias(op, p), output(op, 0), shape[1], shape[0], rows, fused);
                } else {
                    const float* packed = buffers_.packed_weights + p.forward_offset;
                    packed_linear_forward(p.forward, packed, op.params.size() > 1 ? packed + p.forward.total_floats() : nullptr,
                                          input(op, 0, n), output(op, 0), rows, fused);
                }
                if (fused && fused->activated_codes) return;  // the epilogue stored both results
                break;
            }
            case OpKind::lora_linear: {
                const PackedLinear& p = plan_.packed[static_cast<size_t>(o)];
                const float* x = input(op, 0, n);
                float* out = output(op, 0);
                if (p.onednn) {
                    const auto& w = plan_.model.params[static_cast<size_t>(op.params[0])].shape;
                    onednn_linear_forward(*onednn_, onednn_operands(), onednn_input(op, n),
                                          p.nf4 ? dequantized_weight(op) : onednn_weight(op, p), onednn_bias(op, p), out,
                                          w[1], w[0], rows);
                } else if (p.nf4) {
                    packed_linear_forward(p.forward, nf4_packed(op, p.forward), product_param(op, 1), x, out, rows);
                } else {
                    const float* packed = buffers_.packed_weights + p.forward_offset;
                    packed_linear_forward(p.forward, packed, packed + p.forward.total_floats(), x, out, rows);
                }
                const auto& a = plan_.model.params[static_cast<size_t>(op.params[2])].shape;
                const float* lora_a = product_param(op, 2);
                const float* lora_b = product_param(op, 3);
                lora_forward(x, lora_a, lora_b, op.lora_scale, output(op, 1), out, rows, a[1],
                             plan_.model.params[static_cast<size_t>(op.params[0])].shape[0], a[0]);
                if (has_dora_magnitude(op)) dora_forward_op(op, p, lora_a, lora_b, out, n);
                break;
            }
            case OpKind::activation:
                activation_forward(op.activation, input(op, 0, n), output(op, 0), elements(op.outputs[0], n));
                break;
            case OpKind::embedding: {
                const auto& wte = plan_.model.params[static_cast<size_t>(op.params[0])];
                embedding_forward(buffers_.tokens, fp32_param(op, 0), fp32_param(op, 1), output(op, 0), n,
                                  op.rows_per_sample, wte.shape[1]);
                break;
            }
            case OpKind::layernorm: {
                // outputs 1 and 2, the mean and rstd, are statistics: fp32 in every run.
                const int64_t C = plan_.model.params[static_cast<size_t>(op.params[0])].shape[0];
                if (plan_.stored_16bit(op.inputs[0]) && plan_.stored_16bit(op.outputs[0])) {
                    layernorm_forward_16bit(plan_.precision, tensor_16bit(op.inputs[0]), fp32_param(op, 0),
                                            fp32_param(op, 1), tensor_16bit(op.outputs[0]), tensor(op.outputs[1]),
                                            tensor(op.outputs[2]), rows, C, buffers_.input_staging[0], buffers_.output_staging[0]);
                    return;  // stored
                }
                layernorm_forward(input(op, 0, n), fp32_param(op, 0), fp32_param(op, 1), output(op, 0),
                                  tensor(op.outputs[1]), tensor(op.outputs[2]), rows, C);
                break;
            }
            case OpKind::attention: {
                const int64_t C = attention_width(op);
                if (plan_.attention_in_storage(op) && plan_.attention_in_onednn()) {
                    attention_forward_onednn(*onednn_, tensor_16bit(op.inputs[0]), tensor_16bit(op.outputs[0]),
                                             tensor_16bit(op.outputs[1]), n, op.rows_per_sample, C, op.heads, buffers_.kernel_scratch);
                    return;  // stored
                }
                if (plan_.attention_in_storage(op)) {
                    attention_forward_16bit(plan_.precision, tensor_16bit(op.inputs[0]), tensor_16bit(op.outputs[0]),
                                            tensor_16bit(op.outputs[1]), n, op.rows_per_sample, C, op.heads, buffers_.kernel_scratch);
                    return;  // stored
                }
                if (plan_.fused)
                    attention_forward(input(op, 0, n), output(op, 0), output(op, 1), n, op.rows_per_sample, C, op.heads,
                                      plan_.precision);
                else
                    attention_forward_eager(input(op, 0, n), output(op, 0), output(op, 1), n, op.rows_per_sample, C,
                                            op.heads, plan_.precision);
                break;
            }
            case OpKind::residual_add: {
                const int ln = plan_.fused_with[static_cast<size_t>(o)];
                if (ln >= 0) {  // the LayerNorm that reads the sum, in the same pass
                    const OpDesc& norm = plan_.model.ops[static_cast<size_t>(ln)];
                    const int64_t C = plan_.model.params[static_cast<size_t>(norm.params[0])].shape[0];
                    if (plan_.stored_16bit(op.inputs[0]) && plan_.stored_16bit(op.inputs[1]) &&
                        plan_.stored_16bit(op.outputs[0]) && plan_.stored_16bit(norm.outputs[0])) {
                        // It reads the 16-bit inputs a block at a time itself: nothing is widened first.
                        residual_layernorm_forward_16bit(
                            plan_.precision, tensor_16bit(op.inputs[0]), tensor_16bit(op.inputs[1]),
                            tensor_16bit(op.outputs[0]), fp32_param(norm, 0), fp32_param(norm, 1),
                            tensor_16bit(norm.outputs[0]), tensor(norm.outputs[1]), tensor(norm.outputs[2]), rows, C,
                            buffers_.output_staging[0], buffers_.output_staging[1]);
                        return;  // stored
                    }
                    residual_layernorm_forward(input(op, 0, n), input(op, 1, n), output(op, 0), fp32_param(norm, 0),
                                               fp32_param(norm, 1), fused_output(norm.outputs[0]),
                                               tensor(norm.outputs[1]), tensor(norm.outputs[2]), rows, C,
                                               plan_.precision);
                    break;
                }
                const float* a = input(op, 0, n);
                const float* b = input(op, 1, n);
                float* out = output(op, 0);
                parallel_range(elements(op.outputs[0], n), 1, [&](int64_t first, int64_t end) {
#pragma omp simd
                    for (int64_t i = first; i < end; ++i) out[i] = a[i] + b[i];
                });
                break;
            }
            case OpKind::conv2d: {
                const PackedLinear& p = plan_.packed[static_cast<size_t>(o)];
                const float* packed = buffers_.packed_weights + p.forward_offset;
                conv2d_forward(conv_shape(plan_.model, op), p.forward, packed, packed + p.forward.total_floats(),
                               input(op, 0, n), output(op, 0), n, buffers_.kernel_scratch, fused);
                break;
            }
            case OpKind::max_pool:
                max_pool_forward(input(op, 0, n), output(op, 0), n, pooled_channels(op), op.height, op.width);
                break;
            case OpKind::cross_entropy:
            case OpKind::mean_squared_error:
            case OpKind::pipeline_output: return;  // the loss runs in loss_forward / evaluate; a stage's output is sent
        }
        store_outputs(op, n);
        store_fused_output(o, n);
    }

    // The loss writes the gradient of its input over that input's fp32 values; a 16-bit input is
    // widened into its gradient buffer for it.
    double loss_forward(const MicroBatch& batch, float grad_scale) {
        const OpDesc& loss = plan_.model.ops.back();
        const int in = loss.inputs[0];
        float* dinput = grad(in);
        const float* values = read(in, batch.count, dinput);
        if (loss.kind == OpKind::cross_entropy && !plan_.fused)
            return softmax_cross_entropy_eager(values, labels_, plan_.model.classes, plan_.rows(loss, batch.count), dinput,
                                               grad_scale, buffers_.kernel_scratch);
        if (loss.kind == OpKind::cross_entropy)
            return softmax_cross_entropy(values, labels_, plan_.model.classes, plan_.rows(loss, batch.count), dinput,
                                         grad_scale, nullptr);
        return mean_squared_error(values, batch.targets, batch.count, dinput, grad_scale);
    }

    // ZeRO-2: a bucket is reduced right after the op that completes it.
    void backward_done(int o) override {
        if (plan_.reduces_in_backward() && plan_.op_bucket[static_cast<size_t>(o)] >= 0)
            reduce_gradient_bucket(plan_, plan_.gradient_buckets[static_cast<size_t>(plan_.op_bucket[static_cast<size_t>(o)])],
                                   buffers_.gradient_buckets, buffers_.gradients, bucket_write(), zero_group(), collective_ms_);
    }

    void backward_op(int o, int64_t n) override {
        const OpDesc& op = plan_.model.ops[static_cast<size_t>(o)];
        const int64_t rows = plan_.rows(op, n);
        float* dout = grad(op.outputs.empty() ? -1 : op.outputs[0]);
        switch (op.kind) {
            case OpKind::linear: {
                const auto& shape = plan_.model.params[static_cast<size_t>(op.params[0])].shape;
                const int64_t out = shape[0], in = shape[1];
                float* dbias = op.params.size() > 1 ? param_grad(op.params[1]) : nullptr;
                float* dinput = grad(op.inputs[0]);
                const PackedLinear& p = plan_.packed[static_cast<size_t>(o)];
                // A 16-bit product's operands are 16-bit: its output gradient too. Nothing else
                // reads that gradient (this op made the tensor), so it is rounded in place, or by
                // oneDNN's paths as they lay the gradient out for their products.
                if (plan_.sixteen_bit() && !p.onednn) round_to_16bit(plan_.precision, dout, elements(op.outputs[0], n));
                if (p.onednn) {
                    onednn_linear_backward(*onednn_, onednn_operands(), onednn_input(op, n), onednn_weight(op, p), dout,
                                           param_grad(op.params[0]), dbias, dinput, in, out, rows, param_write(o, 0),
                                           buffers_.kernel_scratch, plan_.precision, handed_dy_codes(o + 1, n));
                    return;
                }
                const float* x = input(op, 0, n);
                if (dinput) {
                    linear_backward_packed(p.transposed, buffers_.packed_weights + p.transposed_offset, x, dout, param_grad(op.params[0]),
                                           dbias, dinput, in, out, rows, param_write(o, 0));
                } else {
                    linear_weight_grad(x, dout, param_grad(op.params[0]), dbias, in, out, rows, param_write(o, 0));
                }
                return;
            }
            case OpKind::lora_linear: {
                const auto& a = plan_.model.params[static_cast<size_t>(op.params[2])].shape;
                const int64_t rank = a[0], in = a[1];
                const int64_t out = plan_.model.params[static_cast<size_t>(op.params[0])].shape[0];
                float* dinput = grad(op.inputs[0]);
                const PackedLinear& p = plan_.packed[static_cast<size_t>(o)];
                // DoRA: the magnitude's gradient from dout, then the products and the adapter
                // see dout scaled by m / n (in 16-bit runs rounded after the scaling).
                float* scratch = buffers_.kernel_scratch + p.dora_scratch_prefix;
                if (has_dora_magnitude(op)) dout = dora_backward_op(op, o, p, dout, n);
                if (plan_.sixteen_bit()) round_to_16bit(plan_.precision, dout, elements(op.outputs[0], n));
                const float* x = input(op, 0, n);
                // The frozen product writes dX = W^T dout; the adapter adds its part to it.
                if (dinput && p.onednn)
                    onednn_linear_backward(*onednn_, onednn_operands(), onednn_input(op, n),
                                           p.nf4 ? dequantized_weight(op) : onednn_weight(op, p), dout, nullptr, nullptr,
                                           dinput, in, out, rows, GradientWrite::overwrite, scratch);
                else if (dinput)
                    linear_backward_packed(p.transposed,
                                           p.nf4 ? nf4_packed(op, p.transposed) : buffers_.packed_weights + p.transposed_offset, x, dout,
                                           nullptr, nullptr, dinput, in, out, rows, GradientWrite::overwrite);
                lora_backward(x, saved_output(op, 1, n), dout, product_param(op, 2), product_param(op, 3), op.lora_scale,
                              param_grad(op.params[2]), param_grad(op.params[3]), dinput, rows, in, out, rank,
                              param_write(o, 2), scratch);
                return;
            }
            case OpKind::activation: {
                // The input's gradient shares the output's buffer: scaled in place. f' is read
                // from the input (GELU) or the output (the others); only that one is widened.
                float* g = grad(op.inputs[0]);
                const int saved = activation_saved_tensor(op);
                const bool from_input = saved == op.inputs[0];
                if (plan_.stored_16bit(saved)) {  // widened a block at a time as f' reads it
                    activation_backward_16bit(op.activation, plan_.precision, tensor_16bit(saved),
                                              from_input ? buffers_.input_staging[0] : buffers_.output_staging[0], g,
                                              elements(op.outputs[0], n), handed_dy_codes(o, n));
                    return;
                }
                activation_backward(op.activation, from_input ? input(op, 0, n) : nullptr,
                                    from_input ? nullptr : saved_output(op, 0, n), g, elements(op.outputs[0], n));
                return;
            }
            case OpKind::embedding: {
                const auto& wte = plan_.model.params[static_cast<size_t>(op.params[0])];
                embedding_backward(dout, buffers_.tokens, param_grad(op.params[0]), param_grad(op.params[1]), n,
                                   op.rows_per_sample, wte.shape[1], wte.shape[0], param_write(o, 0), param_write(o, 1));
                return;
            }
            case OpKind::layernorm: {
                const int64_t C = plan_.model.params[static_cast<size_t>(op.params[0])].shape[0];
                if (plan_.stored_16bit(op.inputs[0])) {
                    layernorm_backward_16bit(plan_.precision, dout, tensor_16bit(op.inputs[0]), buffers_.input_staging[0],
                                             fp32_param(op, 0), tensor(op.outputs[1]), tensor(op.outputs[2]),
                                             grad(op.inputs[0]), param_grad(op.params[0]), param_grad(op.params[1]),
                                             rows, C, input_write(o, 0), param_write(o, 0),
                                             buffers_.kernel_scratch);
                    return;
                }
                layernorm_backward(dout, input(op, 0, n), fp32_param(op, 0), tensor(op.outputs[1]),
                                   tensor(op.outputs[2]), grad(op.inputs[0]), param_grad(op.params[0]),
                                   param_grad(op.params[1]), rows, C, input_write(o, 0),
                                   param_write(o, 0), buffers_.kernel_scratch);
                return;
            }
            case OpKind::attention: {
                const int64_t C = attention_width(op);
                // As a linear op's: 16-bit products take their output gradient in 16 bits, rounded
                // in place here, or by oneDNN's path as it lays the gradient out for its products.
                const bool in_onednn = plan_.attention_in_storage(op) && plan_.attention_in_onednn();
                if (plan_.sixteen_bit() && !in_onednn) round_to_16bit(plan_.precision, dout, elements(op.outputs[0], n));
                if (in_onednn)
                    attention_backward_onednn(*onednn_, dout, tensor_16bit(op.inputs[0]), tensor_16bit(op.outputs[1]),
                                              grad(op.inputs[0]), n, op.rows_per_sample, C, op.heads, buffers_.kernel_scratch,
                                              handed_dy_codes(o, n));
                else if (plan_.attention_in_storage(op))
                    attention_backward_16bit(plan_.precision, dout, tensor_16bit(op.inputs[0]), tensor_16bit(op.outputs[1]),
                                             grad(op.inputs[0]), n, op.rows_per_sample, C, op.heads, buffers_.kernel_scratch);
                else if (plan_.fused)
                    attention_backward(dout, input(op, 0, n), saved_output(op, 1, n), grad(op.inputs[0]), n,
                                       op.rows_per_sample, C, op.heads, buffers_.kernel_scratch, plan_.precision);
                else
                    attention_backward_eager(dout, input(op, 0, n), saved_output(op, 1, n), grad(op.inputs[0]), n,
                                             op.rows_per_sample, C, op.heads, buffers_.kernel_scratch, plan_.precision);
                return;
            }
            case OpKind::residual_add: {
                const int64_t count = elements(op.outputs[0], n);
                for (size_t k = 0; k < 2; ++k) {
                    float* d = grad(op.inputs[k]);
                    if (!d) continue;
                    const bool add = input_write(o, k) == GradientWrite::accumulate;
                    parallel_range(count, 1, [&](int64_t first, int64_t end) {
                        if (add) {
#pragma omp simd
                            for (int64_t i = first; i < end; ++i) d[i] += dout[i];
                        } else {
                            std::copy(dout + first, dout + end, d + first);
                        }
                    });
                }
                return;
            }
            case OpKind::conv2d: {
                const PackedLinear& p = plan_.packed[static_cast<size_t>(o)];
                // As a linear op's: 16-bit products take their output gradient in 16 bits.
                if (plan_.sixteen_bit()) round_to_16bit(plan_.precision, dout, elements(op.outputs[0], n));
                float* dinput = grad(op.inputs[0]);
                conv2d_backward(conv_shape(plan_.model, op), p.transposed,
                                dinput ? buffers_.packed_weights + p.transposed_offset : nullptr, input(op, 0, n), dout,
                                param_grad(op.params[0]), param_grad(op.params[1]), dinput, n, param_write(o, 0), buffers_.kernel_scratch);
                return;
            }
            case OpKind::max_pool: {
                float* dinput = grad(op.inputs[0]);
                if (dinput)
                    max_pool_backward(input(op, 0, n), dout, dinput, n, pooled_channels(op), op.height, op.width,
                                      input_write(o, 0));
                return;
            }
            case OpKind::cross_entropy:
            case OpKind::mean_squared_error:
            case OpKind::pipeline_output: return;
        }
    }

    EngineSpec spec_;
    TrackingArena arena_;
    std::unique_ptr<OnednnProducts> onednn_;  // when the linear ops' products run in oneDNN
    bool packed_stale_ = true;
    bool frozen_packed_ = false;   // frozen weights' packing is still valid
    // The trainable parameters widen_for_onednn widens, which the fused optimizer step widens
    // instead as it rounds them (widened_parameters()); true after a step that did.
    std::vector<WidenedParameter> widened_parameters_;  // set once the buffers are
    bool widened_in_update_ = false;
    // Per micro-batch in flight (GraphPlan::in_flight), the buffers it keeps from its forward to
    // its backward, and its samples; a pass's buffers; a pipeline stage's evaluation's kept set.
    std::vector<std::vector<void*>> kept_sets_;
    std::vector<int64_t> set_samples_;
    std::vector<void*> pass_buffers_;
    std::vector<void*> evaluation_set_;
    double last_forward_ms_ = 0.0;  // of the last forward_backward (a pipeline's last stage times it)
    const int32_t* labels_ = nullptr;
    std::chrono::steady_clock::time_point update_start_;
    double collective_ms_ = 0.0;
};

}  // namespace

BytesByCategory plan_cpu_engine_memory(const EngineSpec& spec) { return plan_cpu_engine_memory(plan_for(spec)); }
BytesByCategory plan_cpu_engine_memory(const GraphPlan& graph) { return graph.planned_bytes(); }
GraphPlan plan_cpu_graph(const EngineSpec& spec) { return plan_for(spec); }

int64_t plan_cpu_engine_traffic(const GraphPlan& graph, const OptimizerConfig& optimizer, int64_t micro_batches) {
    return count_memory_traffic(graph, optimizer).per_update(micro_batches);
}

std::unique_ptr<ComputeEngine> make_cpu_engine(const EngineSpec& spec) { return std::make_unique<GraphEngine>(spec); }

}  // namespace trainbench
