// Causal self-attention as nn/attention.cpp computes it, on the GPU: the four products per head
// are cuBLAS strided-batched SGEMMs over strided views of qkv, out and dqkv (no permute copies),
// one call per head batched over the samples (a head's columns sit at one stride from sample to
// sample, while consecutive heads of one sample do not continue that stride); the causal
// softmax and its backward are warp-per-row kernels. Full T x T products are computed and the
// future positions masked, so T need not be a multiple of any tile.
//
// 16-bit runs multiply 16-bit operands on the tensor cores with fp32 accumulation, at the
// rounding points nn/attention.hpp names for both engines: q, k, v and att are read from their
// 16-bit storage, the softmax rounds the probabilities as it stores them, the backward's softmax
// rounds scale * dS, and the output gradient arrives rounded (the caller's). So no fp32 copy of
// qkv or att is made, and the products run at the tensor cores' rate instead of as SGEMMs. Where
// the shapes allow (attention_in_tile_kernels), the whole attention runs in two kernels of our
// own on the tensor cores, flash-attention style in what they keep: the forward computes q k^T,
// the softmax and att v per 16-query tile with the scores and probabilities in shared memory, and
// keeps no att; the backward computes the tile's scores and probabilities again (the same bits)
// before dY V^T and the softmax's backward. Tiles above the diagonal are not computed at all. The
// function is the CPU's, rounding point for rounding point: only the memory differs (the
// [B, H, T, T] att is never stored; one head's recomputed probabilities and dS live in the scratch).
#include <algorithm>
#include <cmath>
#include <type_traits>

#include <mma.h>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/gpt_kernels.hpp"
#include "backend/cuda/storage_types.cuh"
#include "backend/cuda/warp_reductions.cuh"

