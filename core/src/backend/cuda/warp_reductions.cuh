#pragma once
// Reductions over the 32 lanes of a warp, for the kernels that give each row to one warp
// (LayerNorm, softmax, the losses). Butterfly shuffles: every lane ends with the same result,
// combined in the same order on every run, so identical inputs give identical bits. The whole
// warp must take part (rows are whole warps, so early returns leave together).
#include <cstdint>

#include "backend/cuda/storage_types.cuh"

namespace trainbench::cuda {

constexpr unsigned kFullWarpMask = 0xffffffffu;

__device__ __forceinline__ double warp_sum(double value) {
    for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(kFullWarpMask, value, offset);
    return value;
}

__device__ __forceinline__ float warp_sum(float value) {
    for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(kFullWarpMask, value, offset);
    return value;
}

__device__ __forceinline__ float warp_max(float value) {
    for (int offset = 16; offset > 0; offset /= 2) value = fmaxf(value, __shfl_xor_sync(kFullWarpMask, value, offset));
    return value;
}

// The row's largest value and its first index (ties go to the lower index, as the CPU losses
// break them), from each lane's own candidate; a lane without one passes index `none`.
struct ArgMax {
    float value;
    int64_t index;
};
__device__ __forceinline__ ArgMax warp_argmax(ArgMax mine) {
    for (int offset = 16; offset > 0; offset /= 2) {
        const float other_value = __shfl_xor_sync(kFullWarpMask, mine.value, offset);
        const int64_t other_index = __shfl_xor_sync(kFullWarpMask, mine.index, offset);
        if (other_value > mine.value || (other_value == mine.value && other_index < mine.index))
            mine = {other_value, other_index};
    }
    return mine;
}

// warp_argmax over a row of n values stored as T, each lane taking elements lane, lane + 32, ...
template <typename T>
__device__ __forceinline__ ArgMax row_argmax(const T* row, int64_t n, int lane) {
    ArgMax mine{-INFINITY, n};
    for (int64_t c = lane; c < n; c += 32) {
        const float v = load_as_float(row[c]);
        if (mine.index == n || v > mine.value) mine = {v, c};
    }
    return warp_argmax(mine);
}

}  // namespace trainbench::cuda
