// The CPU executor over a model description: one switch over op kinds for the forward and one
// for the backward, on buffers the planner (plan/graph_plan.cpp) laid out. Persistent state
// (parameters, gradients, optimizer state, packed weights) is allocated once; the buffers of a
// micro-batch are taken from the TrackingArena when it starts and given back when it ends, as
// the MLP engine does, so the steady state reuses the same blocks.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "backend/compute_engine.hpp"
#include "memory/tracking_arena.hpp"
#include "model/param_layout.hpp"
#include "nn/activation.hpp"
#include "nn/attention.hpp"
#include "nn/embedding.hpp"
#include "nn/layernorm.hpp"
#include "nn/linear.hpp"
#include "nn/loss.hpp"
#include "nn/packed_weights.hpp"
#include "optim/gradient_norm.hpp"
#include "optim/optimizer_state_tensors.hpp"
#include "optim/optimizer_step.hpp"
#include "parallel/parallel_range.hpp"
#include "parallel/worker_team.hpp"
#include "plan/graph_plan.hpp"
#include "trainbench/error.hpp"

namespace trainbench {
namespace {

GraphPlan plan_for(const EngineSpec& spec) {
    if (spec.precision != Precision::fp32)
        throw Error("--precision " + to_string(spec.precision) + " is not available for " + spec.model.summary +
                    " on the CPU yet; use --precision fp32");
    return make_graph_plan(spec.model, std::max(spec.max_micro_batch, spec.max_eval_batch),
                           WorkerTeam::resolved_size(spec.threads), optimizer_state_slots(spec.optimizer),
                           spec.gradient_checkpointing);
}

class GraphEngine final : public ComputeEngine {
public:
    explicit GraphEngine(const EngineSpec& spec) : spec_(spec), plan_(plan_for(spec)), arena_(spec.memory_limit_bytes) {
        WorkerTeam::shared().resize(plan_.threads);
        // The persistent buffers, in the planner's order: parameters, gradients, optimizer state,
        // packed weights.
        const auto& b = plan_.buffers;
        const int64_t p = plan_.params.count;
        params_ = arena_.acquire_array<float>(b[0].category, p);
        grads_ = arena_.acquire_array<float>(b[1].category, p);
        size_t next = 2;
        if (plan_.optimizer_slots > 0) {
            state_ = arena_.acquire_array<float>(b[next++].category, p * plan_.optimizer_slots);
            optimizer_init_state(spec.optimizer, state_, p);
        }
        packed_ = arena_.acquire_array<float>(b[next++].category, plan_.packed_floats);
        std::fill(grads_, grads_ + p, 0.0f);
        tensors_.assign(plan_.model.tensors.size(), nullptr);
        slots_.assign(plan_.slot_elements.size(), nullptr);
        step_buffers_.reserve(plan_.buffers.size());
    }

    void set_weights(const ModelWeights& weights) override {
        scatter_weights(plan_.model, plan_.params, weights, params_);
        packed_stale_ = true;
    }
    ModelWeights weights() const override { return gather_weights(plan_.model, plan_.params, params_); }
    ModelWeights gradients() const override {
        if (grads_stale_) throw Error("gradients read after zero_grad() without a micro-batch");
        return gather_weights(plan_.model, plan_.params, grads_);
    }

    void zero_grad() override { grads_stale_ = true; }

    double forward_backward(const MicroBatch& batch, double normaliser, double loss_scale) override {
        begin_micro_batch(batch);
        forward(batch.count);
        const double loss = loss_forward(batch, static_cast<float>(loss_scale / normaliser));
        backward(batch.count);
        grads_stale_ = false;
        end_micro_batch();
        return loss;
    }

    double grad_norm_squared() override {
        materialise_zero_grad();
        return gradient_norm_squared(grads_, plan_.params.count);
    }

    void optimizer_step(double lr, double grad_multiplier, int64_t step) override {
        materialise_zero_grad();
        optimizer_step_cpu(spec_.optimizer, params_, grads_, state_, plan_.params.count, lr, grad_multiplier, step,
                           plan_.params.decay_end);
        packed_stale_ = true;
    }