namespace trainbench::cuda {
namespace {

constexpr int kRowsPerBlock = 8;  // one warp per row of att

// Row t of one (sample, head) pair holds q_t k_j for every key j; it becomes
// softmax_j<=t(scale * q_t k_j), exactly 0 for j > t. Same operations as the CPU op: scale in
// float, float exponentials, their sum in double.
__global__ void causal_softmax_kernel(float* __restrict__ att, int64_t rows, int64_t T, float scale) {
    const int lane = threadIdx.x % 32;
    const int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / 32;
    if (row >= rows) return;
    const int64_t t = row % T;
    float* a = att + row * T;
    float max_score = -INFINITY;
    for (int64_t j = lane; j <= t; j += 32) {
        const float s = a[j] * scale;
        a[j] = s;
        max_score = fmaxf(max_score, s);
    }
    max_score = warp_max(max_score);
    double sum = 0.0;
    for (int64_t j = lane; j <= t; j += 32) {
        const float e = expf(a[j] - max_score);
        a[j] = e;
        sum += e;
    }
    const float inv_sum = static_cast<float>(1.0 / warp_sum(sum));
    for (int64_t j = lane; j < T; j += 32) a[j] = j <= t ? a[j] * inv_sum : 0.0f;
}

// Head `head`'s d(att) rows for every sample ([B, T, T] in g) become scale * dS:
//   g_j = scale * p_j (g_j - sum_k p_k g_k) for j <= t, 0 above the diagonal.
__global__ void causal_softmax_backward_kernel(const float* __restrict__ att, float* __restrict__ g, int64_t B,
                                               int64_t T, int64_t n_head, int64_t head, float scale) {
    const int lane = threadIdx.x % 32;
    const int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / 32;  // b * T + t
    if (row >= B * T) return;
    const int64_t b = row / T, t = row % T;
    const float* p = att + ((b * n_head + head) * T + t) * T;
    float* d = g + row * T;
    double dot = 0.0;
    for (int64_t j = lane; j <= t; j += 32) dot += static_cast<double>(p[j]) * d[j];
    const float row_dot = static_cast<float>(warp_sum(dot));
    for (int64_t j = lane; j < T; j += 32) d[j] = j <= t ? scale * (p[j] * (d[j] - row_dot)) : 0.0f;
}

// One row of causal_softmax_16bit_kernel through a warp, each lane holding its values of the row
// in registers (T <= 32 * PerLane): the scores a[j] (j <= t) are read once and each exponential
// is computed once; the probabilities are stored rounded into p[0, T). The scaled score is a
// rounded product (__fmul_rn) before max_score is subtracted, as the CPU engine stores it: a plain
// `*` there would let nvcc fuse the product and the subtraction into one FMA.
template <typename H, int PerLane>
__device__ __forceinline__ void softmax_row_in_registers(const float* a, H* p, int64_t t, int64_t T, float scale,
                                                         int lane) {
    float value[PerLane];
    float max_score = -INFINITY;
#pragma unroll
    for (int k = 0; k < PerLane; ++k) {
        const int64_t j = lane + 32 * k;
        value[k] = j <= t ? a[j] : 0.0f;
        if (j <= t) max_score = fmaxf(max_score, __fmul_rn(value[k], scale));
    }
    max_score = warp_max(max_score);
    double sum = 0.0;
#pragma unroll
    for (int k = 0; k < PerLane; ++k)
        if (lane + 32 * k <= t) {
            value[k] = expf(__fmul_rn(value[k], scale) - max_score);
            sum += value[k];
        }
    const float inv_sum = static_cast<float>(1.0 / warp_sum(sum));
    __syncwarp();  // every lane has read its scores: p may be stored over them (the forward kernel)
#pragma unroll
    for (int k = 0; k < PerLane; ++k) {
        const int64_t j = lane + 32 * k;
        if (j < T) p[j] = store_from_float<H>(j <= t ? value[k] * inv_sum : 0.0f);
    }
}

// One row of causal_softmax_backward_16bit_kernel through a warp, p and d (= dY V^T) read once
// into registers: out[j] = scale * p_j (d_j - sum_k p_k d_k) rounded, 0 above the diagonal.
template <typename H, int PerLane>
__device__ __forceinline__ void softmax_backward_row_in_registers(const H* p, const float* d, H* out, int64_t t,
                                                                  int64_t T, float scale, int lane) {
    float probability[PerLane], gradient[PerLane];
    double dot = 0.0;
#pragma unroll
    for (int k = 0; k < PerLane; ++k) {
        const int64_t j = lane + 32 * k;
        probability[k] = j <= t ? load_as_float(p[j]) : 0.0f;
        gradient[k] = j <= t ? d[j] : 0.0f;
        if (j <= t) dot += static_cast<double>(probability[k]) * gradient[k];
    }
    const float row_dot = static_cast<float>(warp_sum(dot));
#pragma unroll
    for (int k = 0; k < PerLane; ++k) {
        const int64_t j = lane + 32 * k;
        if (j < T) out[j] = store_from_float<H>(j <= t ? scale * (probability[k] * (gradient[k] - row_dot)) : 0.0f);
    }
}

// causal_softmax_kernel's arithmetic on fp32 scores, storing the probabilities rounded to the
// 16-bit type H (exactly 0 above the diagonal). With PerLane > 0 (T <= 32 * PerLane) each lane
// keeps its values of the row in registers: the scores are read once and each exponential is
// computed once, where the loop over memory (PerLane 0) reads the row three times and computes
// the exponentials twice. The same operations in the same order either way.
template <typename H, int PerLane>
__global__ void causal_softmax_16bit_kernel(const float* __restrict__ scores, H* __restrict__ att, int64_t rows,
                                            int64_t T, float scale) {
    const int lane = threadIdx.x % 32;
    const int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / 32;
    if (row >= rows) return;
    const int64_t t = row % T;
    const float* a = scores + row * T;
    H* p = att + row * T;
    if constexpr (PerLane == 0) {
        float max_score = -INFINITY;
        for (int64_t j = lane; j <= t; j += 32) max_score = fmaxf(max_score, __fmul_rn(a[j], scale));
        max_score = warp_max(max_score);
        double sum = 0.0;
        for (int64_t j = lane; j <= t; j += 32) sum += expf(__fmul_rn(a[j], scale) - max_score);
        const float inv_sum = static_cast<float>(1.0 / warp_sum(sum));
        for (int64_t j = lane; j < T; j += 32)
            p[j] = store_from_float<H>(j <= t ? expf(__fmul_rn(a[j], scale) - max_score) * inv_sum : 0.0f);
    } else {
        softmax_row_in_registers<H, PerLane>(a, p, t, T, scale, lane);
    }
}

// causal_softmax_backward_kernel's arithmetic with 16-bit probabilities, storing scale * dS
// rounded to H into ds ([B, T, T], head `head`). PerLane as for causal_softmax_16bit_kernel: p
// and g read once into registers, or (0) twice from memory.
template <typename H, int PerLane>
__global__ void causal_softmax_backward_16bit_kernel(const H* __restrict__ att, const float* __restrict__ g,
                                                     H* __restrict__ ds, int64_t B, int64_t T, int64_t n_head,
                                                     int64_t head, float scale) {
    const int lane = threadIdx.x % 32;
    const int64_t row = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / 32;  // b * T + t
    if (row >= B * T) return;
    const int64_t b = row / T, t = row % T;
    const H* p = att + ((b * n_head + head) * T + t) * T;
    const float* d = g + row * T;
    H* out = ds + row * T;
    if constexpr (PerLane == 0) {
        double dot = 0.0;
        for (int64_t j = lane; j <= t; j += 32) dot += static_cast<double>(load_as_float(p[j])) * d[j];
        const float row_dot = static_cast<float>(warp_sum(dot));
        for (int64_t j = lane; j < T; j += 32)
            out[j] = store_from_float<H>(j <= t ? scale * (load_as_float(p[j]) * (d[j] - row_dot)) : 0.0f);
    } else {
        softmax_backward_row_in_registers<H, PerLane>(p, d, out, t, T, scale, lane);
    }
}

// The 16-bit attention's fused kernels (attention_in_tile_kernels): 16-query tiles, 4 warps.
constexpr int kScoreTile = 16;
constexpr int kScoreWarps = 4;

// A block's 16 rows of x y^T on the tensor cores (fp32 accumulation) for the key tiles 0..tile
// that the causal mask keeps, the warps taking the tiles in turn: x's rows at x (stride ldx), y's
// row j at y + j * ldy, `width` columns each (a multiple of 16), into out (row stride `stride`).
template <typename H>
__device__ __forceinline__ void causal_tile_products(const H* x, int64_t ldx, const H* y, int64_t ldy, int64_t width,
                                                     int64_t tile, float* out, int64_t stride, int warp) {
    for (int64_t key_tile = warp; key_tile <= tile; key_tile += kScoreWarps) {
        const H* keys = y + key_tile * kScoreTile * ldy;
        nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> product;
        nvcuda::wmma::fill_fragment(product, 0.0f);
        for (int64_t d = 0; d < width; d += 16) {
            nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, H, nvcuda::wmma::row_major> a;
            nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, H, nvcuda::wmma::col_major> b;
            nvcuda::wmma::load_matrix_sync(a, x + d, static_cast<unsigned>(ldx));     // a(t, d) = x[t][d]
            nvcuda::wmma::load_matrix_sync(b, keys + d, static_cast<unsigned>(ldy));  // b(d, j) = y[j][d]
            nvcuda::wmma::mma_sync(product, a, b, product);
        }
        nvcuda::wmma::store_matrix_sync(out + key_tile * kScoreTile, product, static_cast<unsigned>(stride),
                                        nvcuda::wmma::mem_row_major);
    }
}

// The whole 16-bit attention forward of a 16-query tile (attention_in_tile_kernels): block
// (16-query tile, head, sample), 4 warps. Each warp multiplies q's 16 rows by 16-key tiles of k
// on the tensor cores (fp32 accumulation) for the key tiles the causal mask keeps, into the
// block's fp32 scores in shared memory; each warp then takes 4 of the 16 rows through
// causal_softmax_16bit_kernel's arithmetic (registers, PerLane) and stores the probabilities
// rounded to H over the row's own scores (the first half of its bytes); then each warp
// multiplies those probabilities by v for one or more 16-column tiles of the head's output
// (fp32 accumulation over the kept key tiles, in order) and stores them rounded into out. Neither
// the scores nor the probabilities go to global memory: the backward computes them again.
template <typename H, int PerLane>
__global__ void causal_attention_forward_kernel(const H* __restrict__ qkv, H* __restrict__ out, int64_t T,
                                                int64_t C, int64_t n_head, float scale) {
    // scores [kScoreTile][T + 4], then a 16 x 16 tile per warp; 32-byte aligned for wmma
    extern __shared__ __align__(32) float shared[];
    const int64_t stride = T + 4;      // a multiple of 4 floats, as wmma's stores want
    float* scores = shared;
    float* staging = shared + kScoreTile * stride + (threadIdx.x / 32) * kScoreTile * kScoreTile;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t tile = blockIdx.x, head = blockIdx.y, b = blockIdx.z;
    const int64_t hs = C / n_head;
    const H* sample = qkv + b * T * 3 * C + head * hs;
    causal_tile_products(sample + tile * kScoreTile * 3 * C, 3 * C, sample + C, 3 * C, hs, tile, scores, stride, warp);
    __syncthreads();
    for (int r = warp; r < kScoreTile; r += kScoreWarps) {
        float* row = scores + r * stride;
        softmax_row_in_registers<H, PerLane>(row, reinterpret_cast<H*>(row), tile * kScoreTile + r, T, scale, lane);
    }
    __syncthreads();
    // The probabilities: row r at p + r * (2 * stride), 0 above the diagonal; row-major 16 x 16
    // tiles at p + key_tile * 16, as wmma's loads want (2 * stride a multiple of 8 values).
    const H* p = reinterpret_cast<const H*>(scores);
    const H* v = sample + 2 * C;
    H* y = out + (b * T + tile * kScoreTile) * C + head * hs;
    for (int64_t column_tile = warp; column_tile < hs / kScoreTile; column_tile += kScoreWarps) {
        nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> product;
        nvcuda::wmma::fill_fragment(product, 0.0f);
        for (int64_t key_tile = 0; key_tile <= tile; ++key_tile) {
            nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, H, nvcuda::wmma::row_major> a;
            nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, H, nvcuda::wmma::row_major> w;
            // a(t, j) = p[t][key_tile * 16 + j];  w(j, d) = v[key_tile * 16 + j][column_tile * 16 + d]
            nvcuda::wmma::load_matrix_sync(a, p + key_tile * kScoreTile, static_cast<unsigned>(2 * stride));
            nvcuda::wmma::load_matrix_sync(w, v + key_tile * kScoreTile * 3 * C + column_tile * kScoreTile,
                                           static_cast<unsigned>(3 * C));
            nvcuda::wmma::mma_sync(product, a, w, product);
        }
        nvcuda::wmma::store_matrix_sync(staging, product, kScoreTile, nvcuda::wmma::mem_row_major);
        __syncwarp();
        for (int i = lane; i < kScoreTile * kScoreTile; i += 32)
            y[(i / kScoreTile) * C + column_tile * kScoreTile + i % kScoreTile] = store_from_float<H>(staging[i]);
        __syncwarp();  // the tile is stored before the warp's next one overwrites the staging
    }
}

// The backward's counterpart (same shapes): block (16-query tile, sample) of head `head`. The
// warps first compute the tile's scores and probabilities again as the forward kernel did (the
// same products in the same order, the same softmax: the same bits), storing the probabilities
// rounded into p ([B, T, T] of this head, for dV = P^T dY after this kernel); then they multiply
// dY's 16 rows by 16-key tiles of v (G = dY V^T, fp32 accumulation) into shared memory for the
// key tiles the mask keeps, and each row goes through causal_softmax_backward_16bit_kernel's
// arithmetic (registers, PerLane) into ds ([B, T, T] of this head, 16 bits). Neither the scores
// nor G go to global memory.
template <typename H, int PerLane>
__global__ void causal_attention_backward_kernel(const H* __restrict__ dout, const H* __restrict__ qkv,
                                                 H* __restrict__ p, H* __restrict__ ds, int64_t T, int64_t C,
                                                 int64_t n_head, int64_t head, float scale) {
    extern __shared__ __align__(32) float rows[];  // [kScoreTile][T + 4]: the scores, then G (wmma: 32-byte aligned)
    const int64_t stride = T + 4;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t tile = blockIdx.x, b = blockIdx.y;
    const int64_t hs = C / n_head;
    const H* sample = qkv + b * T * 3 * C + head * hs;
    causal_tile_products(sample + tile * kScoreTile * 3 * C, 3 * C, sample + C, 3 * C, hs, tile, rows, stride, warp);
    __syncthreads();
    for (int r = warp; r < kScoreTile; r += kScoreWarps) {
        const int64_t t = tile * kScoreTile + r;
        softmax_row_in_registers<H, PerLane>(rows + r * stride, p + (b * T + t) * T, t, T, scale, lane);
    }
    __syncthreads();  // the scores are read before G takes their place; p is visible to the block
    const H* dy = dout + (b * T + tile * kScoreTile) * C + head * hs;
    causal_tile_products(dy, C, sample + 2 * C, 3 * C, hs, tile, rows, stride, warp);
    __syncthreads();
    for (int r = warp; r < kScoreTile; r += kScoreWarps) {
        const int64_t t = tile * kScoreTile + r;
        softmax_backward_row_in_registers<H, PerLane>(p + (b * T + t) * T, rows + r * stride, ds + (b * T + t) * T, t,
                                                      T, scale, lane);
    }
}

// The tile kernels' shared memory: a 16-query tile's fp32 scores (rows of T + 4 floats: a
// multiple of 4, as wmma's stores want), and in the forward a 16 x 16 fp32 tile per warp.
size_t forward_tile_shared_bytes(int64_t T) {
    return static_cast<size_t>(kScoreTile * (T + 4) + kScoreWarps * kScoreTile * kScoreTile) * sizeof(float);
}
size_t backward_tile_shared_bytes(int64_t T) { return static_cast<size_t>(kScoreTile * (T + 4)) * sizeof(float); }

// Calls launch.template operator()<PerLane>() with the fewest registers per lane that hold a row
// of T values (0: T too long for registers, the loops over memory).
template <typename Launch>
void with_values_per_lane(int64_t T, Launch&& launch) {
    if (T <= 32 * 8) launch.template operator()<8>();
    else if (T <= 32 * 32) launch.template operator()<32>();
    else launch.template operator()<0>();
}

unsigned row_blocks(int64_t rows) { return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock); }

// Column-major strided-batched product C = op(A) op(B), batched over the B samples.
struct Batched {
    cublasHandle_t blas;
    int batch;
    void operator()(cublasOperation_t trans_a, cublasOperation_t trans_b, int64_t m, int64_t n, int64_t k,
                    const float* a, int64_t lda, int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b,
                    float* c, int64_t ldc, int64_t stride_c) const {
        const float one = 1.0f, zero = 0.0f;
        TRAINBENCH_CUBLAS_CHECK(cublasSgemmStridedBatched(
            blas, trans_a, trans_b, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), &one, a,
            static_cast<int>(lda), stride_a, b, static_cast<int>(ldb), stride_b, &zero, c, static_cast<int>(ldc),
            stride_c, batch));
    }
};


