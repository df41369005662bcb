// The CPU engine: Eigen products over buffers from the TrackingArena. Persistent state
// (parameters, gradients, optimizer state, fp32 master weights) is allocated once; the
// activations and workspace of a micro-batch are taken from the arena when it starts and
// given back when it ends, as a framework's caching allocator does, so they show up as
// activations during the step and as cache between steps, and the steady state reuses the
// same blocks without touching the system allocator.
#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/compute_engine.hpp"
#include "backend/cpu/cpu_buffer_plan.hpp"
#include "model/param_layout.hpp"
#include "memory/tracking_arena.hpp"
#include "nn/activation.hpp"
#include "nn/linear.hpp"
#include "nn/loss.hpp"
#include "nn/packed_weights.hpp"
#include "optim/gradient_norm.hpp"
#include "optim/optimizer_state_tensors.hpp"
#include "optim/optimizer_step.hpp"
#include "parallel/parallel_range.hpp"
#include "parallel/worker_team.hpp"
#include "precision/half_float.hpp"
#include "trainbench/error.hpp"

namespace trainbench {
namespace {

class CpuEngine final : public ComputeEngine {
public:
    explicit CpuEngine(const EngineSpec& spec)
        : spec_(spec), plan_(make_cpu_buffer_plan(spec)), params_(make_param_layout(spec.model)),
          classification_(spec.model.classes > 0), arena_(spec.memory_limit_bytes) {
        WorkerTeam::shared().resize(plan_.threads);

        const int64_t p = plan_.parameter_count;
        if (plan_.half) {
            master_ = arena_.acquire_array<float>(MemoryCategory::master_weights, p);
            params16_ = arena_.acquire_array<uint16_t>(MemoryCategory::parameters, p);
        } else {
            master_ = arena_.acquire_array<float>(MemoryCategory::parameters, p);
        }
        packed_ = arena_.acquire_array<float>(MemoryCategory::workspace, plan_.packed_floats);
        grads_ = arena_.acquire_array<float>(MemoryCategory::gradients, p);
        std::fill(grads_, grads_ + p, 0.0f);
        if (plan_.optimizer_slots > 0) {
            // One block: the update rules take the slots as consecutive runs of p floats.
            state_ = arena_.acquire_array<float>(MemoryCategory::optimizer_state, p * plan_.optimizer_slots);
            optimizer_init_state(spec.optimizer, state_, p);
        }
        a_slots_.assign(static_cast<size_t>(plan_.hidden_layers + 1), nullptr);
        z_slots_.assign(static_cast<size_t>(plan_.hidden_layers + 1), nullptr);
        recompute_a_.reserve(static_cast<size_t>(plan_.recompute_slots()));
        recompute_z_.reserve(static_cast<size_t>(plan_.recompute_slots()));
    }

    void set_weights(const ModelWeights& weights) override {
        scatter_weights(spec_.model, params_, weights, master_);
        refresh_16bit_weights();
        packed_stale_ = true;
    }

    ModelWeights weights() const override { return gather_weights(spec_.model, params_, master_); }

    // The next backward pass overwrites the gradients instead of adding to them, which saves
    // a pass over all of them per update.
    void zero_grad() override { grads_stale_ = true; }

    double forward_backward(const MicroBatch& batch, double normaliser, double loss_scale) override {
        check_batch(batch);
        acquire_step_buffers();
        const int64_t n = batch.count;
        const float* logits = forward(batch, n);
        float* grad = g_[0];
        const float grad_scale = static_cast<float>(loss_scale / normaliser);
        const double loss = classification_
            ? softmax_cross_entropy(logits, batch.labels, plan_.layers.back().out, n, grad, grad_scale, nullptr)
            : mean_squared_error(logits, batch.targets, n, grad, grad_scale);
        backward(n);
        grads_stale_ = false;
        release_step_buffers();
        return loss;
    }

    double grad_norm_squared() override {
        materialise_zero_grad();
        return gradient_norm_squared(grads_, plan_.parameter_count);
    }

    void optimizer_step(double lr, double grad_multiplier, int64_t step) override {
        materialise_zero_grad();
        optimizer_step_cpu(spec_.optimizer, master_, grads_, state_,
                           plan_.parameter_count, lr, grad_multiplier, step);
        refresh_16bit_weights();
        packed_stale_ = true;
    }

