// The CUDA engine's passes over one micro-batch: staging the data, forward, loss, backward
// (with segment recomputation under gradient checkpointing) and evaluation.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_engine.hpp"
#include "backend/cuda/kernels.hpp"
#include "backend/cuda/linear_products.hpp"
#include "trainbench/error.hpp"

namespace trainbench::cuda {
namespace {

void run_gemm(GemmRunner& gemm, const GemmCall& call, cudaStream_t stream) {
    if (!gemm.run(call, stream)) {
        throw Error("cuBLASLt has no algorithm for a " + std::to_string(call.m) + "x" +
                    std::to_string(call.n) + "x" + std::to_string(call.k) +
                    " product in this precision on this GPU; try --precision fp32 or --device cpu");
    }
}

}  // namespace

void* CudaEngine::activation(int layer) const {
    return static_cast<char*>(activations_.ptr) + layout_.output_offset[layer];
}

void* CudaEngine::preactivation(int layer) const {
    return static_cast<char*>(activations_.ptr) + layout_.preact_offset[layer];
}

void* CudaEngine::logits() const {
    return static_cast<char*>(activations_.ptr) + layout_.logits_offset;
}

void* CudaEngine::layer_output(int layer) const {
    if (layer == layout_.layer_count()) return logits();
    return layout_.activation == Activation::gelu ? preactivation(layer) : activation(layer);
}

const void* CudaEngine::working_weight(int layer) const {
    const int64_t offset = layout_.layers[layer - 1].weight_offset;
    if (working_.ptr != nullptr) return static_cast<const char*>(working_.ptr) + offset * storage_bytes(layout_.storage);
    return static_cast<const float*>(master_.ptr) + offset;
}

const void* CudaEngine::working_bias(int layer) const {
    const int64_t offset = layout_.layers[layer - 1].bias_offset;
    if (working_.ptr != nullptr) return static_cast<const char*>(working_.ptr) + offset * storage_bytes(layout_.storage);
    return static_cast<const float*>(master_.ptr) + offset;
}

void CudaEngine::stage_batch(const MicroBatch& batch) {
    const int64_t count = batch.count;
    const int64_t features = layout_.sizes[0];
    const bool classification = layout_.classification;
    auto* device_labels = static_cast<int32_t*>(workspace_at(layout_.labels_offset));
    auto* device_targets = static_cast<float*>(workspace_at(layout_.targets_offset));
    void* input = activation(0);

    // The pinned staging buffers may still feed the previous copy; the device buffers may
    // still feed the previous pass (their consumption is marked by inputs_consumed_).
    TRAINBENCH_CUDA_CHECK(cudaEventSynchronize(upload_done_));
    TRAINBENCH_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, inputs_consumed_, 0));

    // With --preload-device the loop hands over only rows of the train split (x is null).
    // Host values, when given, always win: the validation batches carry indices too, but
    // those index the validation split, which is not on the device.
    if (batch.x == nullptr) {
        if (preload_.ptr == nullptr || batch.indices == nullptr)
            throw Error("micro-batch has neither input values nor preloaded rows (internal: x is null)");
        auto* device_indices = static_cast<int64_t*>(workspace_at(layout_.indices_offset));
        std::memcpy(host_indices_, batch.indices, count * sizeof(int64_t));
        TRAINBENCH_CUDA_CHECK(cudaMemcpyAsync(device_indices, host_indices_, count * sizeof(int64_t),
                                              cudaMemcpyHostToDevice, copy_stream_));
        TRAINBENCH_CUDA_CHECK(cudaEventRecord(upload_done_, copy_stream_));
        TRAINBENCH_CUDA_CHECK(cudaStreamWaitEvent(compute_stream_, upload_done_, 0));
        const char* base = static_cast<const char*>(preload_.ptr);
        const DataSplit& train = spec_.preload->train;
        if (!train.pixels_u8.empty()) {
            gather_columns_u8(reinterpret_cast<const uint8_t*>(base + layout_.preload_features_offset),
                              device_indices, count, features, input, layout_.storage, compute_stream_);
        } else {
            gather_columns_f32(reinterpret_cast<const float*>(base + layout_.preload_features_offset),
                               device_indices, count, features, input, layout_.storage, compute_stream_);
        }
        if (classification) {
            gather_labels(reinterpret_cast<const int32_t*>(base + layout_.preload_labels_offset),
                          device_indices, count, device_labels, compute_stream_);
        } else {
            gather_targets(reinterpret_cast<const float*>(base + layout_.preload_labels_offset),
                           device_indices, count, device_targets, compute_stream_);
        }
        return;
    }

    if (classification ? batch.labels == nullptr : batch.targets == nullptr)
        throw Error("micro-batch has no labels or targets (internal: null pointer)");
    std::memcpy(host_inputs_, batch.x, count * features * sizeof(float));
    void* upload = layout_.upload_offset >= 0 ? workspace_at(layout_.upload_offset) : input;
    TRAINBENCH_CUDA_CHECK(cudaMemcpyAsync(upload, host_inputs_, count * features * sizeof(float),
                                          cudaMemcpyHostToDevice, copy_stream_));
    if (classification) {
        std::memcpy(host_labels_, batch.labels, count * sizeof(int32_t));
        TRAINBENCH_CUDA_CHECK(cudaMemcpyAsync(device_labels, host_labels_, count * sizeof(int32_t),
                                              cudaMemcpyHostToDevice, copy_stream_));
    } else {
        std::memcpy(host_targets_, batch.targets, count * sizeof(float));
        TRAINBENCH_CUDA_CHECK(cudaMemcpyAsync(device_targets, host_targets_, count * sizeof(float),
                                              cudaMemcpyHostToDevice, copy_stream_));
    }
    TRAINBENCH_CUDA_CHECK(cudaEventRecord(upload_done_, copy_stream_));
    TRAINBENCH_CUDA_CHECK(cudaStreamWaitEvent(compute_stream_, upload_done_, 0));
    if (upload != input) {
        convert_from_f32(static_cast<const float*>(upload), input, layout_.storage, count * features,
                         compute_stream_);
    }
}

