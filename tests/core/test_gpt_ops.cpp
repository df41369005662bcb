// The GPT kernels of core/src/nn (LayerNorm, causal attention, embedding, token cross-entropy,
// GELU) against PyTorch references (tests/fixtures/make_gpt_op_fixtures.py), plus what torch
// cannot check: bits independent of the worker team's size, the overwrite/accumulate modes of
// the gradient writes, and causality of the attention.
//
// Closeness is the relative error max_i |got_i - want_i| / max(1e-6, max_i |want_i|), which must
// be <= 1e-5 for every forward output and every gradient; each check prints its error.
#include <QtTest>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "nn/activation.hpp"
#include "nn/attention.hpp"
#include "nn/embedding.hpp"
#include "nn/layernorm.hpp"
#include "nn/loss.hpp"
#include "nn/onednn_matmul.hpp"
#include "nn/vector_exp.hpp"
#include "parallel/worker_team.hpp"
#include "precision/half_float.hpp"
#include "precision/lane_sum.hpp"
#include "trainbench/weights.hpp"

// Kernels never allocate: counted as in test_steady_state_allocation.
#include "core/allocation_counter.hpp"

using namespace trainbench;

namespace {

constexpr double kTolerance = 1e-5;
using Floats = std::vector<float>;

struct Fixture {
    std::map<std::string, NamedTensor> tensors;
    std::map<std::string, std::string> metadata;
};

const Fixture& fixture() {
    static const Fixture loaded = [] {
        Fixture f;
        for (auto& t : read_safetensors(std::string(TRAINBENCH_FIXTURES_DIR) + "/gpt_ops/gpt_ops.safetensors",
                                        &f.metadata))
            f.tensors[t.name] = std::move(t);
        return f;
    }();
    return loaded;
}

const NamedTensor& tensor(const std::string& name) {
    const auto found = fixture().tensors.find(name);
    if (found == fixture().tensors.end()) qFatal("fixture tensor %s missing", name.c_str());
    return found->second;
}
const Floats& values(const std::string& name) { return tensor(name).data; }

std::vector<int32_t> token_ids(const std::string& name) {
    std::vector<int32_t> ids;
    for (float v : values(name)) ids.push_back(static_cast<int32_t>(v));
    return ids;
}

double relative_error(const Floats& got, const Floats& want) {
    if (got.size() != want.size()) return INFINITY;
    double diff = 0.0, scale = 0.0;
    for (size_t i = 0; i < got.size(); ++i) {
        const double d = std::abs(static_cast<double>(got[i]) - want[i]);
        diff = std::isnan(d) ? INFINITY : std::max(diff, d);
        scale = std::max(scale, std::abs(static_cast<double>(want[i])));
    }
    return diff / std::max(1e-6, scale);
}

bool same_bits(const Floats& a, const Floats& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

Floats random_values(size_t n, uint32_t seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, scale);
    Floats v(n);
    for (auto& x : v) x = dist(rng);
    return v;
}

Floats nans(size_t n) { return Floats(n, std::nanf("")); }

// Runs `compute` (returning its outputs) on a team of one, then of two, and restores one.
template <class Compute>
std::vector<Floats> at_threads(int threads, Compute compute) {
    WorkerTeam::shared().resize(threads);
    auto outputs = compute();
    WorkerTeam::shared().resize(1);
    return outputs;
}

}  // namespace

#define CHECK_CLOSE(what, got, want, tolerance)                                                             \
    do {                                                                                                     \
        const double error_ = relative_error(got, want);                                                     \
        qInfo("%-36s relative error %.3g", qPrintable(QString(what)), error_);                              \
        QVERIFY2(error_ <= (tolerance),                                                                      \
                 qPrintable(QString("%1: relative error %2 > %3").arg(what).arg(error_).arg(tolerance)));   \
    } while (0)

// Causal attention in double from the given (16-bit-valued) qkv and dout, for one head layout as
// nn/attention.hpp describes it. With `rounding` 16-bit, the probabilities are rounded before
// att v and scale * dS before its products, as the engines round them; fp32: no rounding.
struct AttentionReference {
    Floats out, dqkv;
};
AttentionReference attention_reference(const Floats& qkv, const Floats& dout, int64_t B, int64_t T, int64_t C,
                                        int64_t n_head, Precision rounding) {
    const int64_t hs = C / n_head;
    const double scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hs)));
    auto round16 = [&](double v) {
        float f = static_cast<float>(v);
        if (rounding != Precision::fp32) round_to_16bit_serial(rounding, &f, 1);
        return static_cast<double>(f);
    };
    AttentionReference r{Floats(size_t(B * T * C)), Floats(size_t(B * T * 3 * C))};
    std::vector<double> P(size_t(T * T)), dS(size_t(T * T));
    for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < n_head; ++h) {
            auto q = [&](int64_t t, int64_t d) { return double(qkv[size_t((b * T + t) * 3 * C + h * hs + d)]); };
            auto k = [&](int64_t t, int64_t d) { return double(qkv[size_t((b * T + t) * 3 * C + C + h * hs + d)]); };
            auto v = [&](int64_t t, int64_t d) { return double(qkv[size_t((b * T + t) * 3 * C + 2 * C + h * hs + d)]); };
            auto dy = [&](int64_t t, int64_t d) { return double(dout[size_t((b * T + t) * C + h * hs + d)]); };
            for (int64_t t = 0; t < T; ++t) {
                double max_score = -INFINITY, sum = 0.0;
                std::vector<double> s(size_t(t + 1));
                for (int64_t j = 0; j <= t; ++j) {
                    for (int64_t d = 0; d < hs; ++d) s[size_t(j)] += q(t, d) * k(j, d);
                    s[size_t(j)] *= scale;
                    max_score = std::max(max_score, s[size_t(j)]);
                }
                for (int64_t j = 0; j <= t; ++j) sum += std::exp(s[size_t(j)] - max_score);
                for (int64_t j = 0; j < T; ++j)
                    P[size_t(t * T + j)] = j <= t ? round16(std::exp(s[size_t(j)] - max_score) / sum) : 0.0;
                for (int64_t d = 0; d < hs; ++d) {
                    double y = 0.0;
                    for (int64_t j = 0; j <= t; ++j) y += P[size_t(t * T + j)] * v(j, d);
                    r.out[size_t((b * T + t) * C + h * hs + d)] = float(y);
                }
                // dS = scale * P o (dP - rowsum(P o dP)), dP = dY V^T
                std::vector<double> dP(size_t(t + 1));
                double dot = 0.0;
                for (int64_t j = 0; j <= t; ++j) {
                    for (int64_t d = 0; d < hs; ++d) dP[size_t(j)] += dy(t, d) * v(j, d);
                    dot += P[size_t(t * T + j)] * dP[size_t(j)];
                }
                for (int64_t j = 0; j < T; ++j)
                    dS[size_t(t * T + j)] = j <= t ? round16(scale * P[size_t(t * T + j)] * (dP[size_t(j)] - dot)) : 0.0;
            }
            for (int64_t t = 0; t < T; ++t)
                for (int64_t d = 0; d < hs; ++d) {
                    double dq = 0.0, dk = 0.0, dv = 0.0;
                    for (int64_t j = 0; j < T; ++j) {
                        dq += dS[size_t(t * T + j)] * k(j, d);
                        dk += dS[size_t(j * T + t)] * q(j, d);
                        dv += P[size_t(j * T + t)] * dy(j, d);
                    }
                    const size_t row = size_t((b * T + t) * 3 * C + h * hs + d);
                    r.dqkv[row] = float(dq);
                    r.dqkv[row + size_t(C)] = float(dk);
                    r.dqkv[row + size_t(2 * C)] = float(dv);
                }
        }
    return r;
}

