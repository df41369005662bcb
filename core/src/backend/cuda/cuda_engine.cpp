#include "backend/cuda/cuda_engine.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_graph_engine.hpp"
#include "backend/cuda/kernels.hpp"
#include "model/param_layout.hpp"
#include "optim/optimizer_step.hpp"
#include "trainbench/error.hpp"

namespace trainbench {

namespace {
// MLPs run on the layer-chain engine (which also covers 16-bit storage and --preload-device);
// every other model, and every --fused off run, on the executor over its description, which has
// the eager kernels. An MLP asking for --fused off and --preload-device cannot be served.
bool runs_on_graph_executor(const EngineSpec& spec) {
    if (spec.model.family != ModelFamily::mlp) return true;
    if (spec.fused) return false;
    if (spec.preload != nullptr)  // validation refuses --fused off with --preload-device
        throw std::logic_error("internal: --fused off with --preload-device reached the CUDA engine");
    return true;
}
}  // namespace

std::array<int64_t, kMemoryCategoryCount> plan_cuda_engine_memory(const EngineSpec& spec) {
    if (runs_on_graph_executor(spec)) return plan_cuda_graph_memory(spec);
    return cuda::planned_bytes(cuda::make_engine_layout(spec));
}

std::unique_ptr<ComputeEngine> make_cuda_engine(const EngineSpec& spec) {
    if (runs_on_graph_executor(spec)) return make_cuda_graph_engine(spec);
    return std::make_unique<cuda::CudaEngine>(spec);
}

namespace cuda {
namespace {

void check_device_index(int index) {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
        cudaGetLastError();
        throw Error(std::string("--device cuda: no usable NVIDIA GPU (cudaGetDeviceCount: ") +
                    cudaGetErrorString(status) + "); use --device cpu");
    }
    if (index < 0 || index >= count) {
        throw Error("--device cuda:" + std::to_string(index) + ": no such GPU (" +
                    std::to_string(count) + " found); use cuda:0" +
                    (count > 1 ? "..cuda:" + std::to_string(count - 1) : std::string()));
    }
}

}  // namespace

CudaEngine::CudaEngine(const EngineSpec& spec)
    : spec_(spec), layout_(make_engine_layout(spec)), device_(spec.device_index),
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

void CudaEngine::create_resources() {
    gemm_ = std::make_unique<GemmRunner>();
    TRAINBENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&compute_stream_, cudaStreamNonBlocking));
    TRAINBENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
    TRAINBENCH_CUDA_CHECK(cudaEventCreateWithFlags(&upload_done_, cudaEventDisableTiming));
    TRAINBENCH_CUDA_CHECK(cudaEventCreateWithFlags(&inputs_consumed_, cudaEventDisableTiming));
    TRAINBENCH_CUDA_CHECK(cudaEventCreate(&timing_start_));
    TRAINBENCH_CUDA_CHECK(cudaEventCreate(&timing_stop_));

    const int64_t n = layout_.parameter_count;
    const bool mixed = layout_.storage != StorageType::f32;
    if (mixed) {
        working_ = allocator_.allocate(n * storage_bytes(layout_.storage), MemoryCategory::parameters);
        master_ = allocator_.allocate(n * 4, MemoryCategory::master_weights);
    } else {
        master_ = allocator_.allocate(n * 4, MemoryCategory::parameters);
    }
    grads_ = allocator_.allocate(n * 4, MemoryCategory::gradients);
    optimizer_state_ = allocator_.allocate(n * 4 * layout_.optimizer_slots, MemoryCategory::optimizer_state);
    workspace_ = allocator_.allocate(layout_.workspace_bytes, MemoryCategory::workspace);
    gemm_->set_workspace(workspace_at(layout_.gemm_workspace_offset),
                         static_cast<size_t>(layout_.gemm_workspace_bytes));

    TRAINBENCH_CUDA_CHECK(cudaMemsetAsync(master_.ptr, 0, n * 4, compute_stream_));
    if (mixed) TRAINBENCH_CUDA_CHECK(cudaMemsetAsync(working_.ptr, 0, working_.bytes, compute_stream_));
    TRAINBENCH_CUDA_CHECK(cudaMemsetAsync(grads_.ptr, 0, n * 4, compute_stream_));
    if (layout_.optimizer_slots > 0) {
        const float initial = spec_.optimizer.kind == OptimizerKind::adagrad
                                  ? static_cast<float>(spec_.optimizer.initial_accumulator_value)
                                  : 0.0f;
        fill_f32(static_cast<float*>(optimizer_state_.ptr), initial, n * layout_.optimizer_slots,
                 compute_stream_);
    }

    const int64_t batch = layout_.batch;
    TRAINBENCH_CUDA_CHECK(cudaMallocHost(&host_inputs_, layout_.sizes[0] * batch * sizeof(float)));
    TRAINBENCH_CUDA_CHECK(cudaMallocHost(&host_labels_, batch * sizeof(int32_t)));
    TRAINBENCH_CUDA_CHECK(cudaMallocHost(&host_targets_, batch * sizeof(float)));
    TRAINBENCH_CUDA_CHECK(cudaMallocHost(&host_indices_, batch * sizeof(int64_t)));
    TRAINBENCH_CUDA_CHECK(cudaMallocHost(&host_results_, 4 * sizeof(double)));

    if (layout_.preload_bytes > 0) {
        // The whole train split goes over once; later batches are gathered on the device.
        const DataSplit& train = spec_.preload->train;
        preload_ = allocator_.allocate(layout_.preload_bytes, MemoryCategory::workspace);
        auto* base = static_cast<char*>(preload_.ptr);
        if (!train.pixels_u8.empty()) {
            TRAINBENCH_CUDA_CHECK(cudaMemcpyAsync(base + layout_.preload_features_offset,
                                                  train.pixels_u8.data(), train.pixels_u8.size(),
                                                  cudaMemcpyHostToDevice, compute_stream_));
        } else {
            TRAINBENCH_CUDA_CHECK(cudaMemcpyAsync(base + layout_.preload_features_offset,
                                                  train.values_f32.data(),
                                                  train.values_f32.size() * sizeof(float),
                                                  cudaMemcpyHostToDevice, compute_stream_));
        }
        if (layout_.classification) {
            TRAINBENCH_CUDA_CHECK(cudaMemcpyAsync(base + layout_.preload_labels_offset,
                                                  train.labels.data(), train.labels.size() * sizeof(int32_t),
                                                  cudaMemcpyHostToDevice, compute_stream_));
        } else {
            TRAINBENCH_CUDA_CHECK(cudaMemcpyAsync(base + layout_.preload_labels_offset,
                                                  train.targets.data(), train.targets.size() * sizeof(float),
                                                  cudaMemcpyHostToDevice, compute_stream_));
        }
    }

    // Reserve the activation arena once so the first update does not pay for cudaMalloc;
    // it goes to the allocator's cache between passes (see acquire_activations).
    acquire_activations();
    release_activations();
    TRAINBENCH_CUDA_CHECK(cudaStreamSynchronize(compute_stream_));
}

