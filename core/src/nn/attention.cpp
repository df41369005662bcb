#include "nn/attention.hpp"

// GCC 12 warns that the AVX-512 intrinsics Eigen's products and nn/vector_exp.hpp expand to
// leave their own unused "undefined" operands uninitialized (as in nn/onednn_linear.cpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>

#include "parallel/parallel_range.hpp"
#include "nn/onednn_matmul.hpp"
#include "nn/vector_exp.hpp"
#include "precision/half_float.hpp"
#include "precision/lane_sum.hpp"


namespace trainbench {

// One (batch, head) pair at a time, each on one thread, with single-threaded Eigen products
// over strided views of qkv, out and dqkv (their packing buffers live on the stack, so nothing
// is allocated; see nn/linear.cpp). Causality is exploited by row tiles of kTile: the scores of
// rows [r0, r1) are only computed against keys [0, r1), so only the diagonal tiles compute
// (and then discard) future positions, and T need not be a multiple of the tile.
namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstView = Eigen::Map<const RowMajor, 0, Eigen::OuterStride<>>;
using View = Eigen::Map<RowMajor, 0, Eigen::OuterStride<>>;

constexpr int64_t kTile = 64;

struct HeadShape {
    int64_t T, C, n_head, hs;
    float scale;         // 1/sqrt(hs) rounded to float, as torch multiplies a float tensor by it
    Precision products;  // the products' operands: fp32, or 16 bits (att and dS rounded first)
    bool rounds() const { return products != Precision::fp32; }
};

HeadShape head_shape(int64_t T, int64_t C, int64_t n_head, Precision products) {
    const int64_t hs = C / n_head;
    return {T, C, n_head, hs, static_cast<float>(1.0 / std::sqrt(static_cast<double>(hs))), products};
}

// a[j] = e^(a[j] - max_score) for j < n: the softmax's exponentials, vectorised
// (nn/vector_exp.hpp).
void exponentials(float* a, int64_t n, float max_score) {
    int64_t done = 0;
#if defined(__AVX512F__)
    const __m512 shift = _mm512_set1_ps(max_score);
    for (; done + 16 <= n; done += 16)
        _mm512_storeu_ps(a + done, exp_vectorizable(_mm512_sub_ps(_mm512_loadu_ps(a + done), shift)));
#endif
#pragma omp simd
    for (int64_t j = done; j < n; ++j) a[j] = exp_vectorizable(a[j] - max_score);
}

// The sum of a[0 .. n) in double.
double row_sum(const float* a, int64_t n) {
    return lane_sum(n, [&](int64_t j) { return static_cast<double>(a[j]); });
}

// exponentials, returning their sum.
double exponentiate(float* a, int64_t n, float max_score) {
    exponentials(a, n, max_score);
    return row_sum(a, n);
}

// Keys a softmax row t visits: t + 1 rounded up to 16 (a vector's worth), within the row.
int64_t padded_keys(int64_t t, int64_t T) { return std::min(T, (t + 16) / 16 * 16); }

// Rows t0 .. t0 + count - 1 of the causal softmax (count at most kSoftmaxRows), row i at
// a + i * T, their exponentials in place over their scores: softmax over keys 0..t of a * scale
// is a[j] * inv_sum, the future keys' exactly 0. Only the first `keys` = padded_keys(t, T)
// entries of a row are written: the loops run to t + 1 rounded up to 16 keys, the future ones in
// that stretch taking -inf scores, so that they vectorise without a scalar remainder (the rows
// are short, t + 1 keys, and those remainders took most of the softmax's time). The caller
// scales by inv_sum as it stores the row.
// Each step runs over all the rows before the next: their dependency chains (an exponential's
// polynomial, a sum's lanes added in order, the division) then overlap, where one row after
// another left the softmax waiting on them (3.9 ms of a 55 ms bf16 GPT update). A row gets the
// same operations in the same order as on its own.
struct SoftmaxRow {
    int64_t keys;
    float inv_sum;
};
constexpr int64_t kSoftmaxRows = 8;
void causal_rows(float* a, int64_t t0, int64_t count, int64_t T, float scale, SoftmaxRow* rows) {
    float max_scores[kSoftmaxRows];
    for (int64_t i = 0; i < count; ++i) {
        float* row = a + i * T;
        const int64_t t = t0 + i, keys = padded_keys(t, T);
        max_scores[i] = lane_max(keys, [&](int64_t j) {  // scaled and masked on the way
            row[j] = j <= t ? row[j] * scale : -std::numeric_limits<float>::infinity();
            return row[j];
        });
        rows[i].keys = keys;
    }
    for (int64_t i = 0; i < count; ++i) exponentials(a + i * T, rows[i].keys, max_scores[i]);
    for (int64_t i = 0; i < count; ++i) rows[i].inv_sum = static_cast<float>(1.0 / row_sum(a + i * T, rows[i].keys));
}

// Row t of the softmax's backward, in place over g (the row of dP) from p (the row of P):
// g = scale * (p o (g - <p, g>)), over the first padded_keys(t, T) entries (returned), where P
// is exactly 0 for the future keys, so they add nothing and get 0.
int64_t causal_softmax_backward_row(const float* p, float* g, int64_t t, int64_t T, float scale) {
    const int64_t keys = padded_keys(t, T);
    const float row_dot = static_cast<float>(lane_sum(keys, [&](int64_t j) { return static_cast<double>(p[j]) * g[j]; }));
#pragma omp simd
    for (int64_t j = 0; j < keys; ++j) g[j] = scale * (p[j] * (g[j] - row_dot));
    return keys;
}

// Multiply-adds of one pair's products (the score and value products over the lower triangle).
int64_t pair_work(const HeadShape& s) { return s.T * (s.T + 1) * s.hs + s.T * s.T; }

// One pair's attention over views of its q, k, v (T x hs) and y, and its T x T probabilities.
void pair_forward(const HeadShape& s, const ConstView& Q, const ConstView& K, const ConstView& V, View Y,
                  float* att_pair) {
    const int64_t T = s.T;
    Eigen::Map<RowMajor> A(att_pair, T, T);
    for (int64_t r0 = 0; r0 < T; r0 += kTile) {
        const int64_t r1 = std::min(T, r0 + kTile), n = r1 - r0;
        A.block(r0, 0, n, r1).noalias() = Q.middleRows(r0, n) * K.topRows(r1).transpose();
        for (int64_t t0 = r0; t0 < r1; t0 += kSoftmaxRows) {
            const int64_t count = std::min(kSoftmaxRows, r1 - t0);
            SoftmaxRow rows[kSoftmaxRows];
            causal_rows(att_pair + t0 * T, t0, count, T, s.scale, rows);
            for (int64_t i = 0; i < count; ++i) {
                float* a = att_pair + (t0 + i) * T;
                // Plain variables, not a structured binding: clang 14 cannot name one inside omp simd.
                const int64_t keys = rows[i].keys;
                const float inv_sum = rows[i].inv_sum;
#pragma omp simd
                for (int64_t j = 0; j < keys; ++j) a[j] *= inv_sum;
                if (s.rounds()) round_to_16bit_serial(s.products, a, keys);
                std::fill(a + keys, a + T, 0.0f);
            }
        }
        Y.middleRows(r0, n).noalias() = A.block(r0, 0, n, r1) * V.topRows(r1);
    }
}

void head_forward(const HeadShape& s, const float* qkv, float* out, float* att, int64_t pair) {
    const int64_t T = s.T, C = s.C, hs = s.hs;
    const int64_t b = pair / s.n_head, h = pair % s.n_head;
    const float* base = qkv + b * T * 3 * C + h * hs;
    pair_forward(s, ConstView(base, T, hs, Eigen::OuterStride<>(3 * C)),
                 ConstView(base + C, T, hs, Eigen::OuterStride<>(3 * C)),
                 ConstView(base + 2 * C, T, hs, Eigen::OuterStride<>(3 * C)),
                 View(out + b * T * C + h * hs, T, hs, Eigen::OuterStride<>(C)), att + pair * T * T);
}

// One pair's backward over views of its q, k, v, dy, dq, dk, dv and its probabilities:
//   dV = P^T dY,  dP = dY V^T,  dS = P o (dP - rowsum(P o dP)) (softmax),
//   dQ = scale dS K,  dK = scale dS^T Q.
// G (scratch, T x T) holds dP, then scale * dS; above the diagonal it is only read inside
// diagonal tiles, where it is set to 0. P, likewise, is only read up to the end of each row's
// tile (0 above the diagonal there).
void pair_backward(const HeadShape& s, const ConstView& Q, const ConstView& K, const ConstView& V,
                   const ConstView& dY, const float* att_pair, View dQ, View dK, View dV, float* G_data) {
    const int64_t T = s.T;
    Eigen::Map<const RowMajor> P(att_pair, T, T);
    Eigen::Map<RowMajor> G(G_data, T, T);
    for (int64_t r0 = 0; r0 < T; r0 += kTile) {
        const int64_t r1 = std::min(T, r0 + kTile), n = r1 - r0;
        G.block(r0, 0, n, r1).noalias() = dY.middleRows(r0, n) * V.topRows(r1).transpose();
        for (int64_t t = r0; t < r1; ++t) {
            // G is computed up to r1, which the padding never passes.
            float* g = G_data + t * T;
            const int64_t keys = causal_softmax_backward_row(att_pair + t * T, g, t, T, s.scale);
            if (s.rounds()) round_to_16bit_serial(s.products, g, keys);
            std::fill(g + keys, g + r1, 0.0f);
        }
        dQ.middleRows(r0, n).noalias() = G.block(r0, 0, n, r1) * K.topRows(r1);
    }
    // Column tiles: keys [c0, c1) are attended to by queries c0 .. T-1 only.
    for (int64_t c0 = 0; c0 < T; c0 += kTile) {
        const int64_t c1 = std::min(T, c0 + kTile), m = c1 - c0, below = T - c0;
        dK.middleRows(c0, m).noalias() = G.block(c0, c0, below, m).transpose() * Q.bottomRows(below);
        dV.middleRows(c0, m).noalias() = P.block(c0, c0, below, m).transpose() * dY.bottomRows(below);
    }
}

// Pair `pair`'s backward over the strided views of qkv, dout and dqkv.
void head_backward(const HeadShape& s, const float* dout, const float* qkv, const float* att, float* dqkv,
                   int64_t pair, float* G_data) {
    const int64_t T = s.T, C = s.C, hs = s.hs;
    const int64_t b = pair / s.n_head, h = pair % s.n_head;
    const float* base = qkv + b * T * 3 * C + h * hs;
    float* dbase = dqkv + b * T * 3 * C + h * hs;
    const Eigen::OuterStride<> qkv_rows(3 * C);
    pair_backward(s, ConstView(base, T, hs, qkv_rows), ConstView(base + C, T, hs, qkv_rows),
                  ConstView(base + 2 * C, T, hs, qkv_rows),
                  ConstView(dout + b * T * C + h * hs, T, hs, Eigen::OuterStride<>(C)), att + pair * T * T,
                  View(dbase, T, hs, qkv_rows), View(dbase + C, T, hs, qkv_rows), View(dbase + 2 * C, T, hs, qkv_rows),
                  G_data);
}

// --fused off, a pass at a time as eager PyTorch runs nanoGPT's attention: each function is one
// op over every (batch, head) pair's T x T matrix before the next op starts.

// att = q k^T (all T x T scores), for pairs [first, end).
void eager_scores(const HeadShape& s, const float* qkv, float* att, int64_t first, int64_t end) {
    const int64_t T = s.T, C = s.C, hs = s.hs;
    for (int64_t pair = first; pair < end; ++pair) {
        const int64_t b = pair / s.n_head, h = pair % s.n_head;
        const float* base = qkv + b * T * 3 * C + h * hs;
        ConstView Q(base, T, hs, Eigen::OuterStride<>(3 * C));
        ConstView K(base + C, T, hs, Eigen::OuterStride<>(3 * C));
        Eigen::Map<RowMajor>(att + pair * T * T, T, T).noalias() = Q * K.transpose();
    }
}

// Rows [first, end) of all pairs' T x T matrices: att = softmax(att) along each row, as torch's
// softmax (max, exp, sum in double as the fused kernel sums, scale by 1/sum).
void eager_softmax_rows(float* att, int64_t T, int64_t first, int64_t end) {
    for (int64_t row = first; row < end; ++row) {
        float* a = att + row * T;
        const float max_score = lane_max(T, [&](int64_t j) { return a[j]; });
        const float inv_sum = static_cast<float>(1.0 / exponentiate(a, T, max_score));
#pragma omp simd
        for (int64_t j = 0; j < T; ++j) a[j] *= inv_sum;
    }
}

// The causal mask on rows [first, end): entries above the diagonal set to `value`.
void eager_mask_rows(float* att, int64_t T, int64_t first, int64_t end, float value) {
    for (int64_t row = first; row < end; ++row) {
        const int64_t t = row % T;
        std::fill(att + row * T + t + 1, att + (row + 1) * T, value);
    }
}

void eager_scale(float* values, int64_t n, float factor) {
    parallel_range(n, 1, [&](int64_t first, int64_t end) {
#pragma omp simd
        for (int64_t i = first; i < end; ++i) values[i] *= factor;
    });
}

}  // namespace

