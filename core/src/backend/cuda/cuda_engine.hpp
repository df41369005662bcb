#pragma once
// The CUDA implementation of ComputeEngine: an MLP trained on one GPU with cuBLASLt products
// and the engine's own kernels, every device byte from the caching DeviceAllocator.
//
// Data layout: activations are column-major [features x batch] (one sample per column, like
// the CPU engine's micro-batches); weights are torch's row-major [out, in], i.e. column-major
// [in x out], so the forward product is Z = op_T(W)·A. Parameters, gradients and optimizer
// state are each one flat allocation; the optimizer runs as one kernel over all of them.
#include <cuda_runtime.h>

#include <memory>

#include "backend/compute_engine.hpp"
#include "backend/cuda/device_allocator.hpp"
#include "backend/cuda/engine_layout.hpp"
#include "backend/cuda/gemm.hpp"

namespace trainbench::cuda {

class CudaEngine final : public ComputeEngine {
public:
    explicit CudaEngine(const EngineSpec& spec);
    ~CudaEngine() override;

    void set_weights(const ModelWeights& weights) override;
    ModelWeights weights() const override;
    void zero_grad() override;
    double forward_backward(const MicroBatch& batch, double normaliser, double loss_scale) override;
    double grad_norm_squared() override;
    void optimizer_step(double lr, double grad_multiplier, int64_t step) override;
    EvalTotals evaluate(const MicroBatch& batch) override;
    std::vector<NamedTensor> optimizer_state() const override;
    void set_optimizer_state(const std::vector<NamedTensor>& state) override;
    MemoryReport memory() const override;
    void release_cache() override;
    void begin_update_timing() override;
    double end_update_timing_ms() override;
    std::pair<int64_t, int64_t> device_memory() const override;

private:
    // --- one micro-batch (cuda_engine_passes.cpp)
    void stage_batch(const MicroBatch& batch);  // input, labels/targets into the device buffers
    void forward_layers(int first, int last, int64_t count);  // 1-based, inclusive
    void forward_layer(int layer, int64_t count);
    void loss_and_gradient(int64_t count, float grad_scale, bool with_gradient);
    void backward(int64_t count);
    void recompute_segment_ending_at(int layer, int64_t count);

    // --- addresses
    void* activation(int layer) const;     // a_l, l = 0..L-1
    void* preactivation(int layer) const;  // z_l (gelu)
    void* layer_output(int layer) const;   // where the GEMM of layer l writes
    void* logits() const;
    const void* working_weight(int layer) const;  // in the storage type
    const void* working_bias(int layer) const;
    void* workspace_at(int64_t offset) const;

    void create_resources();
    void destroy_handles() noexcept;
    void acquire_activations();
    void release_activations();
    void activate_device() const;
    std::vector<float> download(const float* device, int64_t n) const;
    void upload_parameters(const std::vector<float>& flat);
    void materialise_zero_grad();  // for readers of an update's gradients with no micro-batch in it

    EngineSpec spec_;
    EngineLayout layout_;
    int device_ = 0;
    mutable DeviceAllocator allocator_;
    std::unique_ptr<GemmRunner> gemm_;
    cudaStream_t compute_stream_ = nullptr;
    cudaStream_t copy_stream_ = nullptr;
    cudaEvent_t upload_done_ = nullptr;     // staged inputs reached the device
    cudaEvent_t inputs_consumed_ = nullptr; // the device input buffers may be overwritten
    cudaEvent_t timing_start_ = nullptr;
    cudaEvent_t timing_stop_ = nullptr;

    DeviceBlock master_;        // fp32 parameters (the `parameters` block itself in fp32 runs)
    DeviceBlock working_;       // 16-bit copy, mixed precision only
    DeviceBlock grads_;
    DeviceBlock optimizer_state_;
    DeviceBlock workspace_;
    DeviceBlock preload_;
    DeviceBlock activations_;   // acquired per pass, returned to the allocator's cache after

    // Pinned host staging (page-locked so copies run asynchronously on the copy stream).
    float* host_inputs_ = nullptr;
    int32_t* host_labels_ = nullptr;
    float* host_targets_ = nullptr;
    int64_t* host_indices_ = nullptr;
    double* host_results_ = nullptr;  // [0..1] totals, [2] norm

    int current_grad_ = 0;  // which ping-pong buffer holds dZ of the layer being processed
    // zero_grad() was called and no backward pass has run since: the next one overwrites the
    // gradients instead of adding to them (as the CPU engine), saving a pass over all of them.
    bool grads_stale_ = false;
};

}  // namespace trainbench::cuda