CudaEngine::~CudaEngine() { destroy_handles(); }

void CudaEngine::destroy_handles() noexcept {
    // No throwing here: a failure means the context is already torn down.
    cudaSetDevice(device_);
    if (compute_stream_) cudaStreamSynchronize(compute_stream_);
    if (copy_stream_) cudaStreamSynchronize(copy_stream_);
    cudaFreeHost(host_inputs_);
    cudaFreeHost(host_labels_);
    cudaFreeHost(host_targets_);
    cudaFreeHost(host_indices_);
    cudaFreeHost(host_results_);
    for (cudaEvent_t event : {upload_done_, inputs_consumed_, timing_start_, timing_stop_}) {
        if (event) cudaEventDestroy(event);
    }
    host_inputs_ = nullptr;
    host_labels_ = nullptr;
    host_targets_ = nullptr;
    host_indices_ = nullptr;
    host_results_ = nullptr;
    upload_done_ = inputs_consumed_ = timing_start_ = timing_stop_ = nullptr;
    gemm_.reset();
    if (copy_stream_) cudaStreamDestroy(copy_stream_);
    if (compute_stream_) cudaStreamDestroy(compute_stream_);
    copy_stream_ = compute_stream_ = nullptr;
}

void CudaEngine::activate_device() const { TRAINBENCH_CUDA_CHECK(cudaSetDevice(device_)); }

void* CudaEngine::workspace_at(int64_t offset) const {
    return static_cast<char*>(workspace_.ptr) + offset;
}

void CudaEngine::acquire_activations() {
    if (activations_.ptr == nullptr)
        activations_ = allocator_.allocate(layout_.activation_bytes, MemoryCategory::activations);
}

void CudaEngine::release_activations() { allocator_.release(activations_); }

