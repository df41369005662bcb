#pragma once
// --preload-device (feature models): the whole train split copied to the GPU once, into the
// block the device plan laid out for it (DevicePlan::preload_*), and each micro-batch's rows
// gathered from it there, so that a micro-batch sends only its row indices over PCIe. CUDA's
// alone: the executor knows nothing of it.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/storage_types.cuh"
#include "plan/cuda_device_plan.hpp"
#include "trainbench/dataset.hpp"

namespace trainbench::cuda {

class PreloadedSplit {
public:
    // Copies `train` into `split` (the plan's preloaded-split buffer) and waits for the copy, so
    // that the host's vectors may change after. `workspace` is the plan's CUDA workspace block, in
    // which the row indices and the gathered labels or targets go.
    PreloadedSplit(const DataSplit& train, bool classification, const DevicePlan& plan, char* split, char* workspace,
                   int64_t max_samples, cudaStream_t stream);
    ~PreloadedSplit();
    PreloadedSplit(const PreloadedSplit&) = delete;
    PreloadedSplit& operator=(const PreloadedSplit&) = delete;

    // The rows `indices` of the split into `input` (u8 pixels scaled by 1/255 as the CPU gather
    // does, rounded once into a 16-bit input's storage) and their labels or targets into the
    // workspace (DevicePlan::labels_offset, targets_offset).
    void gather(const int64_t* indices, int64_t count, void* input, StorageType input_type, cudaStream_t stream);

private:
    bool pixels_u8_;
    int64_t features_;
    bool classification_;
    const DevicePlan& plan_;
    char* split_;
    char* workspace_;
    int64_t* host_indices_ = nullptr;  // page-locked, so the indices' copy runs asynchronously
};

}  // namespace trainbench::cuda
