// Getting samples onto the device: fp32 -> storage type, and gathers from a preloaded split.
#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/storage_types.cuh"

namespace trainbench::cuda {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void convert_kernel(const float* __restrict__ source, T* __restrict__ destination,
                               int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
         i += int64_t(gridDim.x) * blockDim.x)
        destination[i] = store_from_float<T>(source[i]);
}

template <typename T>
__global__ void convert_packed_kernel(const Pack8<float>* __restrict__ source, Pack8<T>* __restrict__ destination,
                                      int64_t packs) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < packs; i += int64_t(gridDim.x) * blockDim.x) {
        const Pack8<float> in = source[i];
        Pack8<T> out;
#pragma unroll
        for (int k = 0; k < kPackValues; ++k) out.v[k] = store_from_float<T>(in.v[k]);
        destination[i] = out;
    }
}

template <typename T>
__global__ void widen_kernel(const T* __restrict__ source, float* __restrict__ destination, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
         i += int64_t(gridDim.x) * blockDim.x)
        destination[i] = load_as_float(source[i]);
}

template <typename Source, typename T>
__global__ void gather_columns_kernel(const Source* __restrict__ source,
                                      const int64_t* __restrict__ indices, int64_t count,
                                      int64_t features, float scale, T* __restrict__ destination) {
    const int64_t n = count * features;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
         i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t column = i / features;
        const int64_t row = i - column * features;
        const float value = static_cast<float>(source[indices[column] * features + row]) * scale;
        destination[i] = store_from_float<T>(value);
    }
}

template <typename Value>
__global__ void gather_kernel(const Value* __restrict__ source, const int64_t* __restrict__ indices,
                              int64_t count, Value* __restrict__ destination) {
    const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
    if (i < count) destination[i] = source[indices[i]];
}

template <typename T>
__global__ void round_kernel(float* values, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        values[i] = load_as_float(store_from_float<T>(values[i]));
}

__global__ void fill_kernel(float* destination, float value, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
         i += int64_t(gridDim.x) * blockDim.x)
        destination[i] = value;
}

}  // namespace

void convert_from_f32(const float* source, void* destination, StorageType type, int64_t n,
                      cudaStream_t stream) {
    if (n == 0) return;
    dispatch_storage(type, [&]<typename T>() {
        if (packs_fit<float, T>(source, destination, n)) {
            const int64_t packs = n / kPackValues;
            convert_packed_kernel<T><<<grid_for(packs, kThreads), kThreads, 0, stream>>>(
                reinterpret_cast<const Pack8<float>*>(source), static_cast<Pack8<T>*>(destination), packs);
        } else {
            convert_kernel<T><<<grid_for(n, kThreads), kThreads, 0, stream>>>(source, static_cast<T*>(destination), n);
        }
    });
    TRAINBENCH_CUDA_CHECK_LAUNCH();
}

void convert_to_f32(const void* source, StorageType type, float* destination, int64_t n,
                    cudaStream_t stream) {
    if (n == 0) return;
    dispatch_storage(type, [&]<typename T>() {
        widen_kernel<T><<<grid_for(n, kThreads), kThreads, 0, stream>>>(static_cast<const T*>(source),
                                                                        destination, n);
    });
    TRAINBENCH_CUDA_CHECK_LAUNCH();
}

void round_to_storage(float* values, StorageType type, int64_t n, cudaStream_t stream) {
    if (n == 0 || type == StorageType::f32) return;
    dispatch_storage(type, [&]<typename T>() {
        round_kernel<T><<<grid_for(n, kThreads), kThreads, 0, stream>>>(values, n);
    });
    TRAINBENCH_CUDA_CHECK_LAUNCH();
}

void gather_columns_u8(const uint8_t* pixels, const int64_t* indices, int64_t count,
                       int64_t features, void* destination, StorageType type, cudaStream_t stream) {
    if (count == 0) return;
    dispatch_storage(type, [&]<typename T>() {
        gather_columns_kernel<uint8_t, T><<<grid_for(count * features, kThreads), kThreads, 0, stream>>>(
            pixels, indices, count, features, 1.0f / 255.0f, static_cast<T*>(destination));
    });
    TRAINBENCH_CUDA_CHECK_LAUNCH();
}

void gather_columns_f32(const float* values, const int64_t* indices, int64_t count,
                        int64_t features, void* destination, StorageType type, cudaStream_t stream) {
    if (count == 0) return;
    dispatch_storage(type, [&]<typename T>() {
        gather_columns_kernel<float, T><<<grid_for(count * features, kThreads), kThreads, 0, stream>>>(
            values, indices, count, features, 1.0f, static_cast<T*>(destination));
    });
    TRAINBENCH_CUDA_CHECK_LAUNCH();
}

void gather_labels(const int32_t* labels, const int64_t* indices, int64_t count,
                   int32_t* destination, cudaStream_t stream) {
    if (count == 0) return;
    gather_kernel<int32_t><<<grid_for(count, kThreads), kThreads, 0, stream>>>(labels, indices,
                                                                               count, destination);
    TRAINBENCH_CUDA_CHECK_LAUNCH();
}

void gather_targets(const float* targets, const int64_t* indices, int64_t count,
                    float* destination, cudaStream_t stream) {
    if (count == 0) return;
    gather_kernel<float><<<grid_for(count, kThreads), kThreads, 0, stream>>>(targets, indices,
                                                                             count, destination);
    TRAINBENCH_CUDA_CHECK_LAUNCH();
}

void fill_f32(float* destination, float value, int64_t n, cudaStream_t stream) {
    if (n == 0) return;
    fill_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(destination, value, n);
    TRAINBENCH_CUDA_CHECK_LAUNCH();
}

}  // namespace trainbench::cuda