std::vector<float> CudaEngine::download(const float* device, int64_t n) const {
    std::vector<float> host(static_cast<size_t>(n));
    TRAINBENCH_CUDA_CHECK(cudaMemcpyAsync(host.data(), device, n * sizeof(float),
                                          cudaMemcpyDeviceToHost, compute_stream_));
    TRAINBENCH_CUDA_CHECK(cudaStreamSynchronize(compute_stream_));
    return host;
}

void CudaEngine::upload_parameters(const std::vector<float>& flat) {
    // Ordered on the compute stream (a plain cudaMemcpy from pageable memory may return before
    // its DMA lands, and a non-blocking stream would not wait for it); `flat` must outlive it.
    TRAINBENCH_CUDA_CHECK(cudaMemcpyAsync(master_.ptr, flat.data(), flat.size() * sizeof(float),
                                          cudaMemcpyHostToDevice, compute_stream_));
    if (working_.ptr != nullptr) {
        convert_from_f32(static_cast<const float*>(master_.ptr), working_.ptr, layout_.storage,
                         layout_.parameter_count, compute_stream_);
    }
    TRAINBENCH_CUDA_CHECK(cudaStreamSynchronize(compute_stream_));
}

void CudaEngine::set_weights(const ModelWeights& weights) {
    activate_device();
    check_weights_shape(weights, spec_.model);
    std::vector<float> flat(static_cast<size_t>(layout_.parameter_count), 0.0f);
    for (int l = 0; l < layout_.layer_count(); ++l) {
        const LinearSlice& slice = layout_.layers[l];
        const std::string prefix = "layers." + std::to_string(l);
        const std::vector<float>& weight = weights.find(prefix + ".weight")->data;
        const std::vector<float>& bias = weights.find(prefix + ".bias")->data;
        std::copy(weight.begin(), weight.end(), flat.begin() + slice.weight_offset);
        std::copy(bias.begin(), bias.end(), flat.begin() + slice.bias_offset);
    }
    upload_parameters(flat);
}

ModelWeights CudaEngine::weights() const {
    activate_device();
    const std::vector<float> flat =
        download(static_cast<const float*>(master_.ptr), layout_.parameter_count);
    ModelWeights result;
    for (int l = 0; l < layout_.layer_count(); ++l) {
        const LinearSlice& slice = layout_.layers[l];
        const std::string prefix = "layers." + std::to_string(l);
        result.tensors.push_back({prefix + ".weight", {slice.out, slice.in},
                                  std::vector<float>(flat.begin() + slice.weight_offset,
                                                     flat.begin() + slice.weight_offset + slice.in * slice.out)});
        result.tensors.push_back({prefix + ".bias", {slice.out},
                                  std::vector<float>(flat.begin() + slice.bias_offset,
                                                     flat.begin() + slice.bias_offset + slice.out)});
    }
    return result;
}

void CudaEngine::zero_grad() { grads_stale_ = true; }

void CudaEngine::materialise_zero_grad() {
    if (!grads_stale_) return;
    TRAINBENCH_CUDA_CHECK(cudaMemsetAsync(grads_.ptr, 0, layout_.parameter_count * sizeof(float),
                                          compute_stream_));
    grads_stale_ = false;
}

double CudaEngine::grad_norm_squared() {
    activate_device();
    materialise_zero_grad();
    sum_of_squares(static_cast<const float*>(grads_.ptr), layout_.parameter_count,
                   static_cast<double*>(workspace_at(layout_.norm_partials_offset)),
                   static_cast<double*>(workspace_at(layout_.norm_result_offset)), compute_stream_);
    TRAINBENCH_CUDA_CHECK(cudaMemcpyAsync(host_results_ + 2, workspace_at(layout_.norm_result_offset),
                                          sizeof(double), cudaMemcpyDeviceToHost, compute_stream_));
    TRAINBENCH_CUDA_CHECK(cudaStreamSynchronize(compute_stream_));
    return host_results_[2];
}

void CudaEngine::optimizer_step(double lr, double grad_multiplier, int64_t step) {
    activate_device();
    materialise_zero_grad();
    OptimizerLaunch launch;
    launch.params = static_cast<float*>(master_.ptr);
    launch.grads = static_cast<const float*>(grads_.ptr);
    launch.state = static_cast<float*>(optimizer_state_.ptr);
    launch.n = layout_.parameter_count;
    launch.params_16 = working_.ptr;
    launch.type_16 = layout_.storage;
    optimizer_step_device(spec_.optimizer, launch, lr, grad_multiplier, step, compute_stream_);
}

