// The input embedding (nanoGPT's wte + wpe) and its backward without atomics: the rows of dout
// that reach an element of dwte or dwpe are added in one fixed order, so repeated tokens sum
// the same way on every run.
#include <algorithm>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/gpt_kernels.hpp"
#include "backend/cuda/storage_types.cuh"

namespace trainbench::cuda {
namespace {

constexpr int kThreads = 256;
// dwte of a larger vocabulary: a warp covers 32 columns of one range of vocabulary rows and scans
// every token of the micro-batch in (b, t) order, adding only those in its range; the ranges split
// the vocabulary into kVocabularyRanges parts, enough warps to fill the GPU while each scan stays
// a broadcast read.
// The block stages the tokens in shared memory, kTokenTile at a time, so that the scan reads
// them there (a broadcast to the warp) with several reads in flight.
constexpr int64_t kVocabularyRanges = 128;
constexpr int kRangesPerBlock = 8;
constexpr int kTokenTile = 2048;
// A small vocabulary (at most kVocabularyRanges rows, a character model's): one block per
// (vocabulary row, 32 columns), its kChunkWarps warps each summing one contiguous chunk of the
// tokens, then the chunks' sums added in chunk order. Scanning all tokens with one warp per row,
// as above, made a frequent token's row a chain of dependent global loads (0.7 ms per pass for
// the shakespeare_char GPT on an H200, 9% of a bf16 update's kernel time).
constexpr int kChunkWarps = 16;
// Matching tokens whose dout rows one warp loads before adding them (loads in flight).
constexpr int kLoadsInFlight = 4;

__global__ void embedding_forward_kernel(const int32_t* __restrict__ tokens, const float* __restrict__ wte,
                                         const float* __restrict__ wpe, float* __restrict__ out, int64_t rows,
                                         int64_t T, int64_t C) {
    const int64_t n = rows * C;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t r = i / C, c = i - r * C;
        out[i] = wte[static_cast<int64_t>(tokens[r]) * C + c] + wpe[(r % T) * C + c];
    }
}

// Every thread of the block takes part in staging the tokens, so none returns early.
__global__ void token_embedding_backward_kernel(const float* __restrict__ dout, const int32_t* __restrict__ tokens,
                                                float* __restrict__ dwte, int64_t rows, int64_t C, int64_t vocab,
                                                int64_t ranges, bool accumulate) {
    __shared__ int32_t tile[kTokenTile];
    const int64_t column = blockIdx.x * int64_t(32) + threadIdx.x;
    const int64_t range = blockIdx.y * int64_t(kRangesPerBlock) + threadIdx.y;
    const bool active = column < C && range < ranges;
    const int64_t first = vocab * range / ranges, end = vocab * (range + 1) / ranges;
    if (active && !accumulate)
        for (int64_t v = first; v < end; ++v) dwte[v * C + column] = 0.0f;
    const int thread = threadIdx.y * 32 + threadIdx.x;
    for (int64_t start = 0; start < rows; start += kTokenTile) {
        const int count = static_cast<int>(rows - start < kTokenTile ? rows - start : kTokenTile);
        __syncthreads();  // the previous tile is read by every warp
        for (int i = thread; i < count; i += 32 * kRangesPerBlock) tile[i] = tokens[start + i];
        __syncthreads();
        if (!active) continue;
#pragma unroll 8
        for (int i = 0; i < count; ++i) {
            const int64_t token = tile[i];
            if (token >= first && token < end) dwte[token * C + column] += dout[(start + i) * C + column];
        }
    }
}

// Row blockIdx.y of dwte, columns blockIdx.x * 32 + lane. Warp w takes tokens
// [rows * w / kChunkWarps, rows * (w + 1) / kChunkWarps), 32 at a time: a ballot finds those equal
// to the row, and their dout values are loaded kLoadsInFlight at a time and added in token order.
__global__ void small_vocabulary_backward_kernel(const float* __restrict__ dout, const int32_t* __restrict__ tokens,
                                                 float* __restrict__ dwte, int64_t rows, int64_t C,
                                                 bool accumulate) {
    __shared__ float chunk_sums[kChunkWarps][32];
    const int lane = threadIdx.x, warp = threadIdx.y;
    const int32_t row = static_cast<int32_t>(blockIdx.y);
    const int64_t column = blockIdx.x * int64_t(32) + lane;
    const bool active = column < C;
    const int64_t begin = rows * warp / kChunkWarps, end = rows * (warp + 1) / kChunkWarps;
    float sum = 0.0f;
    for (int64_t base = begin; base < end; base += 32) {
        const int64_t position = base + lane;
        unsigned matches = __ballot_sync(0xffffffffu, position < end && tokens[position] == row);
        while (matches != 0u) {
            float values[kLoadsInFlight];
#pragma unroll
            for (int k = 0; k < kLoadsInFlight; ++k) {
                values[k] = 0.0f;
                if (matches != 0u) {
                    const int offset = __ffs(static_cast<int>(matches)) - 1;
                    matches &= matches - 1u;
                    if (active) values[k] = dout[(base + offset) * C + column];
                }
            }
            // An empty slot adds 0.0f, which leaves the sum as it was (it starts at +0.0f and so
            // is never -0.0f, the one value x + 0.0f would change).
#pragma unroll
            for (int k = 0; k < kLoadsInFlight; ++k) sum += values[k];
        }
    }
    chunk_sums[warp][lane] = sum;
    __syncthreads();
    if (warp == 0 && active) {
        float total = accumulate ? dwte[row * C + column] : 0.0f;
        for (int w = 0; w < kChunkWarps; ++w) total += chunk_sums[w][lane];
        dwte[row * C + column] = total;
    }
}

// One thread per (position, column), adding the samples in order onto the current value.
__global__ void position_embedding_backward_kernel(const float* __restrict__ dout, float* __restrict__ dwpe,
                                                   int64_t B, int64_t T, int64_t C, bool accumulate) {
    const int64_t n = T * C;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        float sum = accumulate ? dwpe[i] : 0.0f;
        for (int64_t b = 0; b < B; ++b) sum += dout[b * T * C + i];
        dwpe[i] = sum;
    }
}

}  // namespace