// The same over 16-bit operands (cublasGemmStridedBatchedEx, fp32 accumulation), the result
// stored as `result` (fp32, or rounded once to the 16-bit type). Offsets and strides count
// elements; `at` turns an element offset into a pointer of the operands' or the result's type.
struct Batched16 {
    cublasHandle_t blas;
    int batch;
    StorageType operands;
    void operator()(cublasOperation_t trans_a, cublasOperation_t trans_b, int64_t m, int64_t n, int64_t k,
                    const void* a, int64_t lda, int64_t stride_a, const void* b, int64_t ldb, int64_t stride_b,
                    void* c, StorageType result, int64_t ldc, int64_t stride_c) const {
        const float one = 1.0f, zero = 0.0f;
        TRAINBENCH_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
            blas, trans_a, trans_b, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), &one, a,
            cuda_data_type(operands), static_cast<int>(lda), stride_a, b, cuda_data_type(operands),
            static_cast<int>(ldb), stride_b, &zero, c, cuda_data_type(result), static_cast<int>(ldc), stride_c, batch,
            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
};

template <typename P>
P* at(P* base, int64_t elements, StorageType type) {
    using Byte = std::conditional_t<std::is_const_v<P>, const char, char>;
    return reinterpret_cast<P*>(reinterpret_cast<Byte*>(base) + elements * storage_bytes(type));
}

}  // namespace