std::vector<NamedTensor> CudaEngine::optimizer_state() const {
    activate_device();
    std::vector<NamedTensor> tensors;
    const int64_t n = layout_.parameter_count;
    for (int slot = 0; slot < layout_.optimizer_slots; ++slot) {
        const std::vector<float> flat = download(static_cast<const float*>(optimizer_state_.ptr) + slot * n, n);
        NamedTensor tensor;
        tensor.name = std::string("optimizer.") + optimizer_state_name(spec_.optimizer, slot);
        tensor.shape = {layout_.unpadded_count};
        tensor.data.reserve(static_cast<size_t>(layout_.unpadded_count));
        for (const LinearSlice& slice : layout_.layers) {
            tensor.data.insert(tensor.data.end(), flat.begin() + slice.weight_offset,
                               flat.begin() + slice.weight_offset + slice.in * slice.out);
            tensor.data.insert(tensor.data.end(), flat.begin() + slice.bias_offset,
                               flat.begin() + slice.bias_offset + slice.out);
        }
        tensors.push_back(std::move(tensor));
    }
    return tensors;
}

void CudaEngine::set_optimizer_state(const std::vector<NamedTensor>& state) {
    activate_device();
    // Same names and unpadded layer order (weight, then bias) as the CPU engine, so a
    // checkpoint moves between devices.
    const int64_t n = layout_.parameter_count;
    std::vector<float> flat(static_cast<size_t>(n));
    for (int slot = 0; slot < layout_.optimizer_slots; ++slot) {
        const std::string name = std::string("optimizer.") + optimizer_state_name(spec_.optimizer, slot);
        auto tensor = std::find_if(state.begin(), state.end(),
                                   [&](const NamedTensor& t) { return t.name == name; });
        if (tensor == state.end() || static_cast<int64_t>(tensor->data.size()) != layout_.unpadded_count) {
            throw Error("checkpoint has no optimizer state '" + name + "' of " +
                        std::to_string(layout_.unpadded_count) +
                        " values: it was saved by a different optimizer or model");
        }
        std::fill(flat.begin(), flat.end(),
                  spec_.optimizer.kind == OptimizerKind::adagrad
                      ? static_cast<float>(spec_.optimizer.initial_accumulator_value)
                      : 0.0f);
        auto source = tensor->data.begin();
        for (const LinearSlice& slice : layout_.layers) {
            std::copy(source, source + slice.in * slice.out, flat.begin() + slice.weight_offset);
            source += slice.in * slice.out;
            std::copy(source, source + slice.out, flat.begin() + slice.bias_offset);
            source += slice.out;
        }
        TRAINBENCH_CUDA_CHECK(cudaMemcpyAsync(static_cast<float*>(optimizer_state_.ptr) + slot * n,
                                              flat.data(), n * sizeof(float), cudaMemcpyHostToDevice,
                                              compute_stream_));
        TRAINBENCH_CUDA_CHECK(cudaStreamSynchronize(compute_stream_));
    }
}

MemoryReport CudaEngine::memory() const { return allocator_.report(); }

void CudaEngine::release_cache() {
    activate_device();
    TRAINBENCH_CUDA_CHECK(cudaStreamSynchronize(compute_stream_));
    allocator_.release_cache();
}

void CudaEngine::begin_update_timing() {
    activate_device();
    allocator_.begin_update();
    TRAINBENCH_CUDA_CHECK(cudaEventRecord(timing_start_, compute_stream_));
}

double CudaEngine::end_update_timing_ms() {
    activate_device();
    TRAINBENCH_CUDA_CHECK(cudaEventRecord(timing_stop_, compute_stream_));
    TRAINBENCH_CUDA_CHECK(cudaEventSynchronize(timing_stop_));
    float milliseconds = 0.0f;
    TRAINBENCH_CUDA_CHECK(cudaEventElapsedTime(&milliseconds, timing_start_, timing_stop_));
    return milliseconds;
}

std::pair<int64_t, int64_t> CudaEngine::device_memory() const {
    activate_device();
    size_t free_bytes = 0, total_bytes = 0;
    TRAINBENCH_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    return {static_cast<int64_t>(total_bytes - free_bytes), static_cast<int64_t>(total_bytes)};
}

}  // namespace cuda
}  // namespace trainbench