void attention_forward_eager(const float* qkv, float* out, float* att, int64_t B, int64_t T, int64_t C,
                             int64_t n_head, Precision products) {
    const HeadShape s = head_shape(T, C, n_head, products);
    const int64_t pairs = B * n_head, rows = pairs * T;
    parallel_range(pairs, T * T * s.hs, [&](int64_t first, int64_t end) { eager_scores(s, qkv, att, first, end); });
    eager_scale(att, rows * T, s.scale);
    parallel_range(rows, T, [&](int64_t first, int64_t end) {
        eager_mask_rows(att, T, first, end, -std::numeric_limits<float>::infinity());
    });
    parallel_range(rows, 4 * T, [&](int64_t first, int64_t end) { eager_softmax_rows(att, T, first, end); });
    if (s.rounds()) round_to_16bit(products, att, rows * T);
    parallel_range(pairs, T * T * s.hs, [&](int64_t first, int64_t end) {
        for (int64_t pair = first; pair < end; ++pair) {
            const int64_t b = pair / s.n_head, h = pair % s.n_head;
            ConstView V(qkv + b * T * 3 * C + 2 * C + h * s.hs, T, s.hs, Eigen::OuterStride<>(3 * C));
            View Y(out + b * T * C + h * s.hs, T, s.hs, Eigen::OuterStride<>(C));
            Y.noalias() = Eigen::Map<const RowMajor>(att + pair * T * T, T, T) * V;
        }
    });
}