void CudaEngine::forward_layer(int layer, int64_t count) {
    const LinearSlice& slice = layout_.layers[layer - 1];
    const bool last = layer == layout_.layer_count();
    GemmCall call = linear_forward_product(slice.in, slice.out, count, working_weight(layer),
                                           activation(layer - 1), layer_output(layer),
                                           cuda_data_type(layout_.storage), working_bias(layer), GemmEpilogue::none);

    const Activation kind = layout_.activation;
    if (!last && kind == Activation::relu) {
        call.epilogue = GemmEpilogue::relu_bias;
        if (gemm_->run(call, compute_stream_)) return;
    }
    call.epilogue = GemmEpilogue::bias;
    if (!gemm_->run(call, compute_stream_)) {
        call.epilogue = GemmEpilogue::none;
        run_gemm(*gemm_, call, compute_stream_);
        add_bias(call.d, layout_.storage, call.bias, layout_.storage, slice.out, count, compute_stream_);
    }
    if (!last) {
        activation_forward(kind, layer_output(layer), activation(layer), layout_.storage,
                           slice.out * count, compute_stream_);
    }
}

void CudaEngine::forward_layers(int first, int last, int64_t count) {
    for (int layer = first; layer <= last; ++layer) forward_layer(layer, count);
}

void CudaEngine::loss_and_gradient(int64_t count, float grad_scale, bool with_gradient) {
    auto* sample_loss = static_cast<double*>(workspace_at(layout_.sample_loss_offset));
    auto* sample_correct = static_cast<int32_t*>(workspace_at(layout_.sample_correct_offset));
    auto* totals = static_cast<double*>(workspace_at(layout_.totals_offset));
    void* dlogits = with_gradient ? workspace_at(layout_.grad_offset[current_grad_]) : nullptr;
    const int64_t outputs = layout_.sizes.back();
    if (layout_.classification) {
        softmax_cross_entropy(logits(), layout_.storage,
                              static_cast<const int32_t*>(workspace_at(layout_.labels_offset)),
                              outputs, count, grad_scale, dlogits, sample_loss, sample_correct,
                              compute_stream_);
        sum_sample_losses(sample_loss, sample_correct, count, totals, compute_stream_);
    } else {
        mean_squared_error(logits(), layout_.storage,
                           static_cast<const float*>(workspace_at(layout_.targets_offset)), count,
                           grad_scale, dlogits, sample_loss, compute_stream_);
        sum_sample_losses(sample_loss, nullptr, count, totals, compute_stream_);
    }
}

// Under checkpointing, the activations inside the segment that ends at `layer` were
// overwritten by later segments; run that segment's forward again from its checkpoint.
// Gelu also needs the segment end's pre-activation, so its last layer is recomputed too.
void CudaEngine::recompute_segment_ending_at(int layer, int64_t count) {
    const int k = layout_.checkpoint_segment;
    const int first = layer - k + 1;
    const int last = layout_.activation == Activation::gelu ? layer : layer - 1;
    if (last >= first) forward_layers(first, last, count);
}

