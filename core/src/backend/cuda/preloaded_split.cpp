#include "backend/cuda/preloaded_split.hpp"

#include <cstring>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/kernels.hpp"

namespace trainbench::cuda {

PreloadedSplit::PreloadedSplit(const DataSplit& train, bool classification, const DevicePlan& plan, char* split,
                               char* workspace, int64_t max_samples, cudaStream_t stream)
    : pixels_u8_(!train.pixels_u8.empty()),
      features_(train.features),
      classification_(classification),
      plan_(plan),
      split_(split),
      workspace_(workspace) {
    auto copy = [&](int64_t offset, const void* host, size_t bytes) {
        TRAINBENCH_CUDA_CHECK(cudaMemcpyAsync(split_ + offset, host, bytes, cudaMemcpyHostToDevice, stream));
    };
    if (pixels_u8_)
        copy(plan.preload_features_offset, train.pixels_u8.data(), train.pixels_u8.size());
    else
        copy(plan.preload_features_offset, train.values_f32.data(), train.values_f32.size() * sizeof(float));
    if (classification_)
        copy(plan.preload_labels_offset, train.labels.data(), train.labels.size() * sizeof(int32_t));
    else
        copy(plan.preload_labels_offset, train.targets.data(), train.targets.size() * sizeof(float));
    TRAINBENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
    TRAINBENCH_CUDA_CHECK(cudaMallocHost(&host_indices_, max_samples * sizeof(int64_t)));
}

PreloadedSplit::~PreloadedSplit() { cudaFreeHost(host_indices_); }

void PreloadedSplit::gather(const int64_t* indices, int64_t count, void* input, StorageType input_type,
                            cudaStream_t stream) {
    auto* device_indices = reinterpret_cast<int64_t*>(workspace_ + plan_.indices_offset);
    std::memcpy(host_indices_, indices, count * sizeof(int64_t));
    TRAINBENCH_CUDA_CHECK(
        cudaMemcpyAsync(device_indices, host_indices_, count * sizeof(int64_t), cudaMemcpyHostToDevice, stream));
    const char* features = split_ + plan_.preload_features_offset;
    if (pixels_u8_)
        gather_columns_u8(reinterpret_cast<const uint8_t*>(features), device_indices, count, features_, input, input_type,
                          stream);
    else
        gather_columns_f32(reinterpret_cast<const float*>(features), device_indices, count, features_, input, input_type,
                           stream);
    const char* labels = split_ + plan_.preload_labels_offset;
    if (classification_)
        gather_labels(reinterpret_cast<const int32_t*>(labels), device_indices, count,
                      reinterpret_cast<int32_t*>(workspace_ + plan_.labels_offset), stream);
    else
        gather_targets(reinterpret_cast<const float*>(labels), device_indices, count,
                       reinterpret_cast<float*>(workspace_ + plan_.targets_offset), stream);
}

}  // namespace trainbench::cuda