    EvalTotals evaluate(const MicroBatch& batch) override {
        begin_micro_batch(batch);
        forward(batch.count);
        EvalTotals totals;
        const OpDesc& loss = plan_.model.ops.back();
        const float* out = tensor(loss.inputs[0]);
        if (loss.kind == OpKind::cross_entropy) {
            totals.loss_sum = softmax_cross_entropy(out, labels_, plan_.model.classes, plan_.rows(loss, batch.count),
                                                    nullptr, 1.0f, &totals.correct);
        } else {
            totals.loss_sum = mean_squared_error(out, batch.targets, batch.count, nullptr, 1.0f);
        }
        end_micro_batch();
        return totals;
    }

    std::vector<NamedTensor> optimizer_state() const override {
        return optimizer_state_tensors(spec_.optimizer, state_, plan_.params.count);
    }

    void set_optimizer_state(const std::vector<NamedTensor>& tensors) override {
        load_optimizer_state_tensors(spec_.optimizer, tensors, state_, plan_.params.count);
    }

    MemoryReport memory() const override { return arena_.report(); }
    void release_cache() override { arena_.release_cache(); }
    void begin_update_timing() override {
        arena_.begin_update();
        update_start_ = std::chrono::steady_clock::now();
    }
    double end_update_timing_ms() override {
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - update_start_).count();
    }

private:
    void materialise_zero_grad() {
        if (!grads_stale_) return;
        std::fill(grads_, grads_ + plan_.params.count, 0.0f);
        grads_stale_ = false;
    }

    float* tensor(int t) const { return tensors_[static_cast<size_t>(t)]; }
    float* grad(int t) const {
        const int64_t offset = plan_.grad_offset[static_cast<size_t>(t)];
        return offset < 0 ? nullptr : grad_block_ + offset;
    }
    float* param(int p) const { return params_ + plan_.params.offset[static_cast<size_t>(p)]; }
    float* param_grad(int p) const { return grads_ + plan_.params.offset[static_cast<size_t>(p)]; }

    // Takes the micro-batch's buffers in the planner's order and stages its input.
    void begin_micro_batch(const MicroBatch& batch) {
        if (batch.count < 1 || batch.count > plan_.micro_batch)
            throw Error("internal: micro-batch of " + std::to_string(batch.count) + " samples for buffers of " +
                        std::to_string(plan_.micro_batch));
        size_t next = plan_.first_step_buffer;
        step_buffers_.clear();
        auto take = [&]() {
            const PlannedBuffer& b = plan_.buffers[next++];
            void* pointer = arena_.acquire(b.category, b.bytes);
            step_buffers_.push_back(pointer);
            return pointer;
        };
        const ModelDesc& m = plan_.model;
        if (m.token_input) {
            tokens_ = static_cast<int32_t*>(take());
            const int64_t n = m.input_per_sample * batch.count;
            std::copy(batch.tokens, batch.tokens + n, tokens_);
            std::copy(batch.labels, batch.labels + n, tokens_ + plan_.token_elements);
            labels_ = tokens_ + plan_.token_elements;
        } else {
            labels_ = batch.labels;
        }
        for (size_t t = 0; t < m.tensors.size(); ++t)
            if (plan_.tensor_slot[t] < 0) tensors_[t] = static_cast<float*>(take());
        for (auto& slot : slots_) slot = static_cast<float*>(take());
        for (size_t t = 0; t < m.tensors.size(); ++t)
            if (plan_.tensor_slot[t] >= 0) tensors_[t] = slots_[static_cast<size_t>(plan_.tensor_slot[t])];
        grad_block_ = static_cast<float*>(take());
        scratch_ = static_cast<float*>(take());
        if (!m.token_input)
            std::memcpy(tensors_[0], batch.x, static_cast<size_t>(m.input_per_sample * batch.count) * sizeof(float));
        refresh_packed_weights();
    }

    void end_micro_batch() {
        for (void* pointer : step_buffers_) arena_.release(pointer);
        step_buffers_.clear();
    }

    // W (with its bias beside it) and W^T of every linear op, packed once per update.
    void refresh_packed_weights() {
        if (!packed_stale_) return;
        const ModelDesc& m = plan_.model;
        for (size_t o = 0; o < m.ops.size(); ++o) {
            const OpDesc& op = m.ops[o];
            if (op.kind != OpKind::linear) continue;
            const PackedLinear& p = plan_.packed[o];
            const float* w = param(op.params[0]);
            float* packed = packed_ + p.forward_offset;
            pack_weights(p.forward, w, packed);
            if (op.params.size() > 1) {
                const float* b = param(op.params[1]);
                std::copy(b, b + p.forward.rows, packed + p.forward.total_floats());
            }
            if (p.transposed_offset >= 0) pack_weights(p.transposed, w, packed_ + p.transposed_offset);
        }
        packed_stale_ = false;
    }