// In column-major terms (what cuBLAS sees), head h of sample b has Qc, Kc, Vc = [hs x T] at
// qkv + b*T*3C + h*hs (+C, +2C) with leading dimension 3C, Yc = [hs x T] at out + b*T*C + h*hs
// with leading dimension C, and the row-major att[t][j] is the column-major A(j, t), ld T.
void attention_scores(cublasHandle_t blas, const float* qkv, float* att, int64_t B, int64_t T, int64_t C,
                      int64_t n_head) {
    const int64_t hs = C / n_head;
    const Batched product{blas, static_cast<int>(B)};
    for (int64_t h = 0; h < n_head; ++h) {
        const float* q = qkv + h * hs;
        // A(j, t) = sum_d K(d, j) Q(d, t)
        product(CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, q + C, 3 * C, T * 3 * C, q, 3 * C, T * 3 * C, att + h * T * T, T,
                n_head * T * T);
    }
}

void attention_values(cublasHandle_t blas, const float* qkv, const float* att, float* out, int64_t B, int64_t T,
                      int64_t C, int64_t n_head) {
    const int64_t hs = C / n_head;
    const Batched product{blas, static_cast<int>(B)};
    for (int64_t h = 0; h < n_head; ++h) {
        // Yc(d, t) = sum_j V(d, j) A(j, t)
        product(CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, qkv + h * hs + 2 * C, 3 * C, T * 3 * C, att + h * T * T, T,
                n_head * T * T, out + h * hs, C, T * C);
    }
}

