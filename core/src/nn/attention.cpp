#include "nn/attention.hpp"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>

#include "parallel/parallel_range.hpp"
#include "nn/vector_exp.hpp"
#include "precision/half_float.hpp"

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

// a[j] = e^(a[j] - max_score) for j < n, returning their sum in double: the softmax's
// exponentials, vectorised (nn/vector_exp.hpp).
double exponentiate(float* a, int64_t n, float max_score) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) a[j] = exp_vectorizable(a[j] - max_score);
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < n; ++j) sum += a[j];
    return sum;
}

// Multiply-adds of one pair's products (the score and value products over the lower triangle).
int64_t pair_work(const HeadShape& s) { return s.T * (s.T + 1) * s.hs + s.T * s.T; }

void head_forward(const HeadShape& s, const float* qkv, float* out, float* att, int64_t pair) {
    const int64_t T = s.T, C = s.C, hs = s.hs;
    const int64_t b = pair / s.n_head, h = pair % s.n_head;
    const float* base = qkv + b * T * 3 * C + h * hs;
    ConstView Q(base, T, hs, Eigen::OuterStride<>(3 * C));
    ConstView K(base + C, T, hs, Eigen::OuterStride<>(3 * C));
    ConstView V(base + 2 * C, T, hs, Eigen::OuterStride<>(3 * C));
    View Y(out + b * T * C + h * hs, T, hs, Eigen::OuterStride<>(C));
    float* att_pair = att + pair * T * T;
    Eigen::Map<RowMajor> A(att_pair, T, T);
    for (int64_t r0 = 0; r0 < T; r0 += kTile) {
        const int64_t r1 = std::min(T, r0 + kTile), n = r1 - r0;
        A.block(r0, 0, n, r1).noalias() = Q.middleRows(r0, n) * K.topRows(r1).transpose();
        for (int64_t t = r0; t < r1; ++t) {
            // softmax over keys 0..t of (q k^T) * scale; future keys get exactly 0. The loops run
            // to t + 1 rounded up to 16 keys (within the row), the future ones in that stretch
            // taking -inf scores, so that they vectorise without a scalar remainder: the rows are
            // short (t + 1 keys), and those remainders took most of the softmax's time.
            float* a = att_pair + t * T;
            const int64_t n = std::min(T, (t + 16) / 16 * 16);
            float max_score = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : max_score)
            for (int64_t j = 0; j < n; ++j) {
                a[j] = j <= t ? a[j] * s.scale : -std::numeric_limits<float>::infinity();
                max_score = max_score > a[j] ? max_score : a[j];
            }
            const float inv_sum = static_cast<float>(1.0 / exponentiate(a, n, max_score));
#pragma omp simd
            for (int64_t j = 0; j < n; ++j) a[j] *= inv_sum;
            if (s.rounds()) round_to_16bit_serial(s.products, a, n);
            std::fill(a + n, a + T, 0.0f);
        }
        Y.middleRows(r0, n).noalias() = A.block(r0, 0, n, r1) * V.topRows(r1);
    }
}

// With P = att, dY = dout of this head, S the scaled scores:
//   dV = P^T dY,  dP = dY V^T,  dS = P o (dP - rowsum(P o dP)) (softmax),
//   dQ = scale dS K,  dK = scale dS^T Q.
// G (scratch, T x T) holds dP, then scale * dS; above the diagonal it is only read inside
// diagonal tiles, where it is set to 0.
void head_backward(const HeadShape& s, const float* dout, const float* qkv, const float* att, float* dqkv,
                   int64_t pair, float* G_data) {
    const int64_t T = s.T, C = s.C, hs = s.hs;
    const int64_t b = pair / s.n_head, h = pair % s.n_head;
    const float* base = qkv + b * T * 3 * C + h * hs;
    float* dbase = dqkv + b * T * 3 * C + h * hs;
    ConstView Q(base, T, hs, Eigen::OuterStride<>(3 * C));
    ConstView K(base + C, T, hs, Eigen::OuterStride<>(3 * C));
    ConstView V(base + 2 * C, T, hs, Eigen::OuterStride<>(3 * C));
    ConstView dY(dout + b * T * C + h * hs, T, hs, Eigen::OuterStride<>(C));
    View dQ(dbase, T, hs, Eigen::OuterStride<>(3 * C));
    View dK(dbase + C, T, hs, Eigen::OuterStride<>(3 * C));
    View dV(dbase + 2 * C, T, hs, Eigen::OuterStride<>(3 * C));
    const float* att_pair = att + pair * T * T;
    Eigen::Map<const RowMajor> P(att_pair, T, T);
    Eigen::Map<RowMajor> G(G_data, T, T);
    for (int64_t r0 = 0; r0 < T; r0 += kTile) {
        const int64_t r1 = std::min(T, r0 + kTile), n = r1 - r0;
        G.block(r0, 0, n, r1).noalias() = dY.middleRows(r0, n) * V.topRows(r1).transpose();
        for (int64_t t = r0; t < r1; ++t) {
            const float* p = att_pair + t * T;
            float* g = G_data + t * T;
            double dot = 0.0;
#pragma omp simd reduction(+ : dot)
            for (int64_t j = 0; j <= t; ++j) dot += static_cast<double>(p[j]) * g[j];
            const float row_dot = static_cast<float>(dot);
#pragma omp simd
            for (int64_t j = 0; j <= t; ++j) g[j] = s.scale * (p[j] * (g[j] - row_dot));
            if (s.rounds()) round_to_16bit_serial(s.products, g, t + 1);
            std::fill(g + t + 1, g + r1, 0.0f);
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
        float max_score = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : max_score)
        for (int64_t j = 0; j < T; ++j) max_score = max_score > a[j] ? max_score : a[j];
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
    parallel_members(pairs * 2 * pair_work(s), [&](int member, int members) {
        float* G = scratch + member * T * T;
        for (int64_t pair = pairs * member / members; pair < pairs * (member + 1) / members; ++pair)
            head_backward(s, dout, qkv, att, dqkv, pair, G);
    });
}

}  // namespace trainbench