    EvalTotals evaluate(const MicroBatch& batch) override {
        check_batch(batch);
        acquire_step_buffers();
        const float* logits = forward(batch, batch.count);
        EvalTotals totals;
        if (classification_) {
            totals.loss_sum = softmax_cross_entropy(logits, batch.labels, plan_.layers.back().out, batch.count,
                                                    nullptr, 1.0f, &totals.correct);
        } else {
            totals.loss_sum = mean_squared_error(logits, batch.targets, batch.count, nullptr, 1.0f);
        }
        release_step_buffers();
        return totals;
    }

    std::vector<NamedTensor> optimizer_state() const override {
        return optimizer_state_tensors(spec_.optimizer, state_, plan_.parameter_count);
    }

    void set_optimizer_state(const std::vector<NamedTensor>& tensors) override {
        load_optimizer_state_tensors(spec_.optimizer, tensors, state_, plan_.parameter_count);
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
    void check_batch(const MicroBatch& batch) const {
        if (batch.count < 1 || batch.count > plan_.micro_batch)
            throw Error("internal: micro-batch of " + std::to_string(batch.count) + " samples for buffers of " +
                        std::to_string(plan_.micro_batch));
    }

    // For callers that read the gradients of an update with no micro-batch in it.
    void materialise_zero_grad() {
        if (!grads_stale_) return;
        std::fill(grads_, grads_ + plan_.parameter_count, 0.0f);
        grads_stale_ = false;
    }

    void refresh_16bit_weights() {
        if (plan_.half) store_16bit(spec_.precision, master_, params16_, plan_.parameter_count);
    }

    // Per-micro-batch buffers: the saved activations and the workspace.
    void acquire_step_buffers() {
        const int64_t mb = plan_.micro_batch;
        const int64_t e = plan_.element_bytes();
        auto take = [&](MemoryCategory c, int64_t bytes) { return arena_.acquire(c, bytes); };
        a_slots_[0] = take(MemoryCategory::activations, plan_.layers.front().in * mb * e);
        recompute_a_.clear();
        recompute_z_.clear();
        for (int64_t l = 1; l <= plan_.hidden_layers; ++l) {
            if (!plan_.kept(l)) continue;
            const int64_t width = plan_.layers[l].in;
            a_slots_[l] = take(MemoryCategory::activations, width * mb * e);
            z_slots_[l] = plan_.save_preactivation ? take(MemoryCategory::activations, width * mb * e) : nullptr;
        }
        for (int64_t r = 0; r < plan_.recompute_slots(); ++r) {
            recompute_a_.push_back(take(MemoryCategory::activations, plan_.widest_hidden * mb * e));
            recompute_z_.push_back(plan_.save_preactivation
                                       ? take(MemoryCategory::activations, plan_.widest_hidden * mb * e)
                                       : nullptr);
        }
        for (int64_t l = 1; l <= plan_.hidden_layers; ++l) {
            if (plan_.kept(l)) continue;
            a_slots_[l] = recompute_a_[(l % plan_.segment) - 1];
            z_slots_[l] = recompute_z_[(l % plan_.segment) - 1];
        }
        g_[0] = static_cast<float*>(take(MemoryCategory::workspace, plan_.widest * mb * 4));
        g_[1] = static_cast<float*>(take(MemoryCategory::workspace, plan_.widest * mb * 4));
        if (plan_.half) {
            wide_a_ = static_cast<float*>(take(MemoryCategory::workspace, plan_.widest * mb * 4));
            wide_z_ = static_cast<float*>(take(MemoryCategory::workspace, plan_.widest * mb * 4));
            wide_w_ = static_cast<float*>(take(MemoryCategory::workspace, plan_.largest_layer_parameters * 4));
        }
        resident_segment_ = -1;
    }

    void release_step_buffers() {
        for (int64_t l = 0; l <= plan_.hidden_layers; ++l) {
            if (!plan_.kept(l)) continue;
            arena_.release(a_slots_[l]);
            arena_.release(z_slots_[l]);
        }
        for (size_t r = 0; r < recompute_a_.size(); ++r) {
            arena_.release(recompute_a_[r]);
            arena_.release(recompute_z_[r]);
        }
        arena_.release(g_[0]);
        arena_.release(g_[1]);
        if (plan_.half) {
            arena_.release(wide_a_);
            arena_.release(wide_z_);
            arena_.release(wide_w_);
        }
    }

    // Weights of layer i as fp32 for a product: the master copy, or the 16-bit working copy
    // widened into the workspace.
    const float* layer_weights(size_t i) {
        const auto& slice = plan_.layers[i];
        if (!plan_.half) return master_ + slice.weight_offset;
        load_16bit(spec_.precision, params16_ + slice.weight_offset, wide_w_, slice.in * slice.out + slice.out);
        return wide_w_;
    }
    const float* layer_bias(size_t i, const float* weights) const {
        const auto& slice = plan_.layers[i];
        return plan_.half ? weights + slice.in * slice.out : master_ + slice.bias_offset;
    }

    // Packs every layer's W for the forward products (with its bias beside it) and W^T for the
    // input gradients, once per update: the first forward pass after the weights changed does it.
    void refresh_packed_weights() {
        if (!packed_stale_) return;
        for (size_t i = 0; i < plan_.layers.size(); ++i) {
            const auto& slice = plan_.layers[i];
            const float* w = layer_weights(i);
            const float* b = layer_bias(i, w);
            float* packed = packed_ + slice.packed_offset;
            pack_weights(slice.packed, w, packed);
            std::copy(b, b + slice.out, packed + slice.packed.total_floats());
            if (i > 0) pack_weights(slice.packed_transposed, w, packed_ + slice.packed_transposed_offset);
        }
        packed_stale_ = false;
    }

    void packed_forward(size_t i, const float* input, float* output, int64_t n) const {
        const auto& slice = plan_.layers[i];
        const float* packed = packed_ + slice.packed_offset;
        packed_linear_forward(slice.packed, packed, packed + slice.packed.total_floats(), input, output, n);
    }

    // Runs hidden layer l (input A_l) storing A_{l+1} (and z). `input` holds A_l as fp32;
    // returns the fp32 values of A_{l+1} (a slot in fp32 mode, wide_a_ in 16-bit mode).
    float* hidden_forward(int64_t l, const float* input, int64_t n) {
        const auto& slice = plan_.layers[l];
        const int64_t count = slice.out * n;
        const int64_t next = l + 1;
        if (!plan_.half) {
            float* a = static_cast<float*>(a_slots_[next]);
            float* z = plan_.save_preactivation ? static_cast<float*>(z_slots_[next]) : a;
            packed_forward(l, input, z, n);
            activation_forward(plan_.activation, z, a, count);
            return a;
        }
        packed_forward(l, input, wide_z_, n);
        round_to_16bit(spec_.precision, wide_z_, count);
        if (plan_.save_preactivation) store_16bit(spec_.precision, wide_z_, static_cast<uint16_t*>(z_slots_[next]), count);
        activation_forward(plan_.activation, wide_z_, wide_a_, count);
        store_16bit(spec_.precision, wide_a_, static_cast<uint16_t*>(a_slots_[next]), count);
        load_16bit(spec_.precision, static_cast<uint16_t*>(a_slots_[next]), wide_a_, count);
        return wide_a_;
    }

    const float* forward(const MicroBatch& batch, int64_t n) {
        refresh_packed_weights();
        const int64_t input_count = plan_.layers.front().in * n;
        const float* current;
        if (plan_.half) {
            store_16bit(spec_.precision, batch.x, static_cast<uint16_t*>(a_slots_[0]), input_count);
            load_16bit(spec_.precision, static_cast<uint16_t*>(a_slots_[0]), wide_a_, input_count);
            current = wide_a_;
        } else {
            std::memcpy(a_slots_[0], batch.x, static_cast<size_t>(input_count) * sizeof(float));
            current = static_cast<const float*>(a_slots_[0]);
        }
        for (int64_t l = 0; l < plan_.hidden_layers; ++l) {
            current = hidden_forward(l, current, n);
            if (!plan_.kept(l + 1)) resident_segment_ = (l + 1) / plan_.segment;
        }
        const size_t last = plan_.layers.size() - 1;
        packed_forward(last, current, g_[0], n);
        if (plan_.half) round_to_16bit(spec_.precision, g_[0], plan_.layers[last].out * n);
        return g_[0];
    }

    // Gradient checkpointing: rebuild the dropped activations of l's segment from the
    // checkpoint that starts it.
    void ensure_resident(int64_t l, int64_t n) {
        if (plan_.kept(l) || resident_segment_ == l / plan_.segment) return;
        const int64_t start = (l / plan_.segment) * plan_.segment;
        const int64_t end = std::min(start + plan_.segment - 1, plan_.hidden_layers);
        const float* current = activation_f32(start, n, wide_a_);
        for (int64_t k = start; k < end; ++k) current = hidden_forward(k, current, n);
        resident_segment_ = l / plan_.segment;
    }

    // fp32 values of A_l: the slot itself, or the 16-bit slot widened into `scratch`.
    const float* activation_f32(int64_t l, int64_t n, float* scratch) {
        if (!plan_.half) return static_cast<const float*>(a_slots_[l]);
        load_16bit(spec_.precision, static_cast<const uint16_t*>(a_slots_[l]), scratch, plan_.layers[l].in * n);
        return scratch;
    }
    const float* preactivation_f32(int64_t l, int64_t n, float* scratch) {
        if (!plan_.save_preactivation) return nullptr;
        if (!plan_.half) return static_cast<const float*>(z_slots_[l]);
        load_16bit(spec_.precision, static_cast<const uint16_t*>(z_slots_[l]), scratch, plan_.layers[l].in * n);
        return scratch;
    }

    void backward(int64_t n) {
        int current = 0;  // g_[current] holds dZ of the layer being processed
        for (int64_t j = static_cast<int64_t>(plan_.layers.size()) - 1; j >= 0; --j) {
            const auto& slice = plan_.layers[j];
            if (plan_.half) round_to_16bit(spec_.precision, g_[current], slice.out * n);
            if (j > 0) ensure_resident(j, n);
            const float* input = activation_f32(j, n, wide_a_);
            const GradientWrite write = grads_stale_ ? GradientWrite::overwrite : GradientWrite::accumulate;
            float* weight_grad = grads_ + slice.weight_offset;
            float* bias_grad = grads_ + slice.bias_offset;
            if (j > 0) {
                linear_backward_packed(slice.packed_transposed, packed_ + slice.packed_transposed_offset, input,
                                       g_[current], weight_grad, bias_grad, g_[1 - current], slice.in, slice.out, n,
                                       write);
                const float* z = preactivation_f32(j, n, wide_z_);
                activation_backward(plan_.activation, z, input, g_[1 - current], slice.in * n);
                current = 1 - current;
            } else {
                linear_weight_grad(input, g_[current], weight_grad, bias_grad, slice.in, slice.out, n, write);
            }
        }
    }

    EngineSpec spec_;
    CpuBufferPlan plan_;
    ParamLayout params_;  // an MLP's store is its state_dict order, as the plan's layer slices
    bool classification_;
    TrackingArena arena_;
    float* master_ = nullptr;
    uint16_t* params16_ = nullptr;
    float* grads_ = nullptr;
    float* packed_ = nullptr;    // plan_.packed_floats: per layer packed W, its bias, packed W^T
    bool packed_stale_ = true;   // the weights changed since they were last packed
    bool grads_stale_ = false;   // zero_grad() was called and no backward pass has run since
    float* state_ = nullptr;  // optimizer_slots runs of parameter_count floats
    std::vector<void*> a_slots_, z_slots_;
    std::vector<void*> recompute_a_, recompute_z_;
    float* g_[2] = {nullptr, nullptr};
    float* wide_a_ = nullptr;
    float* wide_z_ = nullptr;
    float* wide_w_ = nullptr;
    int64_t resident_segment_ = -1;
    std::chrono::steady_clock::time_point update_start_;
};

}  // namespace

std::unique_ptr<ComputeEngine> make_cpu_engine(const EngineSpec& spec) {
    if (spec.model.family != ModelFamily::mlp) return make_cpu_graph_engine(spec);
    return std::make_unique<CpuEngine>(spec);
}

}  // namespace trainbench