int64_t attention_eager_scratch_floats(int64_t B, int64_t T, int64_t n_head) { return B * n_head * T * T; }

void attention_backward_eager(const float* dout, const float* qkv, const float* att, float* dqkv, int64_t B,
                              int64_t T, int64_t C, int64_t n_head, float* scratch, Precision products) {
    const HeadShape s = head_shape(T, C, n_head, products);
    const int64_t pairs = B * n_head, rows = pairs * T, hs = s.hs;
    float* G = scratch;  // the gradient of att: dP, then dS
    // y = att v: dv = att^T dy, datt = dy v^T.
    parallel_range(pairs, 2 * T * T * hs, [&](int64_t first, int64_t end) {
        for (int64_t pair = first; pair < end; ++pair) {
            const int64_t b = pair / s.n_head, h = pair % s.n_head;
            ConstView V(qkv + b * T * 3 * C + 2 * C + h * hs, T, hs, Eigen::OuterStride<>(3 * C));
            ConstView dY(dout + b * T * C + h * hs, T, hs, Eigen::OuterStride<>(C));
            View dV(dqkv + b * T * 3 * C + 2 * C + h * hs, T, hs, Eigen::OuterStride<>(3 * C));
            Eigen::Map<const RowMajor> P(att + pair * T * T, T, T);
            dV.noalias() = P.transpose() * dY;
            Eigen::Map<RowMajor>(G + pair * T * T, T, T).noalias() = dY * V.transpose();
        }
    });
    // softmax: dS = P o (dP - rowsum(P o dP)).
    parallel_range(rows, 3 * T, [&](int64_t first, int64_t end) {
        for (int64_t row = first; row < end; ++row) {
            const float* p = att + row * T;
            float* g = G + row * T;
            double dot = 0.0;
#pragma omp simd reduction(+ : dot)
            for (int64_t j = 0; j < T; ++j) dot += static_cast<double>(p[j]) * g[j];
            const float row_dot = static_cast<float>(dot);
#pragma omp simd
            for (int64_t j = 0; j < T; ++j) g[j] = p[j] * (g[j] - row_dot);
        }
    });
    // masked_fill: no gradient reaches the masked scores; then the scale's.
    parallel_range(rows, T, [&](int64_t first, int64_t end) { eager_mask_rows(G, T, first, end, 0.0f); });
    eager_scale(G, rows * T, s.scale);
    if (s.rounds()) round_to_16bit(products, G, rows * T);
    // scores = q k^T: dq = dS k, dk = dS^T q.
    parallel_range(pairs, 2 * T * T * hs, [&](int64_t first, int64_t end) {
        for (int64_t pair = first; pair < end; ++pair) {
            const int64_t b = pair / s.n_head, h = pair % s.n_head;
            const float* base = qkv + b * T * 3 * C + h * hs;
            float* dbase = dqkv + b * T * 3 * C + h * hs;
            ConstView Q(base, T, hs, Eigen::OuterStride<>(3 * C));
            ConstView K(base + C, T, hs, Eigen::OuterStride<>(3 * C));
            Eigen::Map<const RowMajor> dS(G + pair * T * T, T, T);
            View(dbase, T, hs, Eigen::OuterStride<>(3 * C)).noalias() = dS * K;
            View(dbase + C, T, hs, Eigen::OuterStride<>(3 * C)).noalias() = dS.transpose() * Q;
        }
    });
}

