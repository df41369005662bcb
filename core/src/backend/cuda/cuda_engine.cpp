// The CUDA backend: the executor (exec/plan_executor.hpp) walks the plan; this file gives it the
// op kernels (one switch over op kinds for the forward, one for the backward), device memory,
// the loss, the optimizer step and the primitives it needs (widening, rounding, zeroing and
// copying device values). Every model family it has kernels for (MLP, GPT) runs here, on the
// plan the CPU backend runs, so the checkpoint segments, the parameter layout and the rounding
// points are the same. Linear layers are cuBLASLt products (linear_products.hpp),
// attention uses cuBLAS strided-batched products, the rest are the engine's own kernels
// (gpt_kernels.hpp, kernels.hpp), all deterministic, all on one stream. With --fused off the
// attention, the loss and the optimizer run one tensor op at a time as eager PyTorch does
// (eager_kernels.hpp).
//
// Mixed precision (bf16, fp16) keeps the rounding points of exec/mixed_precision.cpp, as the CPU
// backend does, so that both compute the same function: fp32 master weights, gradients and
// optimizer state; activations and a working copy of the weights in 16 bits (the optimizer kernel
// refreshes the copy). A linear op's products read the 16-bit working copy and 16-bit activations
// on the tensor cores with fp32 accumulation; the bias (from the working copy) is added in fp32
// before the one rounding into the output. Its backward rounds the output gradient to 16 bits for
// its products and keeps the input gradient in fp32. LayerNorm, the residual add and the
// activations read and write 16-bit storage directly (widen on load, one rounding on store).
// Attention's products take 16-bit operands too (nn/attention.hpp's rounding points): with --fused
// on they read q, k, v and att in their storage on the tensor cores; --fused off runs its fp32
// kernels on widened copies and rounds att, scale * dS and the output gradient in passes of their
// own. The embedding and the loss widen their 16-bit inputs into the planner's fp32 stagings, run
// their fp32 kernels and round their results. LayerNorm's statistics and all activation gradients
// stay fp32.
//
// Memory: the planner's buffers, with their categories and in its order, except the packed
// weights block and the weight staging, which only the CPU's products read; plus what CUDA
// needs besides (the cuBLAS/cuBLASLt workspace, the loss and norm reductions, the labels of a
// feature model, d(att) of one head for the attention backward, and with --preload-device the
// train split), planned in make_device_plan. The engine allocates exactly that list and
// plan_cuda_engine_memory sums it, so plan == allocation holds
// by construction. Per-micro-batch buffers are taken from the caching DeviceAllocator when a
// pass starts and returned when it ends; the same sizes in the same order come back from its
// cache, so the steady state allocates nothing.

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/backend_support.hpp"
#include "backend/compute_engine.hpp"
#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/device_allocator.hpp"
#include "backend/cuda/eager_kernels.hpp"
#include "backend/cuda/gemm.hpp"
#include "backend/cuda/gpt_kernels.hpp"
#include "backend/cuda/kernels.hpp"
#include "backend/cuda/linear_products.hpp"
#include "backend/cuda/pass_graphs.hpp"
#include "backend/cuda/preloaded_split.hpp"
#include "exec/buffer_bindings.hpp"
#include "exec/plan_executor.hpp"
#include "model/param_layout.hpp"
#include "nn/activation.hpp"
#include "optim/eager_optimizer.hpp"
#include "optim/optimizer_state_tensors.hpp"
#include "optim/optimizer_step.hpp"
#include "plan/cuda_device_plan.hpp"
#include "plan/graph_plan.hpp"
#include "trainbench/error.hpp"

namespace trainbench {
namespace cuda {
namespace {

void check_device_index(int index) {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
        cudaGetLastError();
        throw Error(std::string("--device cuda: no usable NVIDIA GPU (cudaGetDeviceCount: ") + cudaGetErrorString(status) +
                    "); use --device cpu");
    }
    if (index < 0 || index >= count)
        throw Error("--device cuda:" + std::to_string(index) + ": no such GPU (" + std::to_string(count) +
                    " found); use cuda:0" + (count > 1 ? "..cuda:" + std::to_string(count - 1) : std::string()));
}

void run_gemm(GemmRunner& gemm, const GemmCall& call, cudaStream_t stream) {
    if (!gemm.run(call, stream))
        throw Error("cuBLASLt has no algorithm for a " + std::to_string(call.m) + "x" + std::to_string(call.n) + "x" +
                    std::to_string(call.k) + (call.input_type == CUDA_R_32F ? " fp32" : " 16-bit") +
                    " product on this GPU; try --device cpu");
}

class CudaEngine final : public PlanExecutor, private PassLauncher {
public:
    explicit CudaEngine(const EngineSpec& spec)
        : PlanExecutor(plan_cuda_graph(spec)),
          spec_(spec),
          device_plan_(make_device_plan(spec, plan_)),
          device_(spec.device_index),
          allocator_(spec.memory_limit_bytes) {
        check_device_index(device_);
        activate_device();
        try {
            create_resources();
        } catch (...) {
            destroy_handles();  // a destructor does not run for a constructor that threw
            throw;
        }
    }

    ~CudaEngine() override { destroy_handles(); }

    void set_weights(const ModelWeights& weights) override {
        activate_device();
        std::vector<float> store(static_cast<size_t>(layout().count), 0.0f);
        scatter_weights(model(), layout(), weights, store.data());
        upload(buffers_.weights, store);
        round_working_weights();
    }