#define CHECK_SAME_BITS_AT_1_AND_2_THREADS(...)                                             \
    do {                                                                                      \
        const auto one_ = at_threads(1, __VA_ARGS__);                                         \
        const auto two_ = at_threads(2, __VA_ARGS__);                                         \
        QCOMPARE(one_.size(), two_.size());                                                   \
        for (size_t k_ = 0; k_ < one_.size(); ++k_) {                                         \
            QVERIFY2(!one_[k_].empty(), "no output");                                         \
            QVERIFY2(same_bits(one_[k_], two_[k_]),                                           \
                     qPrintable(QString("output %1 differs between 1 and 2 threads").arg(k_))); \
        }                                                                                     \
    } while (0)

class TestGptOps : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() {
        WorkerTeam::shared().resize(1);
        QVERIFY(!fixture().tensors.empty());
    }

    // ---- LayerNorm -----------------------------------------------------------------------

    void layernorm_matches_torch() {
        const auto& x = values("layernorm.x");
        const int64_t rows = tensor("layernorm.x").shape[0], C = tensor("layernorm.x").shape[1];
        const auto &w = values("layernorm.weight"), &b = values("layernorm.bias");
        Floats out = nans(rows * C), mean = nans(rows), rstd = nans(rows);
        layernorm_forward(x.data(), w.data(), b.data(), out.data(), mean.data(), rstd.data(), rows, C);
        CHECK_CLOSE("layernorm out", out, values("layernorm.out"), kTolerance);

        // The saved statistics, against double precision (torch does not return them).
        Floats want_mean(rows), want_rstd(rows);
        for (int64_t r = 0; r < rows; ++r) {
            double m = 0.0, v = 0.0;
            for (int64_t i = 0; i < C; ++i) m += x[r * C + i];
            m /= C;
            for (int64_t i = 0; i < C; ++i) v += (x[r * C + i] - m) * (x[r * C + i] - m);
            want_mean[r] = static_cast<float>(m);
            want_rstd[r] = static_cast<float>(1.0 / std::sqrt(v / C + 1e-5));
        }
        CHECK_CLOSE("layernorm mean", mean, want_mean, 1e-6);
        CHECK_CLOSE("layernorm rstd", rstd, want_rstd, 1e-6);

        // Overwrite mode must ignore what the buffers held (NaN here).
        Floats dx = nans(rows * C), dw = nans(C), db = nans(C);
        Floats scratch(layernorm_backward_scratch_floats(C));
        layernorm_backward(values("layernorm.dout").data(), x.data(), w.data(), mean.data(), rstd.data(), dx.data(),
                           dw.data(), db.data(), rows, C, GradientWrite::overwrite, GradientWrite::overwrite,
                           scratch.data());
        CHECK_CLOSE("layernorm dx", dx, values("layernorm.dx"), kTolerance);
        CHECK_CLOSE("layernorm dweight", dw, values("layernorm.dweight"), kTolerance);
        CHECK_CLOSE("layernorm dbias", db, values("layernorm.dbias"), kTolerance);
    }

    void layernorm_backward_accumulates() {
        const auto& x = values("layernorm.x");
        const int64_t rows = tensor("layernorm.x").shape[0], C = tensor("layernorm.x").shape[1];
        const auto &w = values("layernorm.weight"), &b = values("layernorm.bias"), &dout = values("layernorm.dout");
        Floats out(rows * C), mean(rows), rstd(rows), scratch(layernorm_backward_scratch_floats(C));
        layernorm_forward(x.data(), w.data(), b.data(), out.data(), mean.data(), rstd.data(), rows, C);
        auto backward = [&](Floats& dx, Floats& dw, Floats& db, GradientWrite input, GradientWrite params) {
            layernorm_backward(dout.data(), x.data(), w.data(), mean.data(), rstd.data(), dx.data(), dw.data(),
                               db.data(), rows, C, input, params, scratch.data());
        };
        Floats dx_once(rows * C), dw_once(C), db_once(C);
        backward(dx_once, dw_once, db_once, GradientWrite::overwrite, GradientWrite::overwrite);

        // Parameters: overwrite then accumulate = twice the gradient.
        Floats dx(rows * C), dw = nans(C), db = nans(C);
        backward(dx, dw, db, GradientWrite::overwrite, GradientWrite::overwrite);
        backward(dx, dw, db, GradientWrite::overwrite, GradientWrite::accumulate);
        Floats dw_twice(C), db_twice(C);
        for (int64_t i = 0; i < C; ++i) dw_twice[i] = 2.0f * dw_once[i], db_twice[i] = 2.0f * db_once[i];
        CHECK_CLOSE("layernorm dweight accumulated twice", dw, dw_twice, 1e-6);
        CHECK_CLOSE("layernorm dbias accumulated twice", db, db_twice, 1e-6);
        CHECK_CLOSE("layernorm dx overwritten twice", dx, dx_once, 0.0);

        // Input: added onto the residual stream's gradient; parameters left alone by neither.
        const Floats residual = random_values(rows * C, 1);
        Floats dx_acc = residual, want(rows * C);
        backward(dx_acc, dw, db, GradientWrite::accumulate, GradientWrite::overwrite);
        for (int64_t i = 0; i < rows * C; ++i) want[i] = residual[i] + dx_once[i];
        CHECK_CLOSE("layernorm dx accumulated", dx_acc, want, 1e-6);
        CHECK_CLOSE("layernorm dweight overwritten again", dw, dw_once, 0.0);
    }

    void layernorm_bits_do_not_depend_on_threads() {
        // Big enough that both kernels split across the team (parallel_range's threshold).
        const int64_t rows = 4096, C = 128;
        const Floats x = random_values(rows * C, 2, 3.0f), w = random_values(C, 3), b = random_values(C, 4);
        const Floats dout = random_values(rows * C, 5);
        CHECK_SAME_BITS_AT_1_AND_2_THREADS([&] {
            Floats out(rows * C), mean(rows), rstd(rows), dx(rows * C), dw(C), db(C);
            Floats scratch(layernorm_backward_scratch_floats(C));
            layernorm_forward(x.data(), w.data(), b.data(), out.data(), mean.data(), rstd.data(), rows, C);
            layernorm_backward(dout.data(), x.data(), w.data(), mean.data(), rstd.data(), dx.data(), dw.data(),
                               db.data(), rows, C, GradientWrite::overwrite, GradientWrite::overwrite, scratch.data());
            return std::vector<Floats>{out, mean, rstd, dx, dw, db};
        });
    }

    // ---- Attention -----------------------------------------------------------------------

    void attention_matches_torch_data() {
        QTest::addColumn<QString>("name");
        QTest::newRow("B 2, T 13, C 32, 4 heads") << "attention_t13";
        QTest::newRow("B 2, T 16, C 32, 4 heads") << "attention_t16";
        QTest::newRow("B 1, T 70, C 16, 2 heads (two row tiles)") << "attention_t70";
    }
    void attention_matches_torch() {
        QFETCH(QString, name);
        const std::string n = name.toStdString();
        const auto& shape = tensor(n + ".qkv").shape;
        const int64_t B = shape[0], T = shape[1], C = shape[2] / 3;
        const int64_t n_head = std::stoll(fixture().metadata.at(n + ".n_head"));
        const auto& qkv = values(n + ".qkv");
        Floats out = nans(B * T * C), att = nans(B * n_head * T * T), dqkv = nans(B * T * 3 * C);
        attention_forward(qkv.data(), out.data(), att.data(), B, T, C, n_head, Precision::fp32);
        CHECK_CLOSE(name + " out", out, values(n + ".out"), kTolerance);
        CHECK_CLOSE(name + " att", att, values(n + ".att"), kTolerance);
        Floats scratch(attention_scratch_floats(B, T, C, n_head, WorkerTeam::shared().members()));
        attention_backward(values(n + ".dout").data(), qkv.data(), att.data(), dqkv.data(), B, T, C, n_head,
                           scratch.data(), Precision::fp32);
        CHECK_CLOSE(name + " dqkv", dqkv, values(n + ".dqkv"), kTolerance);
    }

    void attention_is_causal() {
        const int64_t B = 1, T = 70, C = 16, n_head = 2;
        Floats qkv = random_values(B * T * 3 * C, 6);
        Floats out(B * T * C), att = nans(B * n_head * T * T);
        attention_forward(qkv.data(), out.data(), att.data(), B, T, C, n_head, Precision::fp32);
        for (int64_t h = 0; h < n_head; ++h)
            for (int64_t t = 0; t < T; ++t) {
                double row_sum = 0.0;
                for (int64_t j = 0; j < T; ++j) {
                    const float p = att[(h * T + t) * T + j];
                    if (j > t) QVERIFY2(p == 0.0f, qPrintable(QString("att[%1, %2, %3] = %4").arg(h).arg(t).arg(j).arg(p)));
                    else QVERIFY2(p > 0.0f, "a visible position has probability 0");
                    row_sum += p;
                }
                QVERIFY2(std::abs(row_sum - 1.0) < 1e-5, qPrintable(QString("row sum %1").arg(row_sum)));
            }

        // Changing q, k and v of positions >= t0 leaves the outputs before t0 exactly as they
        // were, and changes those from t0 on.
        const int64_t t0 = 40;
        Floats changed = qkv;
        for (int64_t i = t0 * 3 * C; i < T * 3 * C; ++i) changed[i] += 1.0f;
        Floats out_changed(B * T * C), att_changed(B * n_head * T * T);
        attention_forward(changed.data(), out_changed.data(), att_changed.data(), B, T, C, n_head, Precision::fp32);
        QVERIFY(std::memcmp(out.data(), out_changed.data(), t0 * C * sizeof(float)) == 0);
        for (int64_t t = t0; t < T; ++t)
            QVERIFY2(std::memcmp(out.data() + t * C, out_changed.data() + t * C, C * sizeof(float)) != 0,
                     qPrintable(QString("output %1 ignored its own position").arg(t)));

        // A gradient at output t0 only reaches q of t0 and k, v of positions <= t0.
        Floats dout(B * T * C, 0.0f), dqkv = nans(B * T * 3 * C);
        for (int64_t i = 0; i < C; ++i) dout[t0 * C + i] = 1.0f + 0.1f * i;
        Floats scratch(attention_scratch_floats(B, T, C, n_head, WorkerTeam::shared().members()));
        attention_backward(dout.data(), qkv.data(), att.data(), dqkv.data(), B, T, C, n_head, scratch.data(), Precision::fp32);
        for (int64_t t = 0; t < T; ++t)
            for (int64_t part = 0; part < 3; ++part) {
                const bool reached = part == 0 ? t == t0 : t <= t0;
                double norm = 0.0;
                for (int64_t i = 0; i < C; ++i) norm += std::abs(dqkv[t * 3 * C + part * C + i]);
                QVERIFY2(reached ? norm > 0.0 : norm == 0.0,
                         qPrintable(QString("d%1 at position %2: |g| = %3").arg("qkv"[part]).arg(t).arg(norm)));
            }
    }

    void attention_bits_do_not_depend_on_threads() {
        const int64_t B = 2, T = 100, C = 64, n_head = 4;  // 8 pairs, two row tiles each
        const Floats qkv = random_values(B * T * 3 * C, 7), dout = random_values(B * T * C, 8);
        CHECK_SAME_BITS_AT_1_AND_2_THREADS([&] {
            Floats out(B * T * C), att(B * n_head * T * T), dqkv(B * T * 3 * C);
            Floats scratch(attention_scratch_floats(B, T, C, n_head, WorkerTeam::shared().members()));
            attention_forward(qkv.data(), out.data(), att.data(), B, T, C, n_head, Precision::fp32);
            attention_backward(dout.data(), qkv.data(), att.data(), dqkv.data(), B, T, C, n_head, scratch.data(), Precision::fp32);
            return std::vector<Floats>{out, att, dqkv};
        });
    }

    // 16-bit runs multiply 16-bit operands: the probabilities and scale * dS are rounded before
    // their products (nn/attention.hpp). Both forms, against fp64 references of the same inputs
    // with and without those roundings: the engine lies at fp32 rounding from the first and a
    // 16-bit rounding from the second.
    void sixteen_bit_attention_rounds_its_product_operands_data() {
        QTest::addColumn<int>("precision");
        QTest::addColumn<bool>("fused");
        for (Precision p : {Precision::bf16, Precision::fp16})
            for (bool fused : {true, false})
                QTest::newRow((to_string(p) + (fused ? "-fused" : "-eager")).c_str()) << int(p) << fused;
    }
    void sixteen_bit_attention_rounds_its_product_operands() {
        QFETCH(int, precision);
        QFETCH(bool, fused);
        const Precision p = Precision(precision);
        const int64_t B = 2, T = 70, C = 24, n_head = 3;  // T past one 64-row tile
        Floats qkv = random_values(B * T * 3 * C, 21, 2.0f), dout = random_values(B * T * C, 22);
        round_to_16bit(p, qkv.data(), int64_t(qkv.size()));  // as the engines widen them from 16 bits
        round_to_16bit(p, dout.data(), int64_t(dout.size()));
        Floats out = nans(B * T * C), att = nans(B * n_head * T * T), dqkv = nans(B * T * 3 * C);
        if (fused) {
            Floats scratch(attention_scratch_floats(B, T, C, n_head, WorkerTeam::shared().members()));
            attention_forward(qkv.data(), out.data(), att.data(), B, T, C, n_head, p);
            attention_backward(dout.data(), qkv.data(), att.data(), dqkv.data(), B, T, C, n_head, scratch.data(), p);
        } else {
            Floats scratch(attention_eager_scratch_floats(B, T, n_head));
            attention_forward_eager(qkv.data(), out.data(), att.data(), B, T, C, n_head, p);
            attention_backward_eager(dout.data(), qkv.data(), att.data(), dqkv.data(), B, T, C, n_head, scratch.data(), p);
        }
        Floats rounded_att = att;  // the saved probabilities are the rounded ones
        round_to_16bit(p, rounded_att.data(), int64_t(att.size()));
        QVERIFY(same_bits(rounded_att, att));
        const AttentionReference with = attention_reference(qkv, dout, B, T, C, n_head, p);
        const AttentionReference without = attention_reference(qkv, dout, B, T, C, n_head, Precision::fp32);
        const double out_error = relative_error(out, with.out), dqkv_error = relative_error(dqkv, with.dqkv);
        const double out_unrounded = relative_error(out, without.out), dqkv_unrounded = relative_error(dqkv, without.dqkv);
        qInfo("out %.3g (%.3g from the unrounded reference), dqkv %.3g (%.3g)", out_error, out_unrounded, dqkv_error,
              dqkv_unrounded);
        // A probability that fp32 and fp64 put on either side of a 16-bit rounding boundary moves
        // one term by a 16-bit step, so the bound is a few fp32 roundings, not one.
        QVERIFY(out_error < 2e-5 && dqkv_error < 2e-5);
        QVERIFY(out_unrounded > 10 * out_error && dqkv_unrounded > 10 * dqkv_error);
    }

    // The 16-bit storage path (q, k, v and P widened from their codes into per-thread scratch)
    // against the fp32-storage path from the same rounded operands, with its scratch full of NaN
    // beforehand: whatever it reads it has written first (P only up to each row's tile end).
    void sixteen_bit_storage_attention_reads_only_what_it_widened_data() {
        QTest::addColumn<int>("precision");
        QTest::addColumn<int>("T");
        for (Precision p : {Precision::bf16, Precision::fp16})
            for (int T : {70, 130}) QTest::newRow((to_string(p) + "-T-" + std::to_string(T)).c_str()) << int(p) << T;
    }
    void sixteen_bit_storage_attention_reads_only_what_it_widened() {
        QFETCH(int, precision);
        QFETCH(int, T);
        const Precision p = Precision(precision);
        const int64_t B = 2, C = 24, n_head = 3;
        Floats qkv = random_values(B * T * 3 * C, 41, 2.0f), dout = random_values(B * T * C, 42);
        round_to_16bit(p, qkv.data(), int64_t(qkv.size()));
        round_to_16bit(p, dout.data(), int64_t(dout.size()));
        std::vector<uint16_t> qkv16(qkv.size()), out16(size_t(B * T * C)), att16(size_t(B * n_head * T * T));
        store_16bit(p, qkv.data(), qkv16.data(), int64_t(qkv.size()));
        const int threads = WorkerTeam::shared().members();
        Floats scratch = nans(size_t(attention_16bit_scratch_floats(T, C, n_head, threads))), dqkv = nans(qkv.size());
        attention_forward_16bit(p, qkv16.data(), out16.data(), att16.data(), B, T, C, n_head, scratch.data());
        std::fill(scratch.begin(), scratch.end(), std::nanf(""));
        attention_backward_16bit(p, dout.data(), qkv16.data(), att16.data(), dqkv.data(), B, T, C, n_head, scratch.data());
        // The fp32-storage path with the same rounding points (checked against fp64 above)
        // computes the same function from the same values: the same bits.
        Floats out32 = nans(size_t(B * T * C)), att32 = nans(size_t(B * n_head * T * T)), dqkv32 = nans(qkv.size());
        Floats scratch32(size_t(attention_scratch_floats(B, T, C, n_head, threads)));
        attention_forward(qkv.data(), out32.data(), att32.data(), B, T, C, n_head, p);
        attention_backward(dout.data(), qkv.data(), att32.data(), dqkv32.data(), B, T, C, n_head, scratch32.data(), p);
        round_to_16bit(p, out32.data(), int64_t(out32.size()));  // as the 16-bit path stores it
        Floats out(out16.size()), att(att16.size());
        load_16bit(p, out16.data(), out.data(), int64_t(out.size()));
        load_16bit(p, att16.data(), att.data(), int64_t(att.size()));
        QVERIFY(same_bits(att, att32));
        QVERIFY(same_bits(out, out32));
        QVERIFY(same_bits(dqkv, dqkv32));
    }

    // bf16 runs with oneDNN's products: a batch element's heads as batched bf16 products over
    // 16-bit storage, against the fp64 reference from the same rounded operands (P and dS
    // rounded), as the Eigen path is checked above; the saved probabilities are P's codes; and
    // dqkv handed over as codes is dqkv rounded.
    void onednn_attention_matches_the_rounded_reference_data() {
        QTest::addColumn<int>("B");
        QTest::addColumn<int>("T");
        QTest::addColumn<int>("C");
        QTest::addColumn<int>("n_head");
        QTest::addColumn<int>("threads");
        QTest::newRow("odd-T-70-hs-8-1t") << 2 << 70 << 24 << 3 << 1;
        QTest::newRow("odd-T-70-hs-8-2t") << 3 << 70 << 24 << 3 << 2;
        QTest::newRow("gpt-bench-T-128-hs-32-2t") << 3 << 128 << 128 << 4 << 2;
    }
    void onednn_attention_matches_the_rounded_reference() {
        QFETCH(int, B);
        QFETCH(int, T);
        QFETCH(int, C);
        QFETCH(int, n_head);
        QFETCH(int, threads);
        if (!onednn_has_native_bf16()) QSKIP("this CPU has neither AMX nor AVX512_BF16: bf16 runs multiply in Eigen");
        WorkerTeam::shared().resize(threads);
        const Precision p = Precision::bf16;
        Floats qkv = random_values(int64_t(B) * T * 3 * C, 31, 2.0f), dout = random_values(int64_t(B) * T * C, 32);
        round_to_16bit(p, qkv.data(), int64_t(qkv.size()));
        // The oneDNN backward is given dout unrounded, as the engine gives it, and rounds it
        // itself; the references (and the Eigen path, whose caller rounds) take it rounded.
        const Floats dout_given = dout;
        round_to_16bit(p, dout.data(), int64_t(dout.size()));
        std::vector<uint16_t> qkv16(qkv.size()), out16(size_t(B) * T * C), att16(size_t(B) * n_head * T * T, 0xffff);
        store_16bit(p, qkv.data(), qkv16.data(), int64_t(qkv.size()));
        const int64_t scratchpad = attention_onednn_scratchpad_bytes(T, C, n_head);
        std::vector<char> scratchpads(size_t(std::max<int64_t>(1, scratchpad * threads)));
        OnednnProducts products(threads, scratchpads.data(), scratchpad);
        attention_onednn_prepare(products, T, C, n_head);
        Floats scratch(attention_onednn_scratch_floats(T, C, n_head, threads)), dqkv = nans(int64_t(B) * T * 3 * C);
        attention_forward_onednn(products, qkv16.data(), out16.data(), att16.data(), B, T, C, n_head, scratch.data());
        attention_backward_onednn(products, dout_given.data(), qkv16.data(), att16.data(), dqkv.data(), B, T, C, n_head,
                                  scratch.data());
        Floats out(out16.size()), att(att16.size());
        load_16bit(p, out16.data(), out.data(), int64_t(out.size()));
        load_16bit(p, att16.data(), att.data(), int64_t(att.size()));
        const AttentionReference with = attention_reference(qkv, dout, B, T, C, n_head, p);
        // P's codes: within a bf16 step of the probabilities fp32 products give, and exactly 0
        // above the diagonal.
        Floats out32 = nans(int64_t(B) * T * C), att32 = nans(int64_t(B) * n_head * T * T);
        attention_forward(qkv.data(), out32.data(), att32.data(), B, T, C, n_head, Precision::fp32);
        for (int64_t pair = 0; pair < int64_t(B) * n_head; ++pair)
            for (int64_t t = 0; t < T; ++t)
                for (int64_t j = t + 1; j < T; ++j) QCOMPARE(att16[size_t((pair * T + t) * T + j)], uint16_t{0});
        QVERIFY(relative_error(att, att32) < 1.0 / 256);
        // The Eigen path's error on the same operands, for scale: where fp32 and fp64 put a
        // probability or a dS on either side of a bf16 rounding boundary, a term moves by a bf16
        // step, which grows with T.
        std::vector<uint16_t> eigen_out16(out16.size()), eigen_att16(att16.size());
        Floats eigen_scratch(attention_16bit_scratch_floats(T, C, n_head, threads)), eigen_dqkv = nans(int64_t(dqkv.size()));
        attention_forward_16bit(p, qkv16.data(), eigen_out16.data(), eigen_att16.data(), B, T, C, n_head,
                                eigen_scratch.data());
        attention_backward_16bit(p, dout.data(), qkv16.data(), eigen_att16.data(), eigen_dqkv.data(), B, T, C, n_head,
                                 eigen_scratch.data());
        // out is stored in bf16: within a bf16 step; dqkv is fp32, as the Eigen path's.
        const double out_error = relative_error(out, with.out), dqkv_error = relative_error(dqkv, with.dqkv);
        const double eigen_dqkv_error = relative_error(eigen_dqkv, with.dqkv);
        qInfo("out %.3g, dqkv %.3g (the Eigen path's %.3g)", out_error, dqkv_error, eigen_dqkv_error);
        QVERIFY(out_error < 1.0 / 256);
        QVERIFY(dqkv_error < std::max(2e-5, 2 * eigen_dqkv_error));
        // Handing dqkv to the qkv product as bf16 codes, in dqkv's own buffer: the codes of the
        // values it writes otherwise.
        std::vector<uint16_t> want_codes(dqkv.size());
        store_16bit(p, dqkv.data(), want_codes.data(), int64_t(dqkv.size()));
        Floats in_buffer = nans(int64_t(dqkv.size()));
        auto* codes = reinterpret_cast<uint16_t*>(in_buffer.data());
        attention_backward_onednn(products, dout_given.data(), qkv16.data(), att16.data(), in_buffer.data(), B, T, C,
                                  n_head, scratch.data(), codes);
        QVERIFY(std::equal(want_codes.begin(), want_codes.end(), codes));
        WorkerTeam::shared().resize(1);
    }

    // The softmax's exponential (nn/vector_exp.hpp): within 2 ulp of e^x wherever that is a normal
    // float, 0 below, +inf above, NaN for NaN. Its AVX-512 form is pinned bit for bit to the
    // algorithm with its fused multiply-adds spelled out (the scalar form's bits follow the
    // compiler's fusing, which the sanitizer builds' -O1 may not do).
    void softmax_exponential_is_expf_within_two_ulp() {
        constexpr float lowest = -87.3365478515625f, highest = 88.72283172607422f;
        auto reference = [&](float x) {
            const float above = x > lowest ? x : lowest;  // NaN: lowest, as the max/min clamp gives
            const float clamped = above < highest ? above : highest;
            const float n = std::trunc(std::fmaf(clamped, 1.44269504088896341f, clamped < 0 ? -0.5f : 0.5f));
            const float r = std::fmaf(n, 2.12194440e-4f, std::fmaf(-n, 0.693359375f, clamped));
            float p = std::fmaf(1.9875691500e-4f, r, 1.3981999507e-3f);
            for (float c : {8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f}) p = std::fmaf(p, r, c);
            p = std::fmaf(p * r, r, r) + 1.0f;
            const int32_t exponent = static_cast<int32_t>(n);
            const uint32_t bits = static_cast<uint32_t>(std::min(exponent, 127) + 127) << 23;
            float scale;
            std::memcpy(&scale, &bits, sizeof scale);
            float result = p * scale;
            if (exponent > 127) result = result * 2.0f;
            if (x < lowest) return 0.0f;
            if (x > highest) return std::numeric_limits<float>::infinity();
            return x != x ? x : result;
        };
        auto ulps = [](float a, double exact) {
            const float rounded = static_cast<float>(exact);
            int32_t ia, ib;
            std::memcpy(&ia, &a, 4);
            std::memcpy(&ib, &rounded, 4);
            return std::abs(int64_t{ia} - ib);
        };
        std::vector<float> inputs;
        for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 4099) {
            float x;
            const uint32_t bits = static_cast<uint32_t>(u);
            std::memcpy(&x, &bits, 4);
            inputs.push_back(x);
        }
        for (float x : {0.0f, -0.0f, lowest, highest, std::nextafter(lowest, -100.0f), std::nextafter(highest, 100.0f),
                        std::nextafter(lowest, 0.0f), std::nextafter(highest, 0.0f), 88.5f, -87.0f, 0.5f, -0.5f,
                        std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                        std::numeric_limits<float>::quiet_NaN()})
            inputs.push_back(x);
        while (inputs.size() % 16 != 0) inputs.push_back(1.0f);
        int64_t worst = 0;
        for (float x : inputs) {
            const float scalar = exp_vectorizable(x), pinned = reference(x);
            if (x != x) {
                QVERIFY(scalar != scalar && pinned != pinned);
                continue;
            }
            if (x < lowest) QCOMPARE(scalar, 0.0f);
            else if (x > highest) QCOMPARE(scalar, std::numeric_limits<float>::infinity());
            else {
                const double exact = std::exp(static_cast<double>(x));
                worst = std::max({worst, ulps(scalar, exact), ulps(pinned, exact)});
            }
        }
        qInfo("%zu inputs, worst %lld ulp", inputs.size(), static_cast<long long>(worst));
        QVERIFY(worst <= 2);