void attention_forward(const float* qkv, float* out, float* att, int64_t B, int64_t T, int64_t C,
                       int64_t n_head, Precision products) {
    const HeadShape s = head_shape(T, C, n_head, products);
    parallel_range(B * n_head, pair_work(s), [&](int64_t first, int64_t end) {
        for (int64_t pair = first; pair < end; ++pair) head_forward(s, qkv, out, att, pair);
    });
}

int64_t attention_scratch_floats(int64_t /*B*/, int64_t T, int64_t /*C*/, int64_t /*n_head*/, int threads) {
    return static_cast<int64_t>(std::max(threads, 1)) * T * T;
}

void attention_backward(const float* dout, const float* qkv, const float* att, float* dqkv, int64_t B,
                        int64_t T, int64_t C, int64_t n_head, float* scratch, Precision products) {
    const HeadShape s = head_shape(T, C, n_head, products);
    const int64_t pairs = B * n_head;
    parallel_items(pairs, 2 * pair_work(s), [&](int member, int64_t first, int64_t end) {
        float* G = scratch + member * T * T;
        for (int64_t pair = first; pair < end; ++pair)
            head_backward(s, dout, qkv, att, dqkv, pair, G);
    });
}

// ---- 16-bit storage: a pair's q, k, v (and in the backward its probabilities) widened into a
// per-thread copy, its results rounded into storage as they are made.

