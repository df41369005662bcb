// Finite-difference checks of every forward/backward pair: Linear, each activation, both
// losses, and the whole CPU engine (all layers chained through the loss).
#include <QtTest>

#include <cmath>
#include <random>
#include <vector>

#include "backend/compute_engine.hpp"
#include "nn/activation.hpp"
#include "nn/linear.hpp"
#include "nn/loss.hpp"
#include "model/build_model.hpp"
#include "model/init_weights.hpp"
#include "nn/packed_weights.hpp"
#include "parallel/worker_team.hpp"

using namespace trainbench;

namespace {

std::vector<float> random_values(size_t n, uint32_t seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-scale, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng);
    return v;
}

double dot(const std::vector<float>& a, const std::vector<float>& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
    return s;
}

// Central difference of f around x[i] (x is modified and restored).
template <class F>
double numeric_derivative(std::vector<float>& x, size_t i, F f, float h) {
    const float saved = x[i];
    x[i] = saved + h;
    const double up = f();
    x[i] = saved - h;
    const double down = f();
    x[i] = saved;
    return (up - down) / (2.0 * h);
}

void expect_close(double analytic, double numeric, double tolerance, const char* what, size_t index) {
    const double scale = std::max({1.0, std::abs(analytic), std::abs(numeric)});
    if (std::abs(analytic - numeric) > tolerance * scale)
        QFAIL(qPrintable(QString("%1[%2]: analytic %3 vs numeric %4").arg(what).arg(index).arg(analytic).arg(numeric)));
}

}  // namespace

class TestLayerGradients : public QObject {
    Q_OBJECT
private slots:
    void linear_backward_matches_finite_differences() {
        const int64_t in = 5, out = 4, batch = 3;
        auto w = random_values(out * in, 1), b = random_values(out, 2), x = random_values(in * batch, 3);
        const auto r = random_values(out * batch, 4);  // objective L = sum(Z * r)
        std::vector<float> z(out * batch);
        auto objective = [&] {
            linear_forward(w.data(), b.data(), x.data(), z.data(), in, out, batch);
            return dot(z, r);
        };
        // Overwrite mode must ignore whatever the gradient buffers held.
        std::vector<float> dw(out * in, std::nanf("")), db(out, std::nanf("")), dx(in * batch);
        linear_backward(w.data(), x.data(), r.data(), dw.data(), db.data(), dx.data(), in, out, batch,
                        GradientWrite::overwrite);
        for (size_t i = 0; i < w.size(); ++i) expect_close(dw[i], numeric_derivative(w, i, objective, 1e-2f), 1e-3, "dW", i);
        for (size_t i = 0; i < b.size(); ++i) expect_close(db[i], numeric_derivative(b, i, objective, 1e-2f), 1e-3, "db", i);
        for (size_t i = 0; i < x.size(); ++i) expect_close(dx[i], numeric_derivative(x, i, objective, 1e-2f), 1e-3, "dX", i);
    }

    void linear_backward_accumulates_weight_gradients() {
        const int64_t in = 3, out = 2, batch = 2;
        auto w = random_values(out * in, 5), x = random_values(in * batch, 6), g = random_values(out * batch, 7);
        std::vector<float> dw_once(out * in, 0.0f), db_once(out, 0.0f), dw_twice(out * in, 7.0f), db_twice(out, 7.0f);
        linear_backward(w.data(), x.data(), g.data(), dw_once.data(), db_once.data(), nullptr, in, out, batch,
                        GradientWrite::accumulate);
        for (auto write : {GradientWrite::overwrite, GradientWrite::accumulate})
            linear_backward(w.data(), x.data(), g.data(), dw_twice.data(), db_twice.data(), nullptr, in, out, batch, write);
        for (size_t i = 0; i < dw_once.size(); ++i) QCOMPARE(dw_twice[i], 2.0f * dw_once[i]);
        for (size_t i = 0; i < db_once.size(); ++i) QCOMPARE(db_twice[i], 2.0f * db_once[i]);
    }