void attention_forward(cublasHandle_t blas, const float* qkv, float* out, float* att, int64_t B, int64_t T,
                       int64_t C, int64_t n_head, cudaStream_t stream) {
    if (B == 0 || T == 0) return;
    attention_scores(blas, qkv, att, B, T, C, n_head);
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(C / n_head)));
    causal_softmax_kernel<<<row_blocks(B * n_head * T), kRowsPerBlock * 32, 0, stream>>>(att, B * n_head * T, T,
                                                                                        scale);
    TRAINBENCH_CUDA_CHECK_LAUNCH();
    attention_values(blas, qkv, att, out, B, T, C, n_head);
}


// With P = att, G = d(att) (then scale * dS after the softmax backward):
//   dV = P^T dY,  G = dY V^T,  dQ = G K,  dK = G^T Q.
// Head h's G lies at G + h * g_head with stride g_sample from sample to sample, leading
// dimension T: [B, T, T] per head (g_head 0, g_sample T*T) or [B, H, T, T] (T*T, H*T*T).
namespace {

void value_gradients(const Batched& product, const float* dout, const float* qkv, const float* att, float* dqkv,
                     float* G, int64_t h, int64_t g_sample, int64_t T, int64_t C, int64_t n_head) {
    const int64_t hs = C / n_head;
    const float* v = qkv + h * hs + 2 * C;
    const float* dy = dout + h * hs;
    float* dv = dqkv + h * hs + 2 * C;
    const float* p = att + h * T * T;
    // dVc(d, j) = sum_t dYc(d, t) A(j, t)
    product(CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, dy, C, T * C, p, T, n_head * T * T, dv, 3 * C, T * 3 * C);
    // G(j, t) = sum_d V(d, j) dY(d, t)
    product(CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, v, 3 * C, T * 3 * C, dy, C, T * C, G, T, g_sample);
}

void query_key_gradients(const Batched& product, const float* qkv, const float* G, float* dqkv, int64_t h,
                         int64_t g_sample, int64_t T, int64_t C, int64_t n_head) {
    const int64_t hs = C / n_head;
    const float* q = qkv + h * hs;
    const float* k = q + C;
    float* dq = dqkv + h * hs;
    float* dk = dq + C;
    // dQc(d, t) = sum_j K(d, j) G(j, t)
    product(CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, k, 3 * C, T * 3 * C, G, T, g_sample, dq, 3 * C, T * 3 * C);
    // dKc(d, j) = sum_t Q(d, t) G(j, t)
    product(CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, q, 3 * C, T * 3 * C, G, T, g_sample, dk, 3 * C, T * 3 * C);
}

}  // namespace

