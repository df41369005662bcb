#pragma once
// Loads and stores between the storage types and the fp32 the kernels compute in.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/kernels.hpp"

namespace trainbench::cuda {

__device__ __forceinline__ float load_as_float(float v) { return v; }
__device__ __forceinline__ float load_as_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float load_as_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T store_from_float(float v);
template <>
__device__ __forceinline__ float store_from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half store_from_float<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 store_from_float<__nv_bfloat16>(float v) {
    return __float2bfloat16_rn(v);
}

// Calls functor.template operator()<T>() with T the C++ type of `type`.
template <typename Functor>
void dispatch_storage(StorageType type, Functor&& functor) {
    switch (type) {
        case StorageType::f32: functor.template operator()<float>(); return;
        case StorageType::f16: functor.template operator()<__half>(); return;
        case StorageType::bf16: functor.template operator()<__nv_bfloat16>(); return;
    }
}

// N values of T moved in one aligned access (16 bytes for eight 16-bit values): element-wise
// kernels read and write these where the pointers and the count allow, since one 2-byte access
// per thread leaves much of the memory bandwidth unused. Same values, same operations.
template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
    T v[N];
};
inline constexpr int kPackValues = 8;
template <typename T>
using Pack8 = Pack<T, kPackValues>;
// Whether n values at each pointer can move as Pack8s of their types.
template <typename A, typename B>
inline bool packs_fit(const void* a, const void* b, int64_t n) {
    return n % kPackValues == 0 && reinterpret_cast<uintptr_t>(a) % sizeof(Pack8<A>) == 0 &&
           reinterpret_cast<uintptr_t>(b) % sizeof(Pack8<B>) == 0;
}

inline unsigned grid_for(int64_t n, int threads, int64_t max_blocks = 65535LL * 16) {
    int64_t blocks = (n + threads - 1) / threads;
    if (blocks < 1) blocks = 1;
    if (blocks > max_blocks) blocks = max_blocks;
    return static_cast<unsigned>(blocks);
}

}  // namespace trainbench::cuda