    void forward(int64_t n) {
        const ModelDesc& m = plan_.model;
        for (size_t o = 0; o < m.ops.size(); ++o) forward_op(static_cast<int>(o), n);
    }

    void forward_op(int o, int64_t n) {
        const OpDesc& op = plan_.model.ops[static_cast<size_t>(o)];
        const int64_t rows = plan_.rows(op, n);
        switch (op.kind) {
            case OpKind::linear: {
                const PackedLinear& p = plan_.packed[static_cast<size_t>(o)];
                const float* packed = packed_ + p.forward_offset;
                packed_linear_forward(p.forward, packed, op.params.size() > 1 ? packed + p.forward.total_floats() : nullptr,
                                      tensor(op.inputs[0]), tensor(op.outputs[0]), rows);
                return;
            }
            case OpKind::activation:
                activation_forward(op.activation, tensor(op.inputs[0]), tensor(op.outputs[0]),
                                   plan_.model.tensors[static_cast<size_t>(op.outputs[0])].per_sample * n);
                return;
            case OpKind::embedding: {
                const auto& wte = plan_.model.params[static_cast<size_t>(op.params[0])];
                embedding_forward(tokens_, param(op.params[0]), param(op.params[1]), tensor(op.outputs[0]), n,
                                  op.rows_per_sample, wte.shape[1]);
                return;
            }
            case OpKind::layernorm: {
                const int64_t C = plan_.model.params[static_cast<size_t>(op.params[0])].shape[0];
                layernorm_forward(tensor(op.inputs[0]), param(op.params[0]), param(op.params[1]), tensor(op.outputs[0]),
                                  tensor(op.outputs[1]), tensor(op.outputs[2]), rows, C);
                return;
            }
            case OpKind::attention: {
                const int64_t C = plan_.model.tensors[static_cast<size_t>(op.outputs[0])].per_sample / op.rows_per_sample;
                attention_forward(tensor(op.inputs[0]), tensor(op.outputs[0]), tensor(op.outputs[1]), n,
                                  op.rows_per_sample, C, op.heads);
                return;
            }
            case OpKind::residual_add: {
                const float* a = tensor(op.inputs[0]);
                const float* b = tensor(op.inputs[1]);
                float* out = tensor(op.outputs[0]);
                const int64_t count = plan_.model.tensors[static_cast<size_t>(op.outputs[0])].per_sample * n;
                parallel_range(count, 1, [&](int64_t first, int64_t end) {
#pragma omp simd
                    for (int64_t i = first; i < end; ++i) out[i] = a[i] + b[i];
                });
                return;
            }
            case OpKind::cross_entropy:
            case OpKind::mean_squared_error: return;  // the loss runs in loss_forward / evaluate
        }
    }

    double loss_forward(const MicroBatch& batch, float grad_scale) {
        const OpDesc& loss = plan_.model.ops.back();
        const int in = loss.inputs[0];
        if (loss.kind == OpKind::cross_entropy)
            return softmax_cross_entropy(tensor(in), labels_, plan_.model.classes, plan_.rows(loss, batch.count), grad(in),
                                         grad_scale, nullptr);
        return mean_squared_error(tensor(in), batch.targets, batch.count, grad(in), grad_scale);
    }

    void backward(int64_t n) {
        const ModelDesc& m = plan_.model;
        int resident_segment = plan_.last_segment;
        for (int o = static_cast<int>(m.ops.size()) - 2; o >= 0; --o) {
            const int segment = m.ops[static_cast<size_t>(o)].segment;
            if (plan_.checkpointing && segment >= 0 && segment != resident_segment) {
                // Gradient checkpointing: rebuild the segment's dropped tensors from its kept input.
                for (size_t r = 0; r < m.ops.size(); ++r)
                    if (m.ops[r].segment == segment) forward_op(static_cast<int>(r), n);
                resident_segment = segment;
            }
            backward_op(o, n);
        }
    }

    GradientWrite param_write(int o, size_t k) const {
        return grads_stale_ ? plan_.first_param_write[static_cast<size_t>(o)][k] : GradientWrite::accumulate;
    }