void CudaEngine::backward(int64_t count) {
    const cudaDataType_t type = cuda_data_type(layout_.storage);
    const int k = layout_.checkpoint_segment;
    auto* grads = static_cast<float*>(grads_.ptr);
    for (int layer = layout_.layer_count(); layer >= 1; --layer) {
        const LinearSlice& slice = layout_.layers[layer - 1];
        void* dz = workspace_at(layout_.grad_offset[current_grad_]);

        // The first micro-batch of an update overwrites the gradients, later ones add.
        run_gemm(*gemm_,
                 linear_weight_grad_product(slice.in, slice.out, count, activation(layer - 1), dz,
                                            grads + slice.weight_offset, type, !grads_stale_),
                 compute_stream_);
        bias_grad(dz, layout_.storage, slice.out, count, grads + slice.bias_offset, !grads_stale_,
                  compute_stream_);
        if (layer == 1) break;

        // da_{l-1} = W^T · dz, then through the activation's derivative. In 16-bit runs the
        // product is stored in 16 bits before the derivative is applied (as PyTorch's autocast
        // does); the CPU engine multiplies in fp32 first, so tanh/sigmoid/gelu differ by one
        // extra rounding per layer (relu only masks, so it is unaffected).
        const int other = 1 - current_grad_;
        void* d_input = workspace_at(layout_.grad_offset[other]);
        run_gemm(*gemm_,
                 linear_input_grad_product(slice.in, slice.out, count, working_weight(layer), dz,
                                           d_input, type, type),
                 compute_stream_);

        const int previous = layer - 1;
        if (k > 0 && previous % k == 0) recompute_segment_ending_at(previous, count);
        const void* saved = layout_.activation == Activation::gelu ? preactivation(previous) : activation(previous);
        activation_backward(layout_.activation, d_input, layout_.storage, saved, layout_.storage,
                            slice.in * count, compute_stream_);
        current_grad_ = other;
    }
}

double CudaEngine::forward_backward(const MicroBatch& batch, double normaliser, double loss_scale) {
    activate_device();
    if (batch.count <= 0 || batch.count > layout_.batch) {
        throw Error("micro-batch of " + std::to_string(batch.count) + " samples does not fit the " +
                    std::to_string(layout_.batch) + " the CUDA engine was built for (internal)");
    }
    if (!(normaliser > 0.0)) throw Error("loss normaliser must be positive (internal)");
    acquire_activations();
    stage_batch(batch);
    forward_layers(1, layout_.layer_count(), batch.count);
    current_grad_ = 0;
    loss_and_gradient(batch.count, static_cast<float>(loss_scale / normaliser), true);
    backward(batch.count);
    grads_stale_ = false;
    TRAINBENCH_CUDA_CHECK(cudaEventRecord(inputs_consumed_, compute_stream_));
    TRAINBENCH_CUDA_CHECK(cudaMemcpyAsync(host_results_, workspace_at(layout_.totals_offset),
                                          2 * sizeof(double), cudaMemcpyDeviceToHost, compute_stream_));
    TRAINBENCH_CUDA_CHECK(cudaStreamSynchronize(compute_stream_));
    release_activations();
    return host_results_[0];
}

EvalTotals CudaEngine::evaluate(const MicroBatch& batch) {
    activate_device();
    EvalTotals totals;
    if (batch.count <= 0) return totals;
    acquire_activations();
    const int64_t features = layout_.sizes[0];
    for (int64_t start = 0; start < batch.count; start += layout_.batch) {
        MicroBatch chunk;
        chunk.count = std::min(layout_.batch, batch.count - start);
        chunk.x = batch.x ? batch.x + start * features : nullptr;
        chunk.labels = batch.labels ? batch.labels + start : nullptr;
        chunk.targets = batch.targets ? batch.targets + start : nullptr;
        chunk.indices = batch.indices ? batch.indices + start : nullptr;
        stage_batch(chunk);
        forward_layers(1, layout_.layer_count(), chunk.count);
        loss_and_gradient(chunk.count, 0.0f, false);
        TRAINBENCH_CUDA_CHECK(cudaEventRecord(inputs_consumed_, compute_stream_));
        TRAINBENCH_CUDA_CHECK(cudaMemcpyAsync(host_results_, workspace_at(layout_.totals_offset),
                                              2 * sizeof(double), cudaMemcpyDeviceToHost,
                                              compute_stream_));
        TRAINBENCH_CUDA_CHECK(cudaStreamSynchronize(compute_stream_));
        totals.loss_sum += host_results_[0];
        totals.correct += std::llround(host_results_[1]);
    }
    release_activations();
    return totals;
}

}  // namespace trainbench::cuda