int64_t attention_16bit_scratch_floats(int64_t T, int64_t C, int64_t n_head, int threads) {
    const int64_t hs = C / n_head;
    return static_cast<int64_t>(std::max(threads, 1)) * (4 * T * hs + 2 * T * T);
}

namespace {

// Pair (b, h)'s q, k and v from qkv's 16-bit codes into three contiguous T x hs blocks.
void widen_pair(Precision precision, const uint16_t* qkv, int64_t b, int64_t h, const HeadShape& s, float* into) {
    for (int part = 0; part < 3; ++part)
        load_16bit_rows(precision, qkv + b * s.T * 3 * s.C + part * s.C + h * s.hs, 3 * s.C, into + part * s.T * s.hs,
                        s.hs, s.T, s.hs);
}

}  // namespace

void attention_forward_16bit(Precision precision, const uint16_t* qkv, uint16_t* out, uint16_t* att, int64_t B,
                             int64_t T, int64_t C, int64_t n_head, float* scratch) {
    const HeadShape s = head_shape(T, C, n_head, precision);
    const int64_t hs = s.hs, pairs = B * n_head;
    const int64_t per_member = attention_16bit_scratch_floats(T, C, n_head, 1);
    parallel_items(pairs, pair_work(s), [&](int member, int64_t first, int64_t end) {
        float* q = scratch + member * per_member;  // q, k, v, then att's rows, then y
        float* a = q + 3 * T * hs;
        float* y = a + T * T;
        const Eigen::OuterStride<> rows(hs);
        for (int64_t pair = first; pair < end; ++pair) {
            const int64_t b = pair / n_head, h = pair % n_head;
            widen_pair(precision, qkv, b, h, s, q);
            pair_forward(s, ConstView(q, T, hs, rows), ConstView(q + T * hs, T, hs, rows),
                         ConstView(q + 2 * T * hs, T, hs, rows), View(y, T, hs, rows), a);
            store_16bit_serial(precision, a, att + pair * T * T, T * T);  // rounded already: exact
            store_16bit_rows(precision, y, hs, out + b * T * C + h * hs, C, T, hs);
        }
    });
}