void attention_backward(cublasHandle_t blas, const float* dout, const float* qkv, const float* att, float* dqkv,
                        float* scratch, int64_t B, int64_t T, int64_t C, int64_t n_head, cudaStream_t stream) {
    if (B == 0 || T == 0) return;
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(C / n_head)));
    const Batched product{blas, static_cast<int>(B)};
    float* G = scratch;  // [B, T, T]: one head at a time
    for (int64_t h = 0; h < n_head; ++h) {
        value_gradients(product, dout, qkv, att, dqkv, G, h, T * T, T, C, n_head);
        causal_softmax_backward_kernel<<<row_blocks(B * T), kRowsPerBlock * 32, 0, stream>>>(att, G, B, T, n_head, h,
                                                                                             scale);
        TRAINBENCH_CUDA_CHECK_LAUNCH();
        query_key_gradients(product, qkv, G, dqkv, h, T * T, T, C, n_head);
    }
}

void attention_value_gradients(cublasHandle_t blas, const float* dout, const float* qkv, const float* att,
                               float* dqkv, float* G, int64_t B, int64_t T, int64_t C, int64_t n_head) {
    const Batched product{blas, static_cast<int>(B)};
    for (int64_t h = 0; h < n_head; ++h)
        value_gradients(product, dout, qkv, att, dqkv, G + h * T * T, h, n_head * T * T, T, C, n_head);
}