    // Products big enough to be split across two threads (the tests above run on one),
    // against plain double-precision loops.
    void threaded_products_match_plain_loops() {
        WorkerTeam::shared().resize(2);
        const int64_t in = 300, out = 200, batch = 40;
        auto w = random_values(out * in, 8), b = random_values(out, 9), x = random_values(in * batch, 10);
        auto g = random_values(out * batch, 11);
        std::vector<float> z(out * batch), dw(out * in, 1.0f), db(out, 1.0f), dx(in * batch);
        linear_forward(w.data(), b.data(), x.data(), z.data(), in, out, batch);
        linear_backward(w.data(), x.data(), g.data(), dw.data(), db.data(), dx.data(), in, out, batch,
                        GradientWrite::accumulate);
        WorkerTeam::shared().resize(1);
        for (int64_t o = 0; o < out; ++o)
            for (int64_t s = 0; s < batch; ++s) {
                double sum = b[o];
                for (int64_t i = 0; i < in; ++i) sum += double(w[o * in + i]) * x[s * in + i];
                expect_close(z[s * out + o], sum, 1e-4, "Z", o);
            }
        for (int64_t o = 0; o < out; ++o) {
            double bias_sum = 1.0;
            for (int64_t s = 0; s < batch; ++s) bias_sum += g[s * out + o];
            expect_close(db[o], bias_sum, 1e-4, "db", o);
            for (int64_t i = 0; i < in; ++i) {
                double sum = 1.0;  // accumulated onto the buffer's ones
                for (int64_t s = 0; s < batch; ++s) sum += double(g[s * out + o]) * x[s * in + i];
                expect_close(dw[o * in + i], sum, 1e-4, "dW", o * in + i);
            }
        }
        for (int64_t i = 0; i < in; ++i)
            for (int64_t s = 0; s < batch; ++s) {
                double sum = 0.0;
                for (int64_t o = 0; o < out; ++o) sum += double(w[o * in + i]) * g[s * out + o];
                expect_close(dx[s * in + i], sum, 1e-4, "dX", s * in + i);
            }
    }

    // Products over weights packed once must equal plain products, for W (forward) and W^T
    // (input gradient), for shapes that leave partial kernel panels, partial depth blocks and
    // several column blocks, for 1 to 3 row slices, on one or two threads.
    void packed_products_match_plain_products_data() {
        QTest::addColumn<bool>("transposed");
        QTest::addColumn<int>("in");
        QTest::addColumn<int>("out");
        QTest::addColumn<int>("batch");
        QTest::addColumn<int>("slices");
        QTest::addColumn<int>("threads");
        for (const bool transposed : {false, true}) {
            const char* operand = transposed ? "W^T: " : "W: ";
            auto row = [&](const char* name) -> QTestData& { return QTest::newRow((QString(operand) + name).toUtf8().constData()); };
            row("odd shape, 1 slice") << transposed << 301 << 37 << 7 << 1 << 1;
            row("odd shape, 3 slices on 2 threads") << transposed << 301 << 37 << 7 << 3 << 2;
            row("benchmark layer, 2 slices") << transposed << 784 << 1024 << 64 << 2 << 2;
            row("many columns, 2 slices") << transposed << 700 << 50 << 1100 << 2 << 2;
            row("10 outputs") << transposed << 1024 << 10 << 33 << 2 << 2;
            row("one output") << transposed << 5 << 1 << 3 << 2 << 1;
        }
    }
    void packed_products_match_plain_products() {
        QFETCH(bool, transposed);
        QFETCH(int, in);
        QFETCH(int, out);
        QFETCH(int, batch);
        QFETCH(int, slices);
        QFETCH(int, threads);
        WorkerTeam::shared().resize(threads);
        auto w = random_values(size_t(out) * in, 12), b = random_values(out, 13);
        const PackedLayout layout = make_packed_layout(
            transposed ? PackedOperand::weights_transposed : PackedOperand::weights, in, out, slices);
        const int rows = transposed ? in : out, depth = transposed ? out : in;
        auto x = random_values(size_t(depth) * batch, 14);
        std::vector<float> packed(layout.total_floats() + 16);
        // The kernel reads packed panels with aligned loads: align like the engine's arena does.
        float* aligned = packed.data();
        while (reinterpret_cast<uintptr_t>(aligned) % 64 != 0) ++aligned;
        pack_weights(layout, w.data(), aligned);
        std::vector<float> z(size_t(rows) * batch, std::nanf(""));
        if (transposed) packed_product_slices(layout, aligned, nullptr, x.data(), z.data(), batch, 0, layout.slices);
        else packed_linear_forward(layout, aligned, b.data(), x.data(), z.data(), batch);
        WorkerTeam::shared().resize(1);
        for (int r = 0; r < rows; ++r)
            for (int s = 0; s < batch; ++s) {
                double sum = transposed ? 0.0 : b[r];
                for (int k = 0; k < depth; ++k) {
                    const float weight = transposed ? w[size_t(k) * in + r] : w[size_t(r) * in + k];
                    sum += double(weight) * x[size_t(s) * depth + k];
                }
                expect_close(z[size_t(s) * rows + r], sum, 1e-4, "product", size_t(s) * rows + r);
            }
    }

    void activation_backward_matches_finite_differences_data() {
        QTest::addColumn<int>("kind");
        QTest::newRow("relu") << static_cast<int>(Activation::relu);
        QTest::newRow("gelu") << static_cast<int>(Activation::gelu);
        QTest::newRow("tanh") << static_cast<int>(Activation::tanh);
        QTest::newRow("sigmoid") << static_cast<int>(Activation::sigmoid);
    }
    void activation_backward_matches_finite_differences() {
        QFETCH(int, kind);
        const auto activation = static_cast<Activation>(kind);
        auto z = random_values(64, 8, 3.0f);
        for (auto& v : z)
            if (std::abs(v) < 0.05f) v = 0.3f;  // keep ReLU's kink out of the difference
        const auto r = random_values(64, 9);
        std::vector<float> a(z.size());
        auto objective = [&] {
            activation_forward(activation, z.data(), a.data(), static_cast<int64_t>(z.size()));
            return dot(a, r);
        };
        objective();
        std::vector<float> grad = r;
        activation_backward(activation, z.data(), a.data(), grad.data(), static_cast<int64_t>(z.size()));
        for (size_t i = 0; i < z.size(); ++i) expect_close(grad[i], numeric_derivative(z, i, objective, 1e-2f), 2e-3, "dz", i);
    }

