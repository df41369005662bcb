// The executor over model descriptions (backend/cpu/graph_engine.cpp) runs an MLP with the
// same kernels in the same order as the layer-chain engine, so in fp32 their weights agree to
// the bit: the first step of porting the MLP onto it (16-bit storage is the next).
#include <QtTest>

#include <cstring>

#include "backend/compute_engine.hpp"
#include "model/build_model.hpp"
#include "model/init_weights.hpp"

using namespace trainbench;

namespace {

ModelWeights train(ComputeEngine& engine, int64_t features, int64_t classes, int updates) {
    const int64_t batch = 24;
    std::vector<float> x(static_cast<size_t>(features * batch));
    std::vector<int32_t> labels(static_cast<size_t>(batch));
    for (int u = 0; u < updates; ++u) {
        for (size_t i = 0; i < x.size(); ++i) x[i] = float(((i * 37 + u * 11) % 97)) / 48.0f - 1.0f;
        for (size_t i = 0; i < labels.size(); ++i) labels[i] = int32_t((i * 5 + u) % classes);
        engine.zero_grad();
        for (int64_t first = 0; first < batch; first += 12)  // step_size 2
            engine.forward_backward(MicroBatch{x.data() + first * features, labels.data() + first, nullptr, nullptr, 12},
                                    double(batch), 1.0);
        const double norm = std::sqrt(engine.grad_norm_squared());
        engine.optimizer_step(1e-2, norm > 1.0 ? 1.0 / (norm + 1e-6) : 1.0, u + 1);
    }
    return engine.weights();
}

}  // namespace

class TestGraphEngineMlp : public QObject {
    Q_OBJECT
private slots:
    void fp32_mlp_updates_equal_the_layer_chain_engine_bit_for_bit_data() {
        QTest::addColumn<int>("activation");
        QTest::addColumn<bool>("checkpointing");
        QTest::newRow("relu") << int(Activation::relu) << false;
        QTest::newRow("gelu") << int(Activation::gelu) << false;
        QTest::newRow("gelu-checkpointing") << int(Activation::gelu) << true;
        QTest::newRow("tanh-checkpointing") << int(Activation::tanh) << true;
    }
    void fp32_mlp_updates_equal_the_layer_chain_engine_bit_for_bit() {
        QFETCH(int, activation);
        QFETCH(bool, checkpointing);
        EngineSpec spec;
        spec.model = build_mlp({20, 192, 160, 96, 64, 5}, Activation(activation), 5);
        spec.optimizer.kind = OptimizerKind::adamw;
        spec.max_micro_batch = spec.max_eval_batch = 12;
        spec.threads = 2;
        spec.gradient_checkpointing = checkpointing;
        const ModelWeights initial = init_weights(spec.model, 7);
        auto chain = make_cpu_engine(spec);
        auto graph = make_cpu_graph_engine(spec);
        chain->set_weights(initial);
        graph->set_weights(initial);
        const ModelWeights a = train(*chain, 20, 5, 6);
        const ModelWeights b = train(*graph, 20, 5, 6);
        QCOMPARE(a.tensors.size(), b.tensors.size());
        for (size_t t = 0; t < a.tensors.size(); ++t) {
            QCOMPARE(a.tensors[t].name, b.tensors[t].name);
            QVERIFY2(std::memcmp(a.tensors[t].data.data(), b.tensors[t].data.data(), a.tensors[t].data.size() * 4) == 0,
                     a.tensors[t].name.c_str());
        }
        QVERIFY(std::memcmp(a.tensors[0].data.data(), initial.tensors[0].data.data(), initial.tensors[0].data.size() * 4) != 0);
    }
};

QTEST_APPLESS_MAIN(TestGraphEngineMlp)
#include "test_graph_engine_mlp.moc"