    ModelWeights weights() const override {
        activate_device();
        return gather_weights(model(), layout(), download(buffers_.weights, layout().count).data());
    }

    ModelWeights gradients() const override {
        activate_device();
        if (grads_stale_) throw Error("gradients read after zero_grad() without a micro-batch");
        return gather_weights(model(), layout(), download(buffers_.gradients, layout().count).data());
    }

    double forward_backward(const MicroBatch& batch, double normaliser, double loss_scale) override {
        activate_device();
        if (!(normaliser > 0.0)) throw Error("loss normaliser must be positive (internal)");
        begin_micro_batch(batch);
        begin_gradient_pass();
        const auto grad_scale = static_cast<float>(loss_scale / normaliser);
        if (spec_.fused && spec_.cuda_graphs)
            replay_pass(batch.count, grad_scale);
        else
            run_pass(batch.count, grad_scale);
        end_gradient_pass();
        const double loss_sum = read_totals()[0];
        end_micro_batch();
        return loss_sum;
    }

    double grad_norm_squared() override {
        activate_device();
        materialise_zero_grad();
        sum_of_squares(buffers_.gradients, layout().count, static_cast<double*>(workspace_at(device_plan_.norm_partials_offset)),
                       static_cast<double*>(workspace_at(device_plan_.norm_result_offset)), stream_);
        TRAINBENCH_CUDA_CHECK(cudaMemcpyAsync(host_results_ + 2, workspace_at(device_plan_.norm_result_offset), sizeof(double),
                                              cudaMemcpyDeviceToHost, stream_));
        TRAINBENCH_CUDA_CHECK(cudaStreamSynchronize(stream_));
        return host_results_[2];
    }

    void optimizer_step(double lr, double grad_multiplier, int64_t step) override {
        activate_device();
        materialise_zero_grad();
        OptimizerLaunch launch;
        launch.params = buffers_.weights;
        launch.grads = buffers_.gradients;
        launch.state = buffers_.optimizer_state;
        launch.n = layout().count;
        launch.decay_end = layout().decay_end;
        launch.params_16 = buffers_.working_weights;
        launch.type_16 = storage_type_for(plan_.precision);
        if (!spec_.fused && has_eager_form(spec_.optimizer))
            optimizer_step_eager_device(spec_.optimizer, launch, lr, grad_multiplier, step,
                                        plan_.optimizer_tensors, buffers_.optimizer_scratch, stream_);
        else
            optimizer_step_device(spec_.optimizer, launch, lr, grad_multiplier, step, stream_);
    }

    std::vector<NamedTensor> optimizer_state() const override {
        activate_device();
        const int64_t n = layout().count;
        const std::vector<float> state = download(buffers_.optimizer_state, n * plan_.optimizer_slots);
        return optimizer_state_tensors(spec_.optimizer, state.data(), n);
    }

    void set_optimizer_state(const std::vector<NamedTensor>& tensors) override {
        activate_device();
        const int64_t n = layout().count;
        std::vector<float> state(static_cast<size_t>(n * plan_.optimizer_slots));
        optimizer_init_state(spec_.optimizer, state.data(), n);
        load_optimizer_state_tensors(spec_.optimizer, tensors, state.data(), n);
        upload(buffers_.optimizer_state, state);
    }

    // The graphs' own device memory (cudaGraphInstantiate's) is the driver's, outside the
    // allocator: the report, the plan and --memory-limit leave it out.
    MemoryReport memory() const override { return allocator_.report(); }
    int64_t graph_launches() const override { return graphs_.launches(); }

    void release_cache() override {
        activate_device();
        TRAINBENCH_CUDA_CHECK(cudaStreamSynchronize(stream_));
        allocator_.release_cache();
    }

    void begin_update_timing() override {
        activate_device();
        allocator_.begin_update();
        TRAINBENCH_CUDA_CHECK(cudaEventRecord(timing_start_, stream_));
    }

    double end_update_timing_ms() override {
        activate_device();
        TRAINBENCH_CUDA_CHECK(cudaEventRecord(timing_stop_, stream_));
        TRAINBENCH_CUDA_CHECK(cudaEventSynchronize(timing_stop_));
        float milliseconds = 0.0f;
        TRAINBENCH_CUDA_CHECK(cudaEventElapsedTime(&milliseconds, timing_start_, timing_stop_));
        return milliseconds;
    }

    std::pair<int64_t, int64_t> device_memory() const override {
        activate_device();
        size_t free_bytes = 0, total_bytes = 0;
        TRAINBENCH_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
        return {static_cast<int64_t>(total_bytes - free_bytes), static_cast<int64_t>(total_bytes)};
    }

private:
    const ModelDesc& model() const { return plan_.model; }
    const ParamLayout& layout() const { return plan_.params; }
    void activate_device() const { TRAINBENCH_CUDA_CHECK(cudaSetDevice(device_)); }
    void* workspace_at(int64_t offset) const { return buffers_.device_workspace + offset; }