    void softmax_cross_entropy_matches_finite_differences() {
        const int64_t classes = 5, batch = 4;
        auto logits = random_values(classes * batch, 10, 2.0f);
        const std::vector<int32_t> labels{0, 3, 4, 1};
        auto objective = [&] { return softmax_cross_entropy(logits.data(), labels.data(), classes, batch, nullptr, 1.0f, nullptr); };
        std::vector<float> grad(logits.size());
        const float scale = 0.25f;
        softmax_cross_entropy(logits.data(), labels.data(), classes, batch, grad.data(), scale, nullptr);
        for (size_t i = 0; i < logits.size(); ++i)
            expect_close(grad[i] / scale, numeric_derivative(logits, i, objective, 1e-2f), 1e-3, "dlogits", i);
    }

    void softmax_cross_entropy_loss_and_accuracy_are_exact() {
        // Uniform logits: loss ln(C) per sample; argmax picks the first class.
        const std::vector<float> logits(3 * 2, 0.5f);
        const std::vector<int32_t> labels{0, 2};
        int64_t correct = 0;
        const double loss = softmax_cross_entropy(logits.data(), labels.data(), 3, 2, nullptr, 1.0f, &correct);
        QVERIFY(std::abs(loss - 2.0 * std::log(3.0)) < 1e-6);
        QCOMPARE(correct, int64_t{1});
    }

    void mean_squared_error_matches_finite_differences() {
        auto outputs = random_values(6, 11), targets = random_values(6, 12);
        auto objective = [&] { return mean_squared_error(outputs.data(), targets.data(), 6, nullptr, 1.0f); };
        std::vector<float> grad(6);
        mean_squared_error(outputs.data(), targets.data(), 6, grad.data(), 1.0f);
        for (size_t i = 0; i < outputs.size(); ++i)
            expect_close(grad[i], numeric_derivative(outputs, i, objective, 1e-2f), 1e-3, "dy", i);
    }

    // The whole engine: gradients read back through one plain SGD step (lr 1: p' = p - g).
    void cpu_engine_gradients_match_finite_differences_data() {
        QTest::addColumn<int>("kind");
        QTest::addColumn<bool>("classification");
        QTest::newRow("relu-ce") << static_cast<int>(Activation::relu) << true;
        QTest::newRow("gelu-ce") << static_cast<int>(Activation::gelu) << true;
        QTest::newRow("tanh-mse") << static_cast<int>(Activation::tanh) << false;
        QTest::newRow("sigmoid-mse") << static_cast<int>(Activation::sigmoid) << false;
    }
    void cpu_engine_gradients_match_finite_differences() {
        QFETCH(int, kind);
        QFETCH(bool, classification);
        EngineSpec spec;
        spec.model = build_mlp({3, 6, 5, classification ? int64_t{4} : int64_t{1}}, static_cast<Activation>(kind),
                               classification ? 4 : 0);
        spec.optimizer.kind = OptimizerKind::sgd;
        spec.max_micro_batch = spec.max_eval_batch = 5;
        spec.threads = 1;
        auto engine = make_cpu_engine(spec);
        const ModelWeights initial = init_weights(spec.model, 3);
        const auto x = random_values(3 * 5, 13, 1.5f);
        const std::vector<int32_t> labels{0, 1, 2, 3, 1};
        const auto targets = random_values(5, 14);
        const MicroBatch batch{x.data(), labels.data(), targets.data(), nullptr, 5};

        engine->set_weights(initial);
        engine->zero_grad();
        engine->forward_backward(batch, 1.0, 1.0);
        engine->optimizer_step(1.0, 1.0, 1);
        const ModelWeights stepped = engine->weights();

        ModelWeights probe = initial;
        for (size_t l = 0; l < probe.tensors.size(); l += 2) {  // the weights; biases are odd
            auto& w = probe.tensors[l].data;
            for (size_t i = 0; i < w.size(); i += 3) {  // a third of the weights keeps it quick
                auto loss = [&] {
                    engine->set_weights(probe);
                    return engine->evaluate(batch).loss_sum;
                };
                const double numeric = numeric_derivative(w, i, loss, 1e-2f);
                const double analytic = initial.tensors[l].data[i] - stepped.tensors[l].data[i];
                expect_close(analytic, numeric, 5e-3, "engine dW", i);
            }
        }
    }
};

QTEST_APPLESS_MAIN(TestLayerGradients)
#include "test_layer_gradients.moc"