    void backward_op(int o, int64_t n) {
        const OpDesc& op = plan_.model.ops[static_cast<size_t>(o)];
        const int64_t rows = plan_.rows(op, n);
        const float* dout = grad(op.outputs.empty() ? -1 : op.outputs[0]);
        switch (op.kind) {
            case OpKind::linear: {
                const auto& shape = plan_.model.params[static_cast<size_t>(op.params[0])].shape;
                const int64_t out = shape[0], in = shape[1];
                float* dbias = op.params.size() > 1 ? param_grad(op.params[1]) : nullptr;
                float* dinput = grad(op.inputs[0]);
                const PackedLinear& p = plan_.packed[static_cast<size_t>(o)];
                if (dinput) {
                    linear_backward_packed(p.transposed, packed_ + p.transposed_offset, tensor(op.inputs[0]), dout,
                                           param_grad(op.params[0]), dbias, dinput, in, out, rows, param_write(o, 0));
                } else {
                    linear_weight_grad(tensor(op.inputs[0]), dout, param_grad(op.params[0]), dbias, in, out, rows,
                                       param_write(o, 0));
                }
                return;
            }
            case OpKind::activation: {
                // The input's gradient shares the output's buffer: scaled in place.
                float* g = grad(op.inputs[0]);
                activation_backward(op.activation, tensor(op.inputs[0]), tensor(op.outputs[0]), g,
                                    plan_.model.tensors[static_cast<size_t>(op.outputs[0])].per_sample * n);
                return;
            }
            case OpKind::embedding: {
                const auto& wte = plan_.model.params[static_cast<size_t>(op.params[0])];
                embedding_backward(dout, tokens_, param_grad(op.params[0]), param_grad(op.params[1]), n,
                                   op.rows_per_sample, wte.shape[1], wte.shape[0], param_write(o, 0), param_write(o, 1));
                return;
            }
            case OpKind::layernorm: {
                const int64_t C = plan_.model.params[static_cast<size_t>(op.params[0])].shape[0];
                layernorm_backward(dout, tensor(op.inputs[0]), param(op.params[0]), tensor(op.outputs[1]),
                                   tensor(op.outputs[2]), grad(op.inputs[0]), param_grad(op.params[0]),
                                   param_grad(op.params[1]), rows, C, plan_.input_write[static_cast<size_t>(o)][0],
                                   param_write(o, 0), scratch_);
                return;
            }
            case OpKind::attention: {
                const int64_t C = plan_.model.tensors[static_cast<size_t>(op.outputs[0])].per_sample / op.rows_per_sample;
                attention_backward(dout, tensor(op.inputs[0]), tensor(op.outputs[1]), grad(op.inputs[0]), n,
                                   op.rows_per_sample, C, op.heads, scratch_);
                return;
            }
            case OpKind::residual_add: {
                const int64_t count = plan_.model.tensors[static_cast<size_t>(op.outputs[0])].per_sample * n;
                for (size_t k = 0; k < 2; ++k) {
                    float* d = grad(op.inputs[k]);
                    if (!d) continue;
                    const bool add = plan_.input_write[static_cast<size_t>(o)][k] == GradientWrite::accumulate;
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
            case OpKind::cross_entropy:
            case OpKind::mean_squared_error: return;
        }
    }

    EngineSpec spec_;
    GraphPlan plan_;
    TrackingArena arena_;
    float* params_ = nullptr;
    float* grads_ = nullptr;
    float* state_ = nullptr;
    float* packed_ = nullptr;
    bool packed_stale_ = true;
    bool grads_stale_ = false;
    std::vector<float*> tensors_;
    std::vector<float*> slots_;
    std::vector<void*> step_buffers_;
    float* grad_block_ = nullptr;
    float* scratch_ = nullptr;
    int32_t* tokens_ = nullptr;
    const int32_t* labels_ = nullptr;
    std::chrono::steady_clock::time_point update_start_;
};

}  // namespace

BytesByCategory plan_cpu_graph_memory(const EngineSpec& spec) { return plan_for(spec).planned_bytes(); }

std::unique_ptr<ComputeEngine> make_cpu_graph_engine(const EngineSpec& spec) {
    return std::make_unique<GraphEngine>(spec);
}

}  // namespace trainbench
