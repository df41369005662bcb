#pragma once
// What every backend's engine shares: the plan, its buffers bound by role, the walk over its ops,
// the 16-bit staging points, the gradients' write modes, evaluation and the logits row for text
// samples. A backend (backend/cpu/graph_engine.cpp, backend/cuda/cuda_engine.cpp) derives from it
// and implements the rest: its memory (taking a micro-batch's buffers and giving them back), its
// op kernels (OpRunner::forward_op and backward_op), its loss, its optimizer step and the few
// primitives below that move and convert values in its memory.
//
// Where each technique lives, one file each (docs/ARCHITECTURE.md has the whole table):
//   exec/gradient_checkpointing.*  the rebuild of a segment before its backward
//   exec/mixed_precision.cpp       the staging points: where 16-bit tensors are widened and rounded
//   exec/gradient_accumulation.cpp the write modes: the update's first micro-batch writes, later ones add
//   exec/zero_sharding.*           ZeRO-2's gradient buckets, reduced from the walk's hook
#include <cstdint>

#include "backend/compute_engine.hpp"
#include "exec/buffer_bindings.hpp"
#include "exec/graph_walk.hpp"
#include "plan/graph_plan.hpp"

namespace trainbench {

class PlanExecutor : public ComputeEngine, protected OpRunner {
public:
    void zero_grad() override;
    // The forward pass and the loss, a plan's micro-batch of samples at a time.
    EvalTotals evaluate(const MicroBatch& batch) override;
    void logits_row(const MicroBatch& batch, int64_t row, float* out) override;

protected:
    explicit PlanExecutor(GraphPlan plan);
    ~PlanExecutor() override = default;

    // --- What a backend implements besides its op kernels.
    // Takes a micro-batch's buffers, binds them by role and loads its inputs (and labels).
    virtual void begin_micro_batch(const MicroBatch& batch) = 0;
    // Gives them back.
    virtual void end_micro_batch() = 0;
    // The loss of the forward pass just run, summed, with no gradient.
    virtual EvalTotals evaluation_loss(const MicroBatch& batch) = 0;
    // Values in the backend's memory: 16-bit codes widened to fp32, fp32 values rounded to codes
    // (in the run's 16-bit precision), fp32 values set to zero, and fp32 values copied to the host.
    virtual void widen_16bit(const void* codes, float* values, int64_t count) const = 0;
    virtual void round_to_codes(const float* values, void* codes, int64_t count) const = 0;
    virtual void fill_zeros(float* values, int64_t count) = 0;
    virtual void copy_to_host(const float* values, float* host, int64_t count) = 0;

    // --- The walk (exec/graph_walk.hpp): every op's forward; the backward from the loss down,
    // rebuilding checkpointed segments other than `resident_segment` first.
    void forward(int64_t n) { walk_forward(plan_, *this, n); }
    void backward(int64_t n, int resident_segment) { walk_backward(plan_, *this, n, resident_segment); }

    // --- Tensors.
    int64_t elements(int t, int64_t samples) const { return plan_.model.tensors[static_cast<size_t>(t)].per_sample * samples; }
    // Tensor t's buffer: fp32 values, or 16-bit codes where the plan stores it in 16 bits.
    void* stored(int t) const { return buffers_.tensors[static_cast<size_t>(t)]; }
    // The buffer of a tensor stored in fp32 (every tensor in fp32 runs, statistics in 16-bit ones).
    float* tensor(int t) const { return static_cast<float*>(stored(t)); }
    uint16_t* tensor_16bit(int t) const { return static_cast<uint16_t*>(stored(t)); }
    // Tensor t's gradient in the activation-gradient block; null where it needs none.
    float* grad(int t) const {
        if (t < 0) return nullptr;
        const int64_t offset = plan_.grad_offset[static_cast<size_t>(t)];
        return offset < 0 ? nullptr : buffers_.activation_gradients + offset;
    }

    // --- Mixed precision's staging points (exec/mixed_precision.cpp).
    // fp32 values of tensor t for a kernel to read: its buffer, or its 16-bit codes widened into
    // `staging`.
    const float* read(int t, int64_t samples, float* staging) const;
    // An op's input k, widened into input staging k where it is stored in 16 bits.
    const float* input(const OpDesc& op, size_t k, int64_t samples) const;
    // Where an op computes its output k: its buffer, or the output staging that store_outputs
    // rounds into it.
    float* output(const OpDesc& op, size_t k) const;
    void store_outputs(const OpDesc& op, int64_t samples) const;
    // An output the backward reads again, widened into the staging it was computed in.
    const float* saved_output(const OpDesc& op, size_t k, int64_t samples) const;

    // --- Gradient accumulation's write modes (exec/gradient_accumulation.cpp).
    // zero_grad() left the gradients to be written by the next backward instead of zeroed now;
    // where nothing writes them before they are read, they are zeroed here.
    void materialise_zero_grad();
    // A backward pass begins: it writes the gradients if it is the update's first, else adds.
    void begin_gradient_pass() { first_micro_batch_ = grads_stale_; }
    void end_gradient_pass() { grads_stale_ = false; }
    GradientWrite param_write(int o, size_t k) const { return plan_.param_write(o, k, grads_stale_); }
    GradientWrite input_write(int o, size_t k) const { return plan_.input_write[static_cast<size_t>(o)][k]; }
    // How ZeRO-2 puts a reduced bucket into the shard's gradients (exec/zero_sharding.hpp).
    GradientWrite bucket_write() const { return first_micro_batch_ ? GradientWrite::overwrite : GradientWrite::accumulate; }

    const GraphPlan plan_;
    BufferBindings buffers_;  // the plan's buffers by role (a micro-batch's while a pass holds them)
    // zero_grad() was called and no backward pass has run since.
    bool grads_stale_ = false;

private:
    // The backward pass running (or the last one) is the update's first.
    bool first_micro_batch_ = false;
};

}  // namespace trainbench