void attention_query_key_gradients(cublasHandle_t blas, const float* qkv, const float* G, float* dqkv, int64_t B,
                                   int64_t T, int64_t C, int64_t n_head) {
    const Batched product{blas, static_cast<int>(B)};
    for (int64_t h = 0; h < n_head; ++h)
        query_key_gradients(product, qkv, G + h * T * T, dqkv, h, n_head * T * T, T, C, n_head);
}

// ---- 16-bit runs: the products on the tensor cores (see the file comment)

void allow_attention_tile_kernels_shared_memory() {
    // Above 48 KiB a kernel's dynamic shared memory must be asked for, per kernel: the forward's
    // above T 688, the backward's above 752, so only the kernels for rows of up to 1,024 values
    // (32 per lane; those for 256 need at most 21 KiB).
    const auto forward = static_cast<int>(forward_tile_shared_bytes(kAttentionTileMaxT));
    const auto backward = static_cast<int>(backward_tile_shared_bytes(kAttentionTileMaxT));
    auto allow = [&]<typename H>() {
        TRAINBENCH_CUDA_CHECK(cudaFuncSetAttribute(causal_attention_forward_kernel<H, 32>,
                                                   cudaFuncAttributeMaxDynamicSharedMemorySize, forward));
        TRAINBENCH_CUDA_CHECK(cudaFuncSetAttribute(causal_attention_backward_kernel<H, 32>,
                                                   cudaFuncAttributeMaxDynamicSharedMemorySize, backward));
    };
    allow.template operator()<__nv_bfloat16>();
    allow.template operator()<__half>();
}

void attention_forward_16bit(cublasHandle_t blas, const void* qkv, void* out, void* att, float* scores,
                             StorageType type, int64_t B, int64_t T, int64_t C, int64_t n_head, cudaStream_t stream) {
    if (B == 0 || T == 0) return;
    const int64_t hs = C / n_head;
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hs)));
    if (attention_in_tile_kernels(T, C, n_head)) {
        const dim3 grid(static_cast<unsigned>(T / kScoreTile), static_cast<unsigned>(n_head), static_cast<unsigned>(B));
        const size_t shared = forward_tile_shared_bytes(T);
        dispatch_storage(type, [&]<typename H>() {
            if constexpr (!std::is_same_v<H, float>) {
                with_values_per_lane(T, [&]<int PerLane>() {
                    if constexpr (PerLane > 0)
                        causal_attention_forward_kernel<H, PerLane><<<grid, kScoreWarps * 32, shared, stream>>>(
                            static_cast<const H*>(qkv), static_cast<H*>(out), T, C, n_head, scale);
                });
                TRAINBENCH_CUDA_CHECK_LAUNCH();
            }
        });
        return;
    }
    const Batched16 product{blas, static_cast<int>(B), type};
    for (int64_t h = 0; h < n_head; ++h) {
        const void* q = at(qkv, h * hs, type);
        // A(j, t) = sum_d K(d, j) Q(d, t), in fp32
        product(CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, at(q, C, type), 3 * C, T * 3 * C, q, 3 * C, T * 3 * C,
                scores + h * T * T, StorageType::f32, T, n_head * T * T);
    }
    dispatch_storage(type, [&]<typename H>() {
        if constexpr (!std::is_same_v<H, float>) {
            with_values_per_lane(T, [&]<int PerLane>() {
                causal_softmax_16bit_kernel<H, PerLane><<<row_blocks(B * n_head * T), kRowsPerBlock * 32, 0, stream>>>(
                    scores, static_cast<H*>(att), B * n_head * T, T, scale);
            });
            TRAINBENCH_CUDA_CHECK_LAUNCH();
        }
    });
    for (int64_t h = 0; h < n_head; ++h)
        // Yc(d, t) = sum_j V(d, j) A(j, t), rounded once into out
        product(CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, at(qkv, h * hs + 2 * C, type), 3 * C, T * 3 * C,
                at(att, h * T * T, type), T, n_head * T * T, at(out, h * hs, type), type, C, T * C);
}