    // --- The executor's primitives (exec/plan_executor.hpp) in device memory, on the stream.
    void widen_16bit(const void* codes, float* values, int64_t count) const override {
        convert_to_f32(codes, storage_type_for(plan_.precision), values, count, stream_);
    }
    void round_to_codes(const float* values, void* codes, int64_t count) const override {
        convert_from_f32(values, codes, storage_type_for(plan_.precision), count, stream_);
    }
    void fill_zeros(float* values, int64_t count) override {
        TRAINBENCH_CUDA_CHECK(cudaMemsetAsync(values, 0, count * sizeof(float), stream_));
    }
    // A small synchronous copy: text sampling runs between updates, not inside one.
    void copy_to_host(const float* values, float* host, int64_t count) override {
        TRAINBENCH_CUDA_CHECK(cudaMemcpyAsync(host, values, count * sizeof(float), cudaMemcpyDeviceToHost, stream_));
        TRAINBENCH_CUDA_CHECK(cudaStreamSynchronize(stream_));
    }
    EvalTotals evaluation_loss(const MicroBatch& batch) override {
        loss(batch.count, 0.0f, false);
        const double* sums = read_totals();
        return {.loss_sum = sums[0], .correct = std::llround(sums[1])};
    }
    static bool accumulates(GradientWrite write) { return write == GradientWrite::accumulate; }

    void create_resources() {
        TRAINBENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
        TRAINBENCH_CUDA_CHECK(cudaEventCreate(&timing_start_));
        TRAINBENCH_CUDA_CHECK(cudaEventCreate(&timing_stop_));
        gemm_ = std::make_unique<GemmRunner>();
        TRAINBENCH_CUBLAS_CHECK(cublasCreate(&blas_));
        if (plan_.sixteen_bit()) allow_attention_tile_kernels_shared_memory();

        // Persistent buffers, each bound by its role (see DevicePlan).
        persistent_.reserve(device_plan_.persistent.size());
        for (const PlannedBuffer& b : device_plan_.persistent) {
            persistent_.push_back(allocator_.allocate(b.bytes, b.category));
            buffers_.bind(b, persistent_.back().ptr);
        }

        // cuBLASLt (linear layers) and cuBLAS (attention) share one workspace: both run on the
        // one stream, so their uses never overlap. cublasSetStream resets a handle's workspace,
        // hence the order. cuBLAS's default math mode is true fp32 (no TF32), as the products in
        // gemm.hpp.
        void* gemm_workspace = workspace_at(device_plan_.gemm_workspace_offset);
        gemm_->set_workspace(gemm_workspace, static_cast<size_t>(device_plan_.gemm_workspace_bytes));
        TRAINBENCH_CUBLAS_CHECK(cublasSetStream(blas_, stream_));
        TRAINBENCH_CUBLAS_CHECK(cublasSetWorkspace(blas_, gemm_workspace, static_cast<size_t>(device_plan_.gemm_workspace_bytes)));
        TRAINBENCH_CUBLAS_CHECK(cublasSetMathMode(blas_, CUBLAS_DEFAULT_MATH));

        const int64_t n = layout().count;
        TRAINBENCH_CUDA_CHECK(cudaMemsetAsync(buffers_.weights, 0, n * sizeof(float), stream_));
        round_working_weights();
        TRAINBENCH_CUDA_CHECK(cudaMemsetAsync(buffers_.gradients, 0, n * sizeof(float), stream_));
        if (buffers_.optimizer_state != nullptr) {
            fill_f32(buffers_.optimizer_state, optimizer_initial_state_value(spec_.optimizer), n * plan_.optimizer_slots, stream_);
        }

        // Page-locked staging, so the uploads run asynchronously on the stream.
        const ModelDesc& m = model();
        const int64_t samples = plan_.micro_batch;
        if (m.token_input) {
            TRAINBENCH_CUDA_CHECK(cudaMallocHost(&host_tokens_, 2 * plan_.token_elements * sizeof(int32_t)));
        } else {
            TRAINBENCH_CUDA_CHECK(cudaMallocHost(&host_inputs_, m.input_per_sample * samples * sizeof(float)));
            TRAINBENCH_CUDA_CHECK(cudaMallocHost(&host_labels_, m.loss_terms_per_sample * samples * sizeof(int32_t)));
            TRAINBENCH_CUDA_CHECK(cudaMallocHost(&host_targets_, samples * sizeof(float)));
        }
        TRAINBENCH_CUDA_CHECK(cudaMallocHost(&host_results_, 4 * sizeof(double)));
        if (buffers_.preloaded_split != nullptr) {
            preloaded_ = std::make_unique<PreloadedSplit>(spec_.preload->train, model().classes > 0, device_plan_,
                                                          buffers_.preloaded_split, buffers_.device_workspace, samples, stream_);
        }

        relu_in_epilogue_.assign(m.ops.size(), 0);
        step_blocks_.reserve(device_plan_.per_micro_batch.size());
        // Room for every pass's buffer list, so replaying allocates nothing on the host.
        pass_buffers_.reserve(device_plan_.per_micro_batch.size());
        // Reserve the per-micro-batch buffers once so that the first update does not pay for
        // cudaMalloc; they wait in the allocator's cache between passes.
        acquire_step_buffers();
        end_micro_batch();
        TRAINBENCH_CUDA_CHECK(cudaStreamSynchronize(stream_));
    }

    void destroy_handles() noexcept {
        // No throwing here: a failure means the context is already torn down.
        cudaSetDevice(device_);
        if (stream_) cudaStreamSynchronize(stream_);
        cudaFreeHost(host_tokens_);
        cudaFreeHost(host_inputs_);
        cudaFreeHost(host_labels_);
        cudaFreeHost(host_targets_);
        cudaFreeHost(host_results_);
        preloaded_.reset();
        host_tokens_ = nullptr;
        host_labels_ = nullptr;
        host_inputs_ = host_targets_ = nullptr;
        host_results_ = nullptr;
        graphs_.clear();
        if (timing_start_) cudaEventDestroy(timing_start_);
        if (timing_stop_) cudaEventDestroy(timing_stop_);
        timing_start_ = timing_stop_ = nullptr;
        if (blas_) cublasDestroy(blas_);
        blas_ = nullptr;
        gemm_.reset();
        if (stream_) cudaStreamDestroy(stream_);
        stream_ = nullptr;
    }