void attention_backward_16bit(Precision precision, const float* dout, const uint16_t* qkv, const uint16_t* att,
                              float* dqkv, int64_t B, int64_t T, int64_t C, int64_t n_head, float* scratch) {
    const HeadShape s = head_shape(T, C, n_head, precision);
    const int64_t hs = s.hs, pairs = B * n_head;
    const int64_t per_member = attention_16bit_scratch_floats(T, C, n_head, 1);
    parallel_items(pairs, 2 * pair_work(s), [&](int member, int64_t first, int64_t end) {
        float* q = scratch + member * per_member;  // q, k, v, then P, then G
        float* p = q + 3 * T * hs;
        float* g = p + T * T;
        const Eigen::OuterStride<> rows(hs), qkv_rows(3 * C);
        for (int64_t pair = first; pair < end; ++pair) {
            const int64_t b = pair / n_head, h = pair % n_head;
            widen_pair(precision, qkv, b, h, s, q);
            // Row t of P up to the end of its row tile: the rest is never read (pair_backward).
            for (int64_t t0 = 0; t0 < T; t0 += kTile) {
                const int64_t tile_end = std::min(T, t0 + kTile);
                load_16bit_rows(precision, att + (pair * T + t0) * T, T, p + t0 * T, T, tile_end - t0, tile_end);
            }
            float* dbase = dqkv + b * T * 3 * C + h * hs;
            pair_backward(s, ConstView(q, T, hs, rows), ConstView(q + T * hs, T, hs, rows),
                          ConstView(q + 2 * T * hs, T, hs, rows),
                          ConstView(dout + b * T * C + h * hs, T, hs, Eigen::OuterStride<>(C)), p,
                          View(dbase, T, hs, qkv_rows), View(dbase + C, T, hs, qkv_rows),
                          View(dbase + 2 * C, T, hs, qkv_rows), g);
        }
    });
}

// ---- bf16 runs with oneDNN's products: a batch element's heads at a time, each of its six
// products one batched bf16 product (AMX or AVX512_BF16) over dense per-head copies, since the
// fast kernels take only dense matrices (a head's columns of qkv, strided, send 2.6 to a
// slower kernel). The products are square (T x T scores over every key): the causal half they
// compute and discard costs less than splitting them into tiles would.

namespace {

// One member's scratch: dense q, k, v and dY (or y) codes [n_head x T x hs] each, the scores
// or dP [n_head x T x T] in fp32, P's or dS's codes [n_head x T x T], and one fp32 result
// [n_head x T x hs], each 64-byte aligned.
struct OnednnAttentionScratch {
    uint16_t *q, *k, *v, *dy, *codes;
    float *scores, *result;
};

// Lays one member's scratch out from `base` into `s` and returns its floats; with base null it
// only counts them (the layout is described here once, for both).
int64_t lay_out_member(float* base, int64_t T, int64_t C, int64_t n_head, OnednnAttentionScratch& s) {
    int64_t used = 0;
    auto take = [&](int64_t floats) {
        float* at = base ? base + used : nullptr;
        used += (floats + 15) / 16 * 16;
        return at;
    };
    auto take_codes = [&](int64_t codes) { return reinterpret_cast<uint16_t*>(take((codes + 1) / 2)); };
    const int64_t square = n_head * T * T;
    s.q = take_codes(T * C);
    s.k = take_codes(T * C);
    s.v = take_codes(T * C);
    s.dy = take_codes(T * C);
    s.scores = take(square);
    s.codes = take_codes(square);
    s.result = take(T * C);
    return used;
}

int64_t onednn_member_floats(int64_t T, int64_t C, int64_t n_head) {
    OnednnAttentionScratch unused{};
    return lay_out_member(nullptr, T, C, n_head, unused);
}

OnednnAttentionScratch member_scratch(float* scratch, int member, int64_t T, int64_t C, int64_t n_head) {
    OnednnAttentionScratch s{};
    lay_out_member(scratch + member * onednn_member_floats(T, C, n_head), T, C, n_head, s);
    return s;
}

// The six products of one batch element, over dense [n_head x rows x cols] operands.
struct AttentionProducts {
    MatmulShape scores, values, grad_scores, grad_values, grad_queries, grad_keys;
};

AttentionProducts attention_products(int64_t T, int64_t C, int64_t n_head) {
    const int64_t hs = C / n_head, head = T * hs, square = T * T;
    auto product = [&](int64_t k, int64_t n, int64_t a_batch, int64_t a_row, int64_t a_col, int64_t b_batch,
                       int64_t b_row, int64_t b_col) {
        return MatmulShape{.operands = MatmulOperands::bf16, .m = T, .k = k, .n = n, .a_row = a_row, .a_col = a_col,
                           .b_row = b_row, .b_col = b_col, .c_row = n, .batch = n_head, .a_batch = a_batch,
                           .b_batch = b_batch, .c_batch = T * n};
    };
    AttentionProducts p;
    p.scores = product(hs, T, head, hs, 1, head, 1, hs);          // S = Q K^T
    p.grad_queries = product(T, hs, square, T, 1, head, hs, 1);   // dQ = dS K
    p.grad_values = product(T, hs, square, 1, T, head, hs, 1);    // dV = P^T dY
    p.grad_scores = p.scores;                                     // dP = dY V^T: S's shape
    p.grad_keys = p.grad_values;                                  // dK = dS^T Q: dV's shape
    p.values = p.grad_queries;                                    // Y = P V: dQ's shape, rounded to codes
    p.values.bf16_result = true;
    return p;
}

// n values from `from` to `to`, as a loop the compiler vectorises: a head's row is 32 or 64
// bytes, and std::copy_n made each a libc call (11% of the attention's time).
template <class Value>
inline void copy_row(const Value* from, Value* to, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) to[i] = from[i];
}

