#pragma once
// The first pass of a gradient summed over many rows per column (a bias gradient, LayerNorm's
// weight and bias gradients): a block of kPartialColumns columns x kPartialLanes lanes per fixed
// chunk of rows, each lane summing every kPartialLanes-th row of the chunk, then the lanes' sums
// added in lane order. So each chunk's sum has the same bits on every run, and the second pass
// adds the chunks' sums in order. Many blocks however few the columns: one block per 32 columns
// (12 for 384 features on an H200's 132 SMs) took 20 us a pass.
#include <cstdint>

namespace trainbench::cuda {

constexpr int kPartialColumns = 32;
constexpr int kPartialLanes = 8;

// Rows [chunk_begin(rows, chunk, chunks), chunk_begin(rows, chunk + 1, chunks)) are chunk `chunk`.
__device__ __forceinline__ int64_t chunk_begin(int64_t rows, int64_t chunk, int64_t chunks) {
    return rows * chunk / chunks;
}

// Adds the lanes' `Values` sums of this thread's column (threadIdx.x) in lane order (threadIdx.y):
// on return, lane 0's `sums` hold the column's chunk totals. Every thread of the block calls it.
template <int Values>
__device__ __forceinline__ void add_lanes_in_order(float (&sums)[Values]) {
    __shared__ float lane_sums[Values][kPartialLanes][kPartialColumns + 1];
#pragma unroll
    for (int v = 0; v < Values; ++v) lane_sums[v][threadIdx.y][threadIdx.x] = sums[v];
    __syncthreads();
    if (threadIdx.y != 0) return;
#pragma unroll
    for (int v = 0; v < Values; ++v) {
        float total = 0.0f;
        for (int lane = 0; lane < kPartialLanes; ++lane) total += lane_sums[v][lane][threadIdx.x];
        sums[v] = total;
    }
}

}  // namespace trainbench::cuda
