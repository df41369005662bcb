// Gradient checkpointing of an MLP changes no bit of its updates, for every activation in every
// precision: the recomputed segments (sqrt(n) layers, build_mlp) reproduce the forward's
// activations exactly, 16-bit rounding included. The goldens (test_mlp_goldens.cpp) pin two of
// these combinations against recorded weights; this covers the others against the run without
// checkpointing.
#include <QtTest>

#include <cmath>
#include <cstring>

#include <set>

#include "backend/compute_engine.hpp"
#include "exec/graph_walk.hpp"
#include "model/build_model.hpp"
#include "model/init_weights.hpp"
#include "plan/graph_plan.hpp"

using namespace trainbench;

namespace {

// AdamW updates of step_size 2 with clipping, the gradients scaled by loss_scale as for fp16.
ModelWeights train(ComputeEngine& engine, int64_t features, int64_t classes, int updates, double loss_scale) {
    const int64_t batch = 24;
    std::vector<float> x(static_cast<size_t>(features * batch));
    std::vector<int32_t> labels(static_cast<size_t>(batch));
    for (int u = 0; u < updates; ++u) {
        for (size_t i = 0; i < x.size(); ++i) x[i] = float(((i * 37 + u * 11) % 97)) / 48.0f - 1.0f;
        for (size_t i = 0; i < labels.size(); ++i) labels[i] = int32_t((i * 5 + u) % classes);
        engine.zero_grad();
        for (int64_t first = 0; first < batch; first += 12)
            engine.forward_backward(MicroBatch{x.data() + first * features, labels.data() + first, nullptr, nullptr, 12},
                                    double(batch), loss_scale);
        const double norm = std::sqrt(engine.grad_norm_squared()) / loss_scale;
        engine.optimizer_step(1e-2, (norm > 1.0 ? 1.0 / (norm + 1e-6) : 1.0) / loss_scale, u + 1);
    }
    return engine.weights();
}

// Records the segments whose forward ops a backward pass runs again.
class RebuildRecorder final : public OpRunner {
public:
    explicit RebuildRecorder(const ModelDesc& model) : model_(model) {}
    void forward_op(int o, int64_t) override { rebuilt.insert(model_.ops[static_cast<size_t>(o)].segment); }
    void backward_op(int, int64_t) override {}
    std::set<int> rebuilt;

private:
    const ModelDesc& model_;
};

}  // namespace

class TestMlpCheckpointing : public QObject {
    Q_OBJECT
private slots:
    // What the plan says checkpointing recomputes (rebuilt_segments, shown to the user before a
    // run) is what the backward walk reruns, fused or not. A segment that dropped nothing is not
    // rebuilt: the last segment of a 3-layer ReLU MLP is one fused product + ReLU whose output
    // crosses to the head (before 2026-11-27 the walk rebuilt it, and then the first segment
    // again, though the slots still held it: the whole forward twice for nothing).
    void rebuilt_segments_are_what_the_backward_reruns_data() {
        QTest::addColumn<int>("hidden");
        QTest::addColumn<int>("activation");
        QTest::addColumn<int>("expected");  // fused, as the engines run by default
        QTest::newRow("MLP relu, 1 hidden layer") << 1 << int(Activation::relu) << 0;
        QTest::newRow("MLP relu, 2 hidden layers") << 2 << int(Activation::relu) << 0;
        QTest::newRow("MLP relu, 3 hidden layers") << 3 << int(Activation::relu) << 0;
        QTest::newRow("MLP relu, 4 hidden layers") << 4 << int(Activation::relu) << 1;
        QTest::newRow("MLP relu, 9 hidden layers") << 9 << int(Activation::relu) << 2;
        QTest::newRow("MLP gelu, 3 hidden layers") << 3 << int(Activation::gelu) << 1;
        QTest::newRow("MLP gelu, 9 hidden layers") << 9 << int(Activation::gelu) << 2;
        QTest::newRow("GPT, 4 blocks") << -4 << int(Activation::gelu) << 3;
    }
    void rebuilt_segments_are_what_the_backward_reruns() {
        QFETCH(int, hidden);
        QFETCH(int, activation);
        QFETCH(int, expected);
        ModelDesc model;
        if (hidden > 0) {
            std::vector<int64_t> sizes{8};
            for (int i = 0; i < hidden; ++i) sizes.push_back(16);
            sizes.push_back(3);
            model = build_mlp(sizes, Activation(activation), 3);
        } else {
            GptShape shape;
            shape.n_layer = -hidden;
            shape.n_head = 2;
            shape.n_embd = 16;
            shape.block_size = 8;
            shape.vocab = 11;
            model = build_gpt(shape);
        }
        for (bool fused : {true, false}) {
            const GraphPlan plan = make_graph_plan(model, 4, {.threads = 1, .checkpointing = true, .fused = fused});
            RebuildRecorder recorder(plan.model);
            walk_backward(plan, recorder, 4, plan.last_segment);
            QCOMPARE(int(recorder.rebuilt.size()), rebuilt_segments(plan));
            if (fused) QCOMPARE(rebuilt_segments(plan), expected);
            const GraphPlan off = make_graph_plan(model, 4, {.threads = 1, .checkpointing = false, .fused = fused});
            QCOMPARE(rebuilt_segments(off), 0);
        }
    }

    void checkpointing_changes_no_bit_data() {
        QTest::addColumn<int>("activation");
        QTest::addColumn<int>("precision");
        const std::pair<const char*, Activation> activations[] = {
            {"relu", Activation::relu}, {"gelu", Activation::gelu}, {"tanh", Activation::tanh}, {"sigmoid", Activation::sigmoid}};
        for (const auto& [name, activation] : activations)
            for (Precision p : {Precision::fp32, Precision::bf16, Precision::fp16})
                QTest::newRow(qPrintable(QString("%1-%2").arg(name, QString::fromStdString(to_string(p)))))
                    << int(activation) << int(p);
    }
    void checkpointing_changes_no_bit() {
        QFETCH(int, activation);
        QFETCH(int, precision);
        // Five hidden layers: segments of three, so one segment is recomputed and one kept.
        const ModelDesc model = build_mlp({20, 192, 160, 96, 64, 48, 5}, Activation(activation), 5);
        const ModelWeights initial = init_weights(model, 7);
        auto run = [&](bool checkpointing) {
            EngineSpec spec;
            spec.model = model;
            spec.optimizer.kind = OptimizerKind::adamw;
            spec.precision = Precision(precision);
            spec.max_micro_batch = spec.max_eval_batch = 12;
            spec.threads = 2;
            spec.gradient_checkpointing = checkpointing;
            auto engine = make_cpu_engine(spec);
            engine->set_weights(initial);
            return train(*engine, 20, 5, 6, spec.precision == Precision::fp16 ? 1024.0 : 1.0);
        };
        const ModelWeights plain = run(false);
        const ModelWeights checkpointed = run(true);
        QCOMPARE(plain.tensors.size(), checkpointed.tensors.size());
        for (size_t t = 0; t < plain.tensors.size(); ++t) {
            QCOMPARE(checkpointed.tensors[t].name, plain.tensors[t].name);
            QVERIFY2(std::memcmp(plain.tensors[t].data.data(), checkpointed.tensors[t].data.data(),
                                 plain.tensors[t].data.size() * 4) == 0,
                     plain.tensors[t].name.c_str());
        }
        QVERIFY(std::memcmp(plain.tensors[0].data.data(), initial.tensors[0].data.data(), initial.tensors[0].data.size() * 4) != 0);
    }
};

QTEST_APPLESS_MAIN(TestMlpCheckpointing)
#include "test_mlp_checkpointing.moc"