// Batch element b's q, k and v codes from qkv [B*T x 3C] into dense [n_head x T x hs] blocks.
void gather_heads(const uint16_t* qkv, int64_t b, int64_t T, int64_t C, int64_t n_head, const OnednnAttentionScratch& s) {
    const int64_t hs = C / n_head;
    for (int64_t t = 0; t < T; ++t) {
        const uint16_t* row = qkv + (b * T + t) * 3 * C;
        for (int64_t h = 0; h < n_head; ++h) {
            copy_row(row + h * hs, s.q + (h * T + t) * hs, hs);
            copy_row(row + C + h * hs, s.k + (h * T + t) * hs, hs);
            copy_row(row + 2 * C + h * hs, s.v + (h * T + t) * hs, hs);
        }
    }
}

// A dense [n_head x T x hs] fp32 result into its part of dqkv (offset 0, C or 2C in each row):
// its values, or where codes is given their bf16 codes there instead.
void scatter_heads(const float* result, float* dqkv, uint16_t* codes, int64_t offset, int64_t b, int64_t T, int64_t C,
                   int64_t n_head) {
    const int64_t hs = C / n_head;
    for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < n_head; ++h) {
            const int64_t at = (b * T + t) * 3 * C + offset + h * hs;
            const float* from = result + (h * T + t) * hs;
            if (!codes) {
                copy_row(from, dqkv + at, hs);
                continue;
            }
            uint16_t* to = codes + at;  // a loop of its own, as copy_row: a call per row cost more
#pragma omp simd
            for (int64_t i = 0; i < hs; ++i) to[i] = float_to_bf16(from[i]);
        }
}

}  // namespace

int64_t attention_onednn_scratch_floats(int64_t T, int64_t C, int64_t n_head, int threads) {
    return static_cast<int64_t>(std::max(threads, 1)) * onednn_member_floats(T, C, n_head);
}

int64_t attention_onednn_scratchpad_bytes(int64_t T, int64_t C, int64_t n_head) {
    const AttentionProducts p = attention_products(T, C, n_head);
    int64_t bytes = 0;
    for (const MatmulShape& shape : {p.scores, p.values, p.grad_scores, p.grad_values, p.grad_queries, p.grad_keys})
        bytes = std::max(bytes, onednn_scratchpad_bytes(shape, 1));
    return bytes;
}

void attention_onednn_prepare(OnednnProducts& products, int64_t T, int64_t C, int64_t n_head) {
    const AttentionProducts p = attention_products(T, C, n_head);
    for (const MatmulShape& shape : {p.scores, p.values, p.grad_scores, p.grad_values, p.grad_queries, p.grad_keys})
        products.prepare(shape, 1);
}