void embedding_forward(const int32_t* tokens, const float* wte, const float* wpe, float* out, int64_t B,
                       int64_t T, int64_t C, cudaStream_t stream) {
    const int64_t n = B * T * C;
    if (n == 0) return;
    embedding_forward_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(tokens, wte, wpe, out, B * T, T, C);
    TRAINBENCH_CUDA_CHECK_LAUNCH();
}

void embedding_backward(const float* dout, const int32_t* tokens, float* dwte, float* dwpe, int64_t B, int64_t T,
                        int64_t C, int64_t vocab, bool accumulate_wte, bool accumulate_wpe, cudaStream_t stream) {
    if (B * T == 0 || C == 0) return;
    if (dwte != nullptr && vocab <= kVocabularyRanges) {
        const dim3 block(32, kChunkWarps);
        const dim3 grid(static_cast<unsigned>((C + 31) / 32), static_cast<unsigned>(vocab));
        small_vocabulary_backward_kernel<<<grid, block, 0, stream>>>(dout, tokens, dwte, B * T, C, accumulate_wte);
        TRAINBENCH_CUDA_CHECK_LAUNCH();
    } else if (dwte != nullptr) {
        const int64_t ranges = std::min(vocab, kVocabularyRanges);
        const dim3 block(32, kRangesPerBlock);
        const dim3 grid(static_cast<unsigned>((C + 31) / 32),
                        static_cast<unsigned>((ranges + kRangesPerBlock - 1) / kRangesPerBlock));
        token_embedding_backward_kernel<<<grid, block, 0, stream>>>(dout, tokens, dwte, B * T, C, vocab, ranges,
                                                                    accumulate_wte);
        TRAINBENCH_CUDA_CHECK_LAUNCH();
    }
    if (dwpe != nullptr) {
        position_embedding_backward_kernel<<<grid_for(T * C, kThreads), kThreads, 0, stream>>>(dout, dwpe, B, T, C,
                                                                                               accumulate_wpe);
        TRAINBENCH_CUDA_CHECK_LAUNCH();
    }
}

}  // namespace trainbench::cuda