    std::vector<float> download(const float* device, int64_t n) const {
        std::vector<float> host(static_cast<size_t>(n));
        if (n == 0) return host;
        TRAINBENCH_CUDA_CHECK(
            cudaMemcpyAsync(host.data(), device, n * sizeof(float), cudaMemcpyDeviceToHost, stream_));
        TRAINBENCH_CUDA_CHECK(cudaStreamSynchronize(stream_));
        return host;
    }

    // Ordered on the stream (pageable memory; `host` outlives the synchronisation).
    void upload(float* device, const std::vector<float>& host) {
        if (host.empty()) return;
        TRAINBENCH_CUDA_CHECK(
            cudaMemcpyAsync(device, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice, stream_));
        TRAINBENCH_CUDA_CHECK(cudaStreamSynchronize(stream_));
    }

    // 16-bit runs: the working copy the products read, rounded from the master weights.
    void round_working_weights() {
        if (buffers_.working_weights != nullptr) convert_from_f32(buffers_.weights, buffers_.working_weights, storage_type_for(plan_.precision), layout().count, stream_);
    }

    // The type the products' operands have: the run's 16-bit type, or f32.
    StorageType products_type() const { return plan_.sixteen_bit() ? storage_type_for(plan_.precision) : StorageType::f32; }
    // --fused on in a 16-bit run: attention multiplies its 16-bit tensors in place on the tensor
    // cores (attention_forward_16bit), with no fp32 copies of them. In the tile kernels att has
    // no buffer (attention_keeps_probabilities): null, which they do not read.
    bool on_16bit_operands(const OpDesc& op) const { return plan_.attention_in_storage(op); }
    StorageType type_of(int t) const { return plan_.stored_16bit(t) ? storage_type_for(plan_.precision) : StorageType::f32; }
    // cuBLASLt's bias epilogue reads its bias in 16-byte units: biases at other offsets of the
    // parameter store are added by a separate pass.
    static bool epilogue_takes(const void* bias) { return reinterpret_cast<uintptr_t>(bias) % 16 == 0; }
    // A parameter's 16-bit working copy (16-bit runs).
    void* working_param(int p) const {
        return reinterpret_cast<char*>(buffers_.working_weights) + layout().offset[static_cast<size_t>(p)] * storage_bytes(storage_type_for(plan_.precision));
    }
    float* param(int p) const { return buffers_.weights + layout().offset[static_cast<size_t>(p)]; }
    float* param_grad(int p) const { return buffers_.gradients + layout().offset[static_cast<size_t>(p)]; }

    // Takes the micro-batch's buffers, each bound by its role.
    void acquire_step_buffers() {
        if (!step_blocks_.empty()) {  // a pass that threw left them held
            TRAINBENCH_CUDA_CHECK(cudaStreamSynchronize(stream_));
            end_micro_batch();
        }
        for (const PlannedBuffer& b : device_plan_.per_micro_batch) {
            step_blocks_.push_back(allocator_.allocate(b.bytes, b.category));
            buffers_.bind(b, step_blocks_.back().ptr);
        }
        buffers_.bind_tensor_views(plan_);
    }