void attention_backward_16bit(cublasHandle_t blas, const void* dout, const void* qkv, const void* att, float* dqkv,
                              float* scratch, StorageType type, int64_t B, int64_t T, int64_t C, int64_t n_head,
                              cudaStream_t stream) {
    if (B == 0 || T == 0) return;
    const int64_t hs = C / n_head;
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hs)));
    const Batched16 product{blas, static_cast<int>(B), type};
    // In the tile kernels: one head's probabilities computed again ([B, T, T], 16-bit), then its
    // scale * dS. Otherwise: [B, T, T] fp32, dY V^T of one head, then scale * dS of that head.
    const bool tile_kernels = attention_in_tile_kernels(T, C, n_head);
    float* G = scratch;
    void* P = scratch;
    void* dS = scratch + (tile_kernels ? attention_16bit_head_floats(B, T) : attention_16bit_g_floats(B, T));
    for (int64_t h = 0; h < n_head; ++h) {
        const void* q = at(qkv, h * hs, type);
        const void* k = at(q, C, type);
        const void* v = at(q, 2 * C, type);
        const void* dy = at(dout, h * hs, type);
        // This head's probabilities: [B, T, T] with sample stride p_sample.
        const void* p = tile_kernels ? P : at(att, h * T * T, type);
        const int64_t p_sample = tile_kernels ? T * T : n_head * T * T;
        dispatch_storage(type, [&]<typename H>() {
            if constexpr (!std::is_same_v<H, float>) {
                if (tile_kernels) {
                    const dim3 grid(static_cast<unsigned>(T / kScoreTile), static_cast<unsigned>(B));
                    const size_t shared = backward_tile_shared_bytes(T);
                    with_values_per_lane(T, [&]<int PerLane>() {
                        if constexpr (PerLane > 0)
                            causal_attention_backward_kernel<H, PerLane><<<grid, kScoreWarps * 32, shared, stream>>>(
                                static_cast<const H*>(dout), static_cast<const H*>(qkv), static_cast<H*>(P),
                                static_cast<H*>(dS), T, C, n_head, h, scale);
                    });
                } else {
                    // G(j, t) = sum_d V(d, j) dY(d, t)
                    product(CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, v, 3 * C, T * 3 * C, dy, C, T * C, G, StorageType::f32, T,
                            T * T);
                    with_values_per_lane(T, [&]<int PerLane>() {
                        causal_softmax_backward_16bit_kernel<H, PerLane><<<row_blocks(B * T), kRowsPerBlock * 32, 0, stream>>>(
                            static_cast<const H*>(att), G, static_cast<H*>(dS), B, T, n_head, h, scale);
                    });
                }
                TRAINBENCH_CUDA_CHECK_LAUNCH();
            }
        });
        // dVc(d, j) = sum_t dYc(d, t) A(j, t)
        product(CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, dy, C, T * C, p, T, p_sample, dqkv + h * hs + 2 * C,
                StorageType::f32, 3 * C, T * 3 * C);
        // dQc(d, t) = sum_j K(d, j) G(j, t);  dKc(d, j) = sum_t Q(d, t) G(j, t)
        product(CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, k, 3 * C, T * 3 * C, dS, T, T * T, dqkv + h * hs, StorageType::f32,
                3 * C, T * 3 * C);
        product(CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, q, 3 * C, T * 3 * C, dS, T, T * T, dqkv + h * hs + C,
                StorageType::f32, 3 * C, T * 3 * C);
    }
}

}  // namespace trainbench::cuda