void attention_forward_onednn(OnednnProducts& products, const uint16_t* qkv, uint16_t* out, uint16_t* att, int64_t B,
                              int64_t T, int64_t C, int64_t n_head, float* scratch) {
    const HeadShape shape = head_shape(T, C, n_head, Precision::bf16);
    const AttentionProducts p = attention_products(T, C, n_head);
    const int64_t hs = shape.hs;
    parallel_items(B, n_head * pair_work(shape), [&](int member, int64_t first, int64_t end) {
        const OnednnAttentionScratch s = member_scratch(scratch, member, T, C, n_head);
        for (int64_t b = first; b < end; ++b) {
            gather_heads(qkv, b, T, C, n_head, s);
            products.run(p.scores, member, s.q, s.k, nullptr, s.scores);
            uint16_t* probabilities = att + b * n_head * T * T;  // the stored P, [n_head x T x T]
            for (int64_t h = 0; h < n_head; ++h)
                for (int64_t t0 = 0; t0 < T; t0 += kSoftmaxRows) {
                    const int64_t count = std::min(kSoftmaxRows, T - t0);
                    SoftmaxRow rows[kSoftmaxRows];
                    causal_rows(s.scores + (h * T + t0) * T, t0, count, T, shape.scale, rows);
                    for (int64_t i = 0; i < count; ++i) {
                        const float* a = s.scores + (h * T + t0 + i) * T;
                        uint16_t* codes = probabilities + (h * T + t0 + i) * T;
                        const int64_t keys = rows[i].keys;
                        const float inv_sum = rows[i].inv_sum;
#pragma omp simd
                        for (int64_t j = 0; j < keys; ++j) codes[j] = float_to_bf16(a[j] * inv_sum);
                        std::fill(codes + keys, codes + T, uint16_t{0});
                    }
                }
            products.run(p.values, member, probabilities, s.v, nullptr, s.dy);
            for (int64_t t = 0; t < T; ++t)
                for (int64_t h = 0; h < n_head; ++h)
                    copy_row(s.dy + (h * T + t) * hs, out + (b * T + t) * C + h * hs, hs);
        }
    });
}

void attention_backward_onednn(OnednnProducts& products, const float* dout, const uint16_t* qkv, const uint16_t* att,
                               float* dqkv, int64_t B, int64_t T, int64_t C, int64_t n_head, float* scratch,
                               uint16_t* dqkv_codes) {
    const HeadShape shape = head_shape(T, C, n_head, Precision::bf16);
    const AttentionProducts p = attention_products(T, C, n_head);
    const int64_t hs = shape.hs;
    parallel_items(B, n_head * 2 * pair_work(shape), [&](int member, int64_t first, int64_t end) {
        const OnednnAttentionScratch s = member_scratch(scratch, member, T, C, n_head);
        float* p_row = s.result;  // a row of P widened, before the result is needed
        for (int64_t b = first; b < end; ++b) {
            gather_heads(qkv, b, T, C, n_head, s);
            for (int64_t t = 0; t < T; ++t)
                for (int64_t h = 0; h < n_head; ++h)
                    store_16bit_serial(Precision::bf16, dout + (b * T + t) * C + h * hs, s.dy + (h * T + t) * hs, hs);
            const uint16_t* probabilities = att + b * n_head * T * T;
            products.run(p.grad_scores, member, s.dy, s.v, nullptr, s.scores);
            for (int64_t row = 0; row < n_head * T; ++row) {
                load_16bit_serial(Precision::bf16, probabilities + row * T, p_row, T);
                float* g = s.scores + row * T;
                const int64_t keys = causal_softmax_backward_row(p_row, g, row % T, T, shape.scale);
                store_16bit_serial(Precision::bf16, g, s.codes + row * T, keys);
                std::fill(s.codes + row * T + keys, s.codes + (row + 1) * T, uint16_t{0});
            }
            products.run(p.grad_values, member, probabilities, s.dy, nullptr, s.result);
            scatter_heads(s.result, dqkv, dqkv_codes, 2 * C, b, T, C, n_head);
            products.run(p.grad_queries, member, s.codes, s.k, nullptr, s.result);
            scatter_heads(s.result, dqkv, dqkv_codes, 0, b, T, C, n_head);
            products.run(p.grad_keys, member, s.codes, s.q, nullptr, s.result);
            scatter_heads(s.result, dqkv, dqkv_codes, C, b, T, C, n_head);
        }
    });
}

}  // namespace trainbench

#pragma GCC diagnostic pop