    // Takes the buffers and stages the micro-batch's inputs and labels.
    void begin_micro_batch(const MicroBatch& batch) override {
        activate_device();
        if (batch.count < 1 || batch.count > plan_.micro_batch)
            throw Error("internal: micro-batch of " + std::to_string(batch.count) + " samples for buffers of " +
                        std::to_string(plan_.micro_batch));
        const ModelDesc& m = model();
        const int64_t inputs = m.input_per_sample * batch.count;
        const int64_t terms = m.loss_terms_per_sample * batch.count;
        const bool classification = m.classes > 0;
        // With --preload-device the loop hands over only rows of the train split (x is null).
        // Host values, when given, always win: validation batches carry indices too, but those
        // index the validation split, which is not on the device.
        const bool gathered = !m.token_input && batch.x == nullptr && buffers_.preloaded_split != nullptr && batch.indices != nullptr;
        if (m.token_input ? batch.tokens == nullptr || batch.labels == nullptr
                          : !gathered && (batch.x == nullptr ||
                                          (classification ? batch.labels == nullptr : batch.targets == nullptr)))
            throw Error("micro-batch has no inputs or no labels (internal: null pointer)");
        acquire_step_buffers();
        // The previous pass synchronised before returning, so the staging buffers are free.
        if (m.token_input) {
            const int64_t targets_at = plan_.token_elements;
            std::memcpy(host_tokens_, batch.tokens, inputs * sizeof(int32_t));
            std::memcpy(host_tokens_ + targets_at, batch.labels, terms * sizeof(int32_t));
            TRAINBENCH_CUDA_CHECK(cudaMemcpyAsync(buffers_.tokens, host_tokens_, inputs * sizeof(int32_t),
                                                  cudaMemcpyHostToDevice, stream_));
            TRAINBENCH_CUDA_CHECK(cudaMemcpyAsync(buffers_.tokens + targets_at, host_tokens_ + targets_at,
                                                  terms * sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
            labels_ = buffers_.tokens + targets_at;
            return;
        }
        if (gathered) {
            gather_preloaded(batch);
            return;
        }
        std::memcpy(host_inputs_, batch.x, inputs * sizeof(float));
        // A 16-bit input lands in input staging 0 (it is op 0's input) and is rounded from there.
        const bool round_input = plan_.stored_16bit(0);
        float* landing = round_input ? buffers_.input_staging[0] : tensor(0);
        TRAINBENCH_CUDA_CHECK(
            cudaMemcpyAsync(landing, host_inputs_, inputs * sizeof(float), cudaMemcpyHostToDevice, stream_));
        if (round_input) convert_from_f32(landing, stored(0), storage_type_for(plan_.precision), inputs, stream_);
        if (classification) {
            labels_ = static_cast<int32_t*>(workspace_at(device_plan_.labels_offset));
            std::memcpy(host_labels_, batch.labels, terms * sizeof(int32_t));
            TRAINBENCH_CUDA_CHECK(cudaMemcpyAsync(static_cast<int32_t*>(workspace_at(device_plan_.labels_offset)), host_labels_,
                                                  terms * sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
        } else {
            std::memcpy(host_targets_, batch.targets, batch.count * sizeof(float));
            TRAINBENCH_CUDA_CHECK(cudaMemcpyAsync(workspace_at(device_plan_.targets_offset), host_targets_,
                                                  batch.count * sizeof(float), cudaMemcpyHostToDevice, stream_));
        }
    }

    // --preload-device: the micro-batch's rows gathered on the device (preloaded_split.hpp).
    void gather_preloaded(const MicroBatch& batch) {
        preloaded_->gather(batch.indices, batch.count, stored(0), type_of(0), stream_);
        if (model().classes > 0) labels_ = static_cast<int32_t*>(workspace_at(device_plan_.labels_offset));
    }

    // Gives the buffers back to the allocator's cache; callers have synchronised the stream.
    void end_micro_batch() override {
        for (DeviceBlock& block : step_blocks_) allocator_.release(block);
        step_blocks_.clear();
    }

    // Waits for the pass and reads its loss totals (sum, correct count).
    const double* read_totals() {
        TRAINBENCH_CUDA_CHECK(cudaMemcpyAsync(host_results_, workspace_at(device_plan_.totals_offset), 2 * sizeof(double),
                                              cudaMemcpyDeviceToHost, stream_));
        TRAINBENCH_CUDA_CHECK(cudaStreamSynchronize(stream_));
        return host_results_;
    }


    // A training micro-batch's kernels, enqueued one by one.
    void run_pass(int64_t n, float grad_scale) override {
        forward(n);
        loss(n, grad_scale, true);
        backward(n, plan_.last_segment);
    }

    // The pass replayed as a CUDA graph where it can be (pass_graphs.hpp).
    void replay_pass(int64_t n, float grad_scale) {
        pass_buffers_.clear();
        for (const DeviceBlock& block : step_blocks_) pass_buffers_.push_back(block.ptr);
        graphs_.run(n, grads_stale_, grad_scale, pass_buffers_, *this, stream_);
    }

    // --fused on: a residual add whose sum only a LayerNorm reads (the planner's pair, GraphPlan::
    // fused_with) runs with it in one kernel, when both summands and the sum share a storage
    // type. The planner's other pairs (a product and its activation) are the CPU's epilogues:
    // here each op of those runs alone.
    int fused_layernorm(int residual) const {
        if (!spec_.fused) return -1;
        const OpDesc& op = model().ops[static_cast<size_t>(residual)];
        const int ln = plan_.fused_with[static_cast<size_t>(residual)];
        if (op.kind != OpKind::residual_add || ln < 0 || model().ops[static_cast<size_t>(ln)].kind != OpKind::layernorm)
            return -1;
        const StorageType type = type_of(op.outputs[0]);
        return type_of(op.inputs[0]) == type && type_of(op.inputs[1]) == type ? ln : -1;
    }

    // The ReLU the planner fused with linear op o (GraphPlan::fused_with) when it works in place
    // on the product's output, which cuBLASLt's ReLU + bias epilogue can write; -1 otherwise.
    int in_place_relu_after(int o) const {
        const int with = plan_.fused_with[static_cast<size_t>(o)];
        if (with < 0) return -1;
        const OpDesc& op = model().ops[static_cast<size_t>(with)];
        if (op.kind != OpKind::activation || op.activation != Activation::relu) return -1;
        const int linear_output = model().ops[static_cast<size_t>(o)].outputs[0];
        return plan_.tensor_alias[static_cast<size_t>(op.outputs[0])] == linear_output ? with : -1;
    }

    // The activation the planner fused with linear op o whose backward o's bias pass applies
    // (bias_grad), else -1. The planner gives the activation's input gradient its output
    // gradient's buffer, so the linear's output gradient arrives as the activation's, unscaled.
    int activation_in_bias_pass(int o) const {
        const OpDesc& op = model().ops[static_cast<size_t>(o)];
        const int with = plan_.fused_with[static_cast<size_t>(o)];
        if (op.kind != OpKind::linear || op.params.size() < 2 || with < 0) return -1;
        return model().ops[static_cast<size_t>(with)].kind == OpKind::activation ? with : -1;
    }

    void forward_op(int o, int64_t n) override {
        const ModelDesc& m = model();
        const OpDesc& op = m.ops[static_cast<size_t>(o)];
        const int64_t rows = plan_.rows(op, n);
        const int computed_by = plan_.fused_into[static_cast<size_t>(o)];
        if (computed_by >= 0 && fused_layernorm(computed_by) == o) return;  // its residual's kernel ran it
        if (computed_by >= 0 && relu_in_epilogue_[static_cast<size_t>(o)]) return;  // its product's epilogue ran it
        switch (op.kind) {
            case OpKind::linear: {
                // The operands in the storage type (the working copy in 16-bit runs). Product and
                // bias are summed in fp32 and rounded once into the output, by cuBLASLt's bias
                // epilogue where it takes this bias, else in output staging 0 (16-bit runs) or the
                // output itself, with the bias added by a separate pass. An in-place ReLU the
                // planner fused with the product runs in that epilogue too: ReLU commutes with the
                // rounding, so the values are those of the separate pass.
                const auto& shape = m.params[static_cast<size_t>(op.params[0])].shape;
                const int64_t out = shape[0], in = shape[1];
                const bool sixteen = plan_.sixteen_bit();
                const void* weight = sixteen ? working_param(op.params[0]) : param(op.params[0]);
                const void* bias = op.params.size() > 1 ? (sixteen ? working_param(op.params[1]) : param(op.params[1])) : nullptr;
                const cudaDataType_t operands = cuda_data_type(storage_type_for(plan_.precision));
                const int relu = in_place_relu_after(o);
                if (relu >= 0) relu_in_epilogue_[static_cast<size_t>(relu)] = false;
                if (bias != nullptr && epilogue_takes(bias)) {
                    GemmCall fused =
                        linear_forward_product(in, out, rows, weight, stored(op.inputs[0]), stored(op.outputs[0]), operands,
                                               bias, relu >= 0 ? GemmEpilogue::relu_bias : GemmEpilogue::bias);
                    fused.output_type = cuda_data_type(type_of(op.outputs[0]));
                    if (gemm_->run(fused, stream_)) {
                        if (relu >= 0) relu_in_epilogue_[static_cast<size_t>(relu)] = true;
                        return;
                    }
                    if (relu >= 0) {  // no algorithm with that epilogue: try the bias alone
                        fused.epilogue = GemmEpilogue::bias;
                        if (gemm_->run(fused, stream_)) return;
                    }
                }
                float* result = output(op, 0);
                GemmCall product = linear_forward_product(in, out, rows, weight, stored(op.inputs[0]), result, operands,
                                                          nullptr, GemmEpilogue::none);
                product.output_type = CUDA_R_32F;
                run_gemm(*gemm_, product, stream_);
                if (bias != nullptr)
                    add_bias(result, StorageType::f32, bias, sixteen ? storage_type_for(plan_.precision) : StorageType::f32, out, rows, stream_);
                break;
            }
            case OpKind::activation:
                // Widening, f in fp32 and one rounding, as the staged path would do.
                if (type_of(op.inputs[0]) == type_of(op.outputs[0])) {
                    activation_forward(op.activation, stored(op.inputs[0]), stored(op.outputs[0]), type_of(op.outputs[0]),
                                       elements(op.outputs[0], n), stream_);
                    return;
                }
                activation_forward(op.activation, input(op, 0, n), output(op, 0), StorageType::f32,
                                   elements(op.outputs[0], n), stream_);
                break;
            case OpKind::embedding: {
                const auto& wte = m.params[static_cast<size_t>(op.params[0])];
                embedding_forward(buffers_.tokens, param(op.params[0]), param(op.params[1]), output(op, 0), n,
                                  op.rows_per_sample, wte.shape[1], stream_);
                break;
            }
            case OpKind::layernorm: {
                // outputs 1 and 2, the mean and rstd, are statistics: fp32 in every run.
                const int64_t C = m.params[static_cast<size_t>(op.params[0])].shape[0];
                layernorm_forward(stored(op.inputs[0]), type_of(op.inputs[0]), param(op.params[0]), param(op.params[1]),
                                  stored(op.outputs[0]), type_of(op.outputs[0]), tensor(op.outputs[1]),
                                  tensor(op.outputs[2]), rows, C, stream_);
                return;
            }
            case OpKind::attention: {
                const int64_t C = m.tensors[static_cast<size_t>(op.outputs[0])].per_sample / op.rows_per_sample;
                if (on_16bit_operands(op)) {  // reads and writes the 16-bit storage itself
                    attention_forward_16bit(blas_, stored(op.inputs[0]), stored(op.outputs[0]), stored(op.outputs[1]),
                                            buffers_.attention_scratch, storage_type_for(plan_.precision), n, op.rows_per_sample, C, op.heads,
                                            stream_);
                    return;
                }
                if (spec_.fused)
                    attention_forward(blas_, input(op, 0, n), output(op, 0), output(op, 1), n, op.rows_per_sample, C,
                                      op.heads, stream_);
                else
                    attention_forward_eager(blas_, input(op, 0, n), output(op, 0), output(op, 1), n, op.rows_per_sample,
                                            C, op.heads, products_type(), stream_);
                break;
            }
            case OpKind::residual_add: {
                if (const int ln = fused_layernorm(o); ln >= 0) {
                    const OpDesc& norm = m.ops[static_cast<size_t>(ln)];
                    const int64_t C = m.params[static_cast<size_t>(norm.params[0])].shape[0];
                    residual_layernorm_forward(stored(op.inputs[0]), stored(op.inputs[1]), stored(op.outputs[0]),
                                               type_of(op.outputs[0]), param(norm.params[0]), param(norm.params[1]),
                                               stored(norm.outputs[0]), type_of(norm.outputs[0]),
                                               tensor(norm.outputs[1]), tensor(norm.outputs[2]),
                                               plan_.rows(norm, n), C, stream_);
                    return;
                }
                const StorageType type = type_of(op.outputs[0]);
                if (type_of(op.inputs[0]) == type && type_of(op.inputs[1]) == type) {
                    residual_forward(stored(op.inputs[0]), stored(op.inputs[1]), stored(op.outputs[0]), type,
                                     elements(op.outputs[0], n), stream_);
                    return;
                }
                residual_forward(input(op, 0, n), input(op, 1, n), output(op, 0), StorageType::f32,
                                 elements(op.outputs[0], n), stream_);
                break;
            }
            case OpKind::cross_entropy:
            case OpKind::mean_squared_error: return;  // the loss runs in loss()
            case OpKind::conv2d:  // make_device_plan refuses such models first
            case OpKind::max_pool:
            case OpKind::lora_linear:
            case OpKind::pipeline_output: throw Error(unsupported_op(Backend::cuda, op.kind));
        }
        store_outputs(op, n);
    }

    // Per-term losses and, with_gradient, d(grad_scale * loss)/d(outputs) into the output's
    // gradient; then their sum (and correct count) in the workspace's totals.
    void loss(int64_t n, float grad_scale, bool with_gradient) {
        const ModelDesc& m = model();
        const OpDesc& op = m.ops.back();
        const int in = op.inputs[0];
        auto* sample_loss = static_cast<double*>(workspace_at(device_plan_.sample_loss_offset));
        auto* totals = static_cast<double*>(workspace_at(device_plan_.totals_offset));
        float* dlogits = with_gradient ? grad(in) : nullptr;
        const float* values = read(in, n, buffers_.input_staging[0]);  // 16-bit outputs widened, as on the CPU
        if (op.kind == OpKind::cross_entropy) {
            const int64_t rows = plan_.rows(op, n);
            auto* sample_correct = static_cast<int32_t*>(workspace_at(device_plan_.sample_correct_offset));
            if (spec_.fused)
                softmax_cross_entropy(values, StorageType::f32, labels_, m.classes, rows, grad_scale, dlogits,
                                      sample_loss, sample_correct, stream_);
            else
                softmax_cross_entropy_eager(values, labels_, m.classes, rows, grad_scale, dlogits, sample_loss,
                                            sample_correct, buffers_.kernel_scratch, stream_);
            sum_sample_losses(sample_loss, sample_correct, rows, totals, stream_);
        } else {
            mean_squared_error(values, StorageType::f32, static_cast<const float*>(workspace_at(device_plan_.targets_offset)),
                               n, grad_scale, dlogits, sample_loss, stream_);
            sum_sample_losses(sample_loss, nullptr, n, totals, stream_);
        }
    }

    void backward_op(int o, int64_t n) override {
        const ModelDesc& m = model();
        const OpDesc& op = m.ops[static_cast<size_t>(o)];
        const int64_t rows = plan_.rows(op, n);
        float* dout = grad(op.outputs.empty() ? -1 : op.outputs[0]);  // a linear op's bias pass may scale it in place
        switch (op.kind) {
            case OpKind::linear: {
                const auto& shape = m.params[static_cast<size_t>(op.params[0])].shape;
                const int64_t out = shape[0], in = shape[1];
                // A 16-bit product's operands are 16-bit: its output gradient is rounded into
                // output staging 0 (free in the backward), as the CPU rounds it in place. Where
                // there is a bias, that is done in the bias gradient's pass, which also applies
                // the backward of the activation fused after this op (fp32: in place; 16-bit: into
                // the staging alone, so dout keeps the activation's output gradient, which nothing
                // reads after this op).
                const bool sixteen = plan_.sixteen_bit();
                const StorageType dz_type = sixteen ? storage_type_for(plan_.precision) : StorageType::f32;
                void* dz = sixteen ? buffers_.output_staging[0] : dout;
                if (op.params.size() > 1) {
                    const int a = activation_in_bias_pass(o);
                    ActivationInBiasPass activation;
                    if (a >= 0) {
                        const OpDesc& act = m.ops[static_cast<size_t>(a)];
                        const int saved = activation_saved_tensor(act);
                        activation = {.kind = act.activation, .saved = stored(saved), .saved_type = type_of(saved)};
                    }
                    bias_grad(dout, out, rows, a >= 0 ? &activation : nullptr, sixteen || a >= 0 ? dz : nullptr, dz_type,
                              static_cast<float*>(workspace_at(device_plan_.bias_partials_offset)), param_grad(op.params[1]),
                              accumulates(param_write(o, 1)), stream_);
                } else if (sixteen) {
                    convert_from_f32(dout, dz, dz_type, elements(op.outputs[0], n), stream_);
                }
                const cudaDataType_t operands = cuda_data_type(dz_type);
                run_gemm(*gemm_,
                         linear_weight_grad_product(in, out, rows, stored(op.inputs[0]), dz, param_grad(op.params[0]),
                                                    operands, accumulates(param_write(o, 0))),
                         stream_);
                // The planner gives a linear op's input no other reader, so the product overwrites it.
                if (float* dinput = grad(op.inputs[0]))
                    run_gemm(*gemm_,
                             linear_input_grad_product(in, out, rows,
                                                       sixteen ? working_param(op.params[0]) : param(op.params[0]), dz,
                                                       dinput, operands),
                             stream_);
                return;
            }
            case OpKind::activation: {
                const int product = plan_.fused_into[static_cast<size_t>(o)];
                if (product >= 0 && activation_in_bias_pass(product) == o) return;  // the product's bias pass applies it
                // The input's gradient shares the output's buffer: scaled in place.
                float* g = grad(op.inputs[0]);
                if (!g) return;
                const int saved = activation_saved_tensor(op);
                activation_backward(op.activation, g, StorageType::f32, stored(saved), type_of(saved),
                                    elements(op.outputs[0], n), stream_);
                return;
            }
            case OpKind::embedding: {
                const auto& wte = m.params[static_cast<size_t>(op.params[0])];
                embedding_backward(dout, buffers_.tokens, param_grad(op.params[0]), param_grad(op.params[1]), n,
                                   op.rows_per_sample, wte.shape[1], wte.shape[0], accumulates(param_write(o, 0)),
                                   accumulates(param_write(o, 1)), stream_);
                return;
            }
            case OpKind::layernorm: {
                const int64_t C = m.params[static_cast<size_t>(op.params[0])].shape[0];
                layernorm_backward(dout, stored(op.inputs[0]), type_of(op.inputs[0]), param(op.params[0]), tensor(op.outputs[1]),
                                   tensor(op.outputs[2]), grad(op.inputs[0]), param_grad(op.params[0]),
                                   param_grad(op.params[1]), rows, C, accumulates(input_write(o, 0)), accumulates(param_write(o, 0)),
                                   buffers_.kernel_scratch, stream_);
                return;
            }
            case OpKind::attention: {
                float* dqkv = grad(op.inputs[0]);
                if (!dqkv) return;
                const int64_t C = m.tensors[static_cast<size_t>(op.outputs[0])].per_sample / op.rows_per_sample;
                const int64_t count = elements(op.outputs[0], n);
                if (on_16bit_operands(op)) {
                    // The output gradient rounded into output staging 0 (free in the backward), as
                    // for a linear op.
                    convert_from_f32(dout, buffers_.output_staging[0], storage_type_for(plan_.precision), count, stream_);
                    attention_backward_16bit(blas_, buffers_.output_staging[0], stored(op.inputs[0]), stored(op.outputs[1]), dqkv,
                                             buffers_.attention_scratch, storage_type_for(plan_.precision), n, op.rows_per_sample, C, op.heads,
                                             stream_);
                    return;
                }
                // 16-bit products take their output gradient in 16 bits: rounded in place, as the
                // CPU does (only this op reads it).
                round_to_storage(grad(op.outputs[0]), products_type(), count, stream_);
                if (spec_.fused)
                    attention_backward(blas_, dout, input(op, 0, n), saved_output(op, 1, n), dqkv, buffers_.attention_scratch,
                                       n, op.rows_per_sample, C, op.heads, stream_);
                else
                    attention_backward_eager(blas_, dout, input(op, 0, n), saved_output(op, 1, n), dqkv, buffers_.kernel_scratch, n,
                                             op.rows_per_sample, C, op.heads, products_type(), stream_);
                return;
            }
            case OpKind::residual_add:
                residual_backward(dout, grad(op.inputs[0]), accumulates(input_write(o, 0)), grad(op.inputs[1]),
                                  accumulates(input_write(o, 1)), elements(op.outputs[0], n), stream_);
                return;
            case OpKind::cross_entropy:
            case OpKind::mean_squared_error: return;
            case OpKind::conv2d:
            case OpKind::max_pool:
            case OpKind::lora_linear:
            case OpKind::pipeline_output: throw Error(unsupported_op(Backend::cuda, op.kind));
        }
    }

    EngineSpec spec_;
    DevicePlan device_plan_;  // what CUDA allocates besides: its workspace's layout
    int device_ = 0;
    mutable DeviceAllocator allocator_;
    cudaStream_t stream_ = nullptr;
    cudaEvent_t timing_start_ = nullptr;
    cudaEvent_t timing_stop_ = nullptr;
    std::unique_ptr<GemmRunner> gemm_;
    cublasHandle_t blas_ = nullptr;

    std::vector<DeviceBlock> persistent_;

    // Passes kept as graphs: an update's first and later full micro-batches, a partial last
    // batch's, and those of a loss scale or normaliser that changed lately.
    PassGraphs graphs_{6};
    std::vector<void*> pass_buffers_;  // this micro-batch's, compared with a captured pass's

    // The current micro-batch's buffers.
    std::vector<DeviceBlock> step_blocks_;
    // Per op: an activation its product's epilogue computed in the current pass (set by the
    // product each time it runs, so a fallback to separate passes is always seen).
    std::vector<char> relu_in_epilogue_;
    const int32_t* labels_ = nullptr;

    // Page-locked host staging.
    int32_t* host_tokens_ = nullptr;   // token models: inputs, then targets at token_elements
    float* host_inputs_ = nullptr;     // feature models
    int32_t* host_labels_ = nullptr;
    float* host_targets_ = nullptr;
    double* host_results_ = nullptr;   // [0..1] loss totals, [2] squared norm
    std::unique_ptr<PreloadedSplit> preloaded_;  // --preload-device
};

}  // namespace
}  // namespace cuda

std::unique_ptr<ComputeEngine> make_cuda_engine(const EngineSpec& spec) {
    return std::make_unique<cuda::CudaEngine>(spec);
}

}  // namespace trainbench