#if defined(__AVX512F__)
        for (size_t i = 0; i < inputs.size(); i += 16) {
            alignas(64) float vector[16];
            _mm512_store_ps(vector, exp_vectorizable(_mm512_loadu_ps(inputs.data() + i)));
            for (size_t k = 0; k < 16; ++k) {
                const float want = reference(inputs[i + k]);
                if (std::memcmp(&vector[k], &want, 4) != 0)
                    QFAIL(qPrintable(QString("e^%1: the AVX-512 form gives %2, the reference %3")
                                         .arg(double(inputs[i + k]), 0, 'g', 9).arg(double(vector[k]), 0, 'g', 9)
                                         .arg(double(want), 0, 'g', 9)));
            }
        }
#else
        qInfo("built without AVX-512: its form of the exponential is not compiled, only the scalar one checked");
#endif
    }

    // The softmax's row maximum (lane_max): the largest term at every length, tails included,
    // -inf for none; infinities taken as values; NaN wherever a term is NaN.
    void row_maximum_is_the_largest_term_at_any_length() {
        std::mt19937 random(7);
        std::normal_distribution<float> normal(0.0f, 10.0f);
        for (int64_t n = 0; n <= 70; ++n) {
            std::vector<float> values(static_cast<size_t>(n));
            for (float& v : values) v = normal(random);
            const float expected = n == 0 ? -std::numeric_limits<float>::infinity() : *std::max_element(values.begin(), values.end());
            QCOMPARE(lane_max(n, [&](int64_t j) { return values[static_cast<size_t>(j)]; }), expected);
            if (n == 0) continue;
            values[static_cast<size_t>(n / 2)] = std::numeric_limits<float>::infinity();
            QCOMPARE(lane_max(n, [&](int64_t j) { return values[static_cast<size_t>(j)]; }), std::numeric_limits<float>::infinity());
            std::fill(values.begin(), values.end(), -std::numeric_limits<float>::infinity());
            QCOMPARE(lane_max(n, [&](int64_t j) { return values[static_cast<size_t>(j)]; }), -std::numeric_limits<float>::infinity());
            std::fill(values.begin(), values.end(), 1.0f);
            for (int64_t at : {int64_t{0}, n / 2, n - 1}) {
                values[static_cast<size_t>(at)] = std::numeric_limits<float>::quiet_NaN();
                const float with_nan = lane_max(n, [&](int64_t j) { return values[static_cast<size_t>(j)]; });
                QVERIFY2(std::isnan(with_nan), qPrintable(QString("n %1, NaN at %2: %3").arg(n).arg(at).arg(with_nan)));
                values[static_cast<size_t>(at)] = 1.0f;
            }
        }
    }

    // ---- Embedding -----------------------------------------------------------------------

    void embedding_matches_torch() {
        const auto tokens = token_ids("embedding.tokens");
        const int64_t B = tensor("embedding.tokens").shape[0], T = tensor("embedding.tokens").shape[1];
        const int64_t vocab = tensor("embedding.wte").shape[0], C = tensor("embedding.wte").shape[1];
        const auto &wte = values("embedding.wte"), &wpe = values("embedding.wpe");
        Floats out = nans(B * T * C);
        embedding_forward(tokens.data(), wte.data(), wpe.data(), out.data(), B, T, C);
        CHECK_CLOSE("embedding out", out, values("embedding.out"), kTolerance);
        Floats dwte = nans(vocab * C), dwpe = nans(T * C);
        embedding_backward(values("embedding.dout").data(), tokens.data(), dwte.data(), dwpe.data(), B, T, C, vocab,
                           GradientWrite::overwrite, GradientWrite::overwrite);
        CHECK_CLOSE("embedding dwte", dwte, values("embedding.dwte"), kTolerance);
        CHECK_CLOSE("embedding dwpe", dwpe, values("embedding.dwpe"), kTolerance);
        // The fixture repeats tokens and leaves the last one out: its row must be exactly 0.
        QVERIFY(std::count(tokens.begin(), tokens.end(), int32_t(vocab - 1)) == 0);
        for (int64_t i = 0; i < C; ++i) QCOMPARE(dwte[(vocab - 1) * C + i], 0.0f);
    }

    void embedding_backward_accumulates() {
        const auto tokens = token_ids("embedding.tokens");
        const int64_t B = tensor("embedding.tokens").shape[0], T = tensor("embedding.tokens").shape[1];
        const int64_t vocab = tensor("embedding.wte").shape[0], C = tensor("embedding.wte").shape[1];
        const auto& dout = values("embedding.dout");
        auto backward = [&](Floats& dwte, Floats& dwpe, GradientWrite wte_write, GradientWrite wpe_write) {
            embedding_backward(dout.data(), tokens.data(), dwte.data(), dwpe.data(), B, T, C, vocab, wte_write, wpe_write);
        };
        Floats dwte_once(vocab * C), dwpe_once(T * C);
        backward(dwte_once, dwpe_once, GradientWrite::overwrite, GradientWrite::overwrite);
        Floats dwte = nans(vocab * C), dwpe = nans(T * C);
        backward(dwte, dwpe, GradientWrite::overwrite, GradientWrite::overwrite);
        backward(dwte, dwpe, GradientWrite::accumulate, GradientWrite::accumulate);
        Floats dwte_twice(vocab * C), dwpe_twice(T * C);
        for (int64_t i = 0; i < vocab * C; ++i) dwte_twice[i] = 2.0f * dwte_once[i];
        for (int64_t i = 0; i < T * C; ++i) dwpe_twice[i] = 2.0f * dwpe_once[i];
        CHECK_CLOSE("embedding dwte accumulated twice", dwte, dwte_twice, 1e-6);
        CHECK_CLOSE("embedding dwpe accumulated twice", dwpe, dwpe_twice, 1e-6);

        // A tied LM head wrote dwte first: the embedding adds to it, and may overwrite dwpe.
        const Floats head = random_values(vocab * C, 9);
        Floats tied = head, want(vocab * C);
        dwpe = nans(T * C);
        backward(tied, dwpe, GradientWrite::accumulate, GradientWrite::overwrite);
        for (int64_t i = 0; i < vocab * C; ++i) want[i] = head[i] + dwte_once[i];
        CHECK_CLOSE("embedding dwte onto the head's", tied, want, 1e-6);
        CHECK_CLOSE("embedding dwpe overwritten", dwpe, dwpe_once, 0.0);
    }

    void embedding_bits_do_not_depend_on_threads() {
        const int64_t B = 24, T = 64, C = 384, vocab = 50;
        std::mt19937 rng(10);
        std::geometric_distribution<int> skewed(0.15);  // a few tokens very frequent
        std::vector<int32_t> tokens(B * T);
        for (auto& t : tokens) t = std::min<int32_t>(skewed(rng), vocab - 1);
        const Floats wte = random_values(vocab * C, 11), wpe = random_values(T * C, 12);
        const Floats dout = random_values(B * T * C, 13);
        CHECK_SAME_BITS_AT_1_AND_2_THREADS([&] {
            Floats out(B * T * C), dwte = random_values(vocab * C, 14), dwpe(T * C);
            embedding_forward(tokens.data(), wte.data(), wpe.data(), out.data(), B, T, C);
            embedding_backward(dout.data(), tokens.data(), dwte.data(), dwpe.data(), B, T, C, vocab,
                               GradientWrite::accumulate, GradientWrite::overwrite);
            return std::vector<Floats>{out, dwte, dwpe};
        });
    }

    // ---- Cross-entropy over tokens ----------------------------------------------------------

    void cross_entropy_matches_torch() {
        const int64_t rows = tensor("cross_entropy.logits").shape[0], V = tensor("cross_entropy.logits").shape[1];
        const auto& logits = values("cross_entropy.logits");
        const auto targets = token_ids("cross_entropy.targets");
        Floats grad = nans(rows * V);
        int64_t correct = 0;
        const double loss = softmax_cross_entropy(logits.data(), targets.data(), V, rows, grad.data(),
                                                  1.0f / static_cast<float>(rows), &correct);
        CHECK_CLOSE("cross-entropy loss sum", Floats{static_cast<float>(loss)}, values("cross_entropy.loss"), kTolerance);
        CHECK_CLOSE("cross-entropy dlogits", grad, values("cross_entropy.dlogits"), kTolerance);
        int64_t want_correct = 0;
        for (int64_t r = 0; r < rows; ++r)
            want_correct += std::max_element(logits.begin() + r * V, logits.begin() + (r + 1) * V) -
                                (logits.begin() + r * V) == targets[r];
        QCOMPARE(correct, want_correct);
    }

    void cross_entropy_bits_do_not_depend_on_threads() {
        const int64_t rows = 4096, V = 65;
        const Floats logits = random_values(rows * V, 15, 3.0f);
        std::vector<int32_t> targets(rows);
        for (int64_t r = 0; r < rows; ++r) targets[r] = static_cast<int32_t>((r * 7) % V);
        // Every third target is the argmax, so the count of hits is known.
        Floats peaked = logits;
        int64_t want_correct = 0;
        for (int64_t r = 0; r < rows; ++r) {
            if (r % 3 == 0) peaked[r * V + targets[r]] = 20.0f;
            want_correct += std::max_element(peaked.begin() + r * V, peaked.begin() + (r + 1) * V) -
                                (peaked.begin() + r * V) == targets[r];
        }
        QVERIFY(want_correct >= rows / 3);
        std::vector<double> loss_at;
        std::vector<int64_t> correct_at;
        CHECK_SAME_BITS_AT_1_AND_2_THREADS([&] {
            Floats grad(rows * V);
            int64_t correct = 0;
            const double loss = softmax_cross_entropy(peaked.data(), targets.data(), V, rows, grad.data(),
                                                      1.0f / rows, &correct);
            loss_at.push_back(loss);
            correct_at.push_back(correct);
            return std::vector<Floats>{grad};
        });
        QCOMPARE(loss_at.size(), size_t{2});
        QVERIFY2(std::memcmp(&loss_at[0], &loss_at[1], sizeof(double)) == 0, "loss sum differs between 1 and 2 threads");
        QCOMPARE(correct_at[0], want_correct);
        QCOMPARE(correct_at[1], want_correct);
        // The plain running sum of the per-sample losses (differences z - max in float, as the
        // kernel takes them): only the order of the additions differs.
        double want_loss = 0.0;
        for (int64_t r = 0; r < rows; ++r) {
            const float* z = peaked.data() + r * V;
            const float max_z = *std::max_element(z, z + V);
            double sum = 0.0;
            for (int64_t c = 0; c < V; ++c) sum += std::exp(static_cast<double>(z[c] - max_z));
            want_loss += std::log(sum) - static_cast<double>(z[targets[r]] - max_z);
        }
        QVERIFY2(std::abs(loss_at[0] - want_loss) <= 1e-12 * want_loss,
                 qPrintable(QString("loss %1 vs %2").arg(loss_at[0], 0, 'g', 17).arg(want_loss, 0, 'g', 17)));
    }

    // ---- GELU ----------------------------------------------------------------------------

    void gelu_matches_torch() {
        const auto& x = values("gelu.x");
        const int64_t n = static_cast<int64_t>(x.size());
        Floats out = nans(n);
        activation_forward(Activation::gelu, x.data(), out.data(), n);
        CHECK_CLOSE("gelu out", out, values("gelu.out"), kTolerance);
        Floats grad = values("gelu.dout");
        activation_backward(Activation::gelu, x.data(), out.data(), grad.data(), n);
        CHECK_CLOSE("gelu dx", grad, values("gelu.dx"), kTolerance);
    }

    // The exact GELU runs on Eigen's vector erf and exp (nn/activation.cpp): against the same
    // formula in double precision it stays within 1e-6 absolute from -12 to 12 (erf's ~6-ulp
    // approximation error, scaled by |x|), and a range's partial last register (padded, not
    // computed with scalar code) gives the bits that element gets inside a full one.
    void gelu_is_accurate_and_independent_of_the_split() {
        Floats x;
        for (double v = -12.0; v <= 12.0; v += 0.000731) x.push_back(static_cast<float>(v));
        const int64_t n = static_cast<int64_t>(x.size());
        Floats out(n), grad(n, 1.0f);
        activation_forward(Activation::gelu, x.data(), out.data(), n);
        activation_backward(Activation::gelu, x.data(), out.data(), grad.data(), n);
        double worst_out = 0.0, worst_grad = 0.0;
        for (int64_t i = 0; i < n; ++i) {
            const double z = x[i];
            const double phi = 0.5 * (1.0 + std::erf(z / std::sqrt(2.0)));
            const double density = std::exp(-0.5 * z * z) / std::sqrt(2.0 * M_PI);
            worst_out = std::max(worst_out, std::abs(out[i] - z * phi));
            worst_grad = std::max(worst_grad, std::abs(grad[i] - (phi + z * density)));
        }
        qInfo("GELU against double precision: forward %.3g, backward %.3g at most", worst_out, worst_grad);
        QVERIFY2(worst_out <= 1e-6 && worst_grad <= 1e-6,
                 qPrintable(QString("forward %1, backward %2").arg(worst_out).arg(worst_grad)));
        // The same values in pieces of odd sizes, each ending in a partial register.
        Floats pieces_out(n), pieces_grad(n, 1.0f);
        for (int64_t first = 0, size = 1; first < n; first += size, size = size % 13 + 3) {
            const int64_t count = std::min(size, n - first);
            activation_forward(Activation::gelu, x.data() + first, pieces_out.data() + first, count);
            activation_backward(Activation::gelu, x.data() + first, pieces_out.data() + first,
                                pieces_grad.data() + first, count);
        }
        QVERIFY(std::memcmp(out.data(), pieces_out.data(), out.size() * sizeof(float)) == 0);
        QVERIFY(std::memcmp(grad.data(), pieces_grad.data(), grad.size() * sizeof(float)) == 0);
    }

    void activation_bits_do_not_depend_on_threads_data() {
        QTest::addColumn<int>("kind");
        QTest::newRow("relu") << static_cast<int>(Activation::relu);
        QTest::newRow("gelu") << static_cast<int>(Activation::gelu);
        QTest::newRow("tanh") << static_cast<int>(Activation::tanh);
        QTest::newRow("sigmoid") << static_cast<int>(Activation::sigmoid);
    }
    void activation_bits_do_not_depend_on_threads() {
        QFETCH(int, kind);
        const auto activation = static_cast<Activation>(kind);
        const int64_t n = 600000 + 3;  // above parallel_range's threshold even for ReLU, odd split
        const Floats z = random_values(n, 16, 3.0f), upstream = random_values(n, 17);
        CHECK_SAME_BITS_AT_1_AND_2_THREADS([&] {
            Floats a(n), grad = upstream;
            activation_forward(activation, z.data(), a.data(), n);
            activation_backward(activation, z.data(), a.data(), grad.data(), n);
            return std::vector<Floats>{a, grad};
        });
    }

    // ---- No heap allocation ------------------------------------------------------------------

    // Every kernel at a GPT-like size (head size 64, several row tiles, two threads), once to
    // warm up, then counted. The counter itself is checked to count (a vector's allocation).
    void kernels_do_not_allocate() {
        SKIP_WITHOUT_ALLOCATION_COUNTER();
        const int64_t B = 2, T = 200, C = 384, n_head = 6, vocab = 65, rows = B * T;
        WorkerTeam::shared().resize(2);
        std::vector<int32_t> tokens(rows);
        for (int64_t r = 0; r < rows; ++r) tokens[r] = static_cast<int32_t>((r * 13) % vocab);
        const Floats wte = random_values(vocab * C, 20), wpe = random_values(T * C, 21);
        const Floats w = random_values(C, 22), b = random_values(C, 23), qkv = random_values(rows * 3 * C, 24);
        const Floats d = random_values(rows * 4 * C, 25), logits = random_values(rows * vocab, 26);
        Floats x(rows * C), y(rows * C), mean(rows), rstd(rows), dx(rows * C), dw(C), db(C);
        Floats ln_scratch(layernorm_backward_scratch_floats(C));
        Floats att(B * n_head * T * T), dqkv(rows * 3 * C);
        Floats att_scratch(attention_scratch_floats(B, T, C, n_head, WorkerTeam::shared().members()));
        Floats dwte(vocab * C), dwpe(T * C), grad(rows * vocab), h(rows * 4 * C), dh = d;
        auto step = [&] {
            embedding_forward(tokens.data(), wte.data(), wpe.data(), x.data(), B, T, C);
            layernorm_forward(x.data(), w.data(), b.data(), y.data(), mean.data(), rstd.data(), rows, C);
            attention_forward(qkv.data(), y.data(), att.data(), B, T, C, n_head, Precision::fp32);
            activation_forward(Activation::gelu, d.data(), h.data(), rows * 4 * C);
            int64_t correct = 0;
            softmax_cross_entropy(logits.data(), tokens.data(), vocab, rows, grad.data(), 1.0f / rows, &correct);
            activation_backward(Activation::gelu, d.data(), h.data(), dh.data(), rows * 4 * C);
            attention_backward(d.data(), qkv.data(), att.data(), dqkv.data(), B, T, C, n_head, att_scratch.data(), Precision::fp32);
            layernorm_backward(d.data(), x.data(), w.data(), mean.data(), rstd.data(), dx.data(), dw.data(), db.data(),
                               rows, C, GradientWrite::accumulate, GradientWrite::overwrite, ln_scratch.data());
            embedding_backward(dx.data(), tokens.data(), dwte.data(), dwpe.data(), B, T, C, vocab,
                               GradientWrite::accumulate, GradientWrite::overwrite);
        };
        step();
        allocations = 0;
        counting = true;
        step();
        counting = false;
        const long during_step = allocations.load();
        counting = true;
        Floats probe(1000);
        counting = false;
        WorkerTeam::shared().resize(1);
        QCOMPARE(during_step, 0L);
        QVERIFY2(allocations.load() > 0, "the allocation counter did not see a vector's allocation");
    }
};

QTEST_APPLESS_MAIN(TestGptOps)
#include "test_gpt_ops.moc"
