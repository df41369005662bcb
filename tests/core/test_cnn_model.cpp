// The CNN (--model cnn) on the CPU executor against PyTorch (tests/fixtures/make_cnn_fixtures.py):
// its two new ops alone (a 5x5 convolution with its three gradients; 2x2 max-pooling with tied
// windows and an odd row), then the whole model's loss and every gradient of one micro-batch,
// and 8 Adam updates with step_size 2. Then what the engine promises beyond PyTorch:
// checkpointing (a segment per convolution block) changes no bit, the plan is the allocation in
// fp32 and bf16, checkpointing lowers the activations by what it recomputes, and the steady
// state allocates nothing.
#include <QtTest>

#include <cmath>
#include <map>

#include "backend/compute_engine.hpp"
#include "core/peak_equals_plan.hpp"
#include "core/allocation_counter.hpp"
#include "core/same_bits.hpp"
#include "core/torch_fixtures.hpp"
#include "model/build_model.hpp"
#include "model/init_weights.hpp"
#include "nn/conv2d.hpp"
#include "nn/max_pool.hpp"
#include "parallel/worker_team.hpp"
#include "trainbench/weights.hpp"

using namespace trainbench;

namespace {

const std::string kDir = std::string(TRAINBENCH_FIXTURES_DIR) + "/cnn/";
constexpr int64_t kBatch = 4, kHeight = 12, kWidth = 10, kImage = kHeight * kWidth;

std::map<std::string, NamedTensor> read_all(const std::string& file) { return testing::read_fixture_tensors(kDir + file); }

using testing::max_relative_error;

#define EXPECT_CLOSE(name, got, want, tolerance)                                                              \
    do {                                                                                                      \
        QCOMPARE((got).size(), (want).size());                                                                \
        const double error_ = max_relative_error(got, want);                                                      \
        QVERIFY2(error_ < (tolerance), qPrintable(QString("%1: relative error %2").arg(name).arg(error_)));    \
    } while (0)

CnnShape fixture_shape() {
    CnnShape s;
    s.height = kHeight;
    s.width = kWidth;
    s.channels = {3, 5};
    s.hidden = {16};
    s.classes = 4;
    return s;
}

EngineSpec fixture_spec(bool checkpointing = false, Precision precision = Precision::fp32, bool fused = true) {
    EngineSpec spec;
    spec.fused = fused;
    spec.model = build_cnn(fixture_shape());
    spec.optimizer.kind = OptimizerKind::adam;
    spec.optimizer.lr = 3e-3;
    spec.max_micro_batch = spec.max_eval_batch = kBatch;
    spec.threads = 2;
    spec.gradient_checkpointing = checkpointing;
    spec.precision = precision;
    return spec;
}

using testing::fixture_ids;

float* aligned(std::vector<float>& storage) {
    const auto address = reinterpret_cast<uintptr_t>(storage.data());
    return storage.data() + ((64 - address % 64) % 64) / sizeof(float);
}

struct Trace {
    std::vector<double> losses;
    ModelWeights weights;
};

// 8 updates of 2 micro-batches of 4 images, each normalised by the update's 8, then Adam.
Trace train_fixture(ComputeEngine& engine, int updates) {
    const auto train = read_all("cnn_train.safetensors");
    const NamedTensor& inputs = train.at("train.inputs");
    const NamedTensor& labels = train.at("train.labels");
    Trace trace;
    for (int u = 0; u < updates; ++u) {
        engine.zero_grad();
        double loss = 0.0;
        for (int m = 0; m < 2; ++m) {
            const int64_t first = (2 * u + m) * kBatch;
            const auto y = fixture_ids(labels, first, kBatch);
            MicroBatch batch;
            batch.x = inputs.data.data() + first * kImage;
            batch.labels = y.data();
            batch.count = kBatch;
            loss += engine.forward_backward(batch, 2.0 * kBatch, 1.0);
        }
        engine.grad_norm_squared();
        engine.optimizer_step(3e-3, 1.0, u + 1);
        trace.losses.push_back(loss / (2.0 * kBatch));
    }
    trace.weights = engine.weights();
    return trace;
}

}  // namespace

class TestCnnModel : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { WorkerTeam::shared().resize(2); }

    // A 5x5 convolution of a non-square image: output, dX, dW and db, on 1 and 2 threads.
    void convolution_matches_pytorch() {
        const auto f = read_all("cnn_ops.safetensors");
        const ConvShape shape{.in_channels = 3, .out_channels = 4, .height = 7, .width = 6, .kernel = 5};
        const int64_t n = 2, in = shape.patch(), out = shape.out_channels;
        for (int threads : {1, 2}) {
            WorkerTeam::shared().resize(threads);
            const PackedLayout forward = make_packed_layout(PackedOperand::weights, in, out, threads);
            const PackedLayout transposed = make_packed_layout(PackedOperand::weights_transposed, in, out, threads);
            // Packed blocks are 64-byte aligned, as the engine's arena hands them out.
            std::vector<float> packed_storage(static_cast<size_t>(forward.total_floats() + 16)),
                transposed_storage(static_cast<size_t>(transposed.total_floats() + 16));
            float* packed = aligned(packed_storage);
            float* packed_t = aligned(transposed_storage);
            pack_weights(forward, f.at("conv.weight").data.data(), packed);
            pack_weights(transposed, f.at("conv.weight").data.data(), packed_t);
            std::vector<float> scratch(static_cast<size_t>(conv2d_scratch_floats(shape, n)));
            std::vector<float> output(f.at("conv.output").data.size());
            conv2d_forward(shape, forward, packed, f.at("conv.bias").data.data(), f.at("conv.input").data.data(),
                           output.data(), n, scratch.data());
            EXPECT_CLOSE("output", output, f.at("conv.output").data, 1e-6);
            std::vector<float> dinput(f.at("conv.dinput").data.size(), 7.0f), dweight(f.at("conv.dweight").data.size()),
                dbias(4);
            conv2d_backward(shape, transposed, packed_t, f.at("conv.input").data.data(), f.at("conv.dout").data.data(),
                            dweight.data(), dbias.data(), dinput.data(), n, GradientWrite::overwrite, scratch.data());
            EXPECT_CLOSE("dinput", dinput, f.at("conv.dinput").data, 1e-6);
            EXPECT_CLOSE("dweight", dweight, f.at("conv.dweight").data, 1e-6);
            EXPECT_CLOSE("dbias", dbias, f.at("conv.dbias").data, 1e-6);
        }
        WorkerTeam::shared().resize(2);
    }

    // Max-pooling with ties and an odd last row: torch's values and its choice of maximum, bit
    // for bit (no arithmetic but the gradient's copy).
    void max_pool_matches_pytorch() {
        const auto f = read_all("cnn_ops.safetensors");
        std::vector<float> output(f.at("pool.output").data.size());
        max_pool_forward(f.at("pool.input").data.data(), output.data(), 2, 3, 7, 6);
        QVERIFY(output == f.at("pool.output").data);
        std::vector<float> dinput(f.at("pool.dinput").data.size(), 5.0f);
        max_pool_backward(f.at("pool.input").data.data(), f.at("pool.dout").data.data(), dinput.data(), 2, 3, 7, 6,
                          GradientWrite::overwrite);
        QVERIFY(dinput == f.at("pool.dinput").data);
        // Accumulate adds the same gradient to what is there.
        max_pool_backward(f.at("pool.input").data.data(), f.at("pool.dout").data.data(), dinput.data(), 2, 3, 7, 6,
                          GradientWrite::accumulate);
        for (size_t i = 0; i < dinput.size(); ++i) QCOMPARE(dinput[i], 2.0f * f.at("pool.dinput").data[i]);
    }

    void parameters_are_named_and_shaped_as_torch() {
        const ModelDesc model = build_cnn(fixture_shape());
        const auto weights = read_all("cnn_weights.safetensors");
        QCOMPARE(model.params.size(), weights.size());
        for (const ParamDesc& p : model.params) {
            QVERIFY2(weights.count(p.name), p.name.c_str());
            QCOMPARE(weights.at(p.name).shape, p.shape);
        }
        QCOMPARE(QString::fromStdString(model.summary), QString("CNN 1x12x10 c3-c5 16-4"));
    }

    void loss_and_every_gradient_match_pytorch() {
        auto engine = make_cpu_engine(fixture_spec());
        engine->set_weights(load_weights(kDir + "cnn_weights.safetensors"));
        const auto step0 = read_all("cnn_step0.safetensors");
        const auto y = fixture_ids(step0.at("step0.labels"), 0, kBatch);
        MicroBatch batch;
        batch.x = step0.at("step0.inputs").data.data();
        batch.labels = y.data();
        batch.count = kBatch;
        engine->zero_grad();
        const double loss = engine->forward_backward(batch, double(kBatch), 1.0) / double(kBatch);
        const double want = step0.at("step0.loss").data[0];
        QVERIFY2(std::abs(loss - want) / want < 1e-6, qPrintable(QString("loss %1 vs torch %2").arg(loss).arg(want)));
        int compared = 0;
        for (const NamedTensor& g : engine->gradients().tensors) {
            EXPECT_CLOSE(QString::fromStdString(g.name), g.data, step0.at("grad." + g.name).data, 1e-5);
            ++compared;
        }
        QCOMPARE(compared, 8);
    }

    // With the ReLU in the convolutions' epilogues (the default) and one op at a time.
    void eight_adam_updates_with_accumulation_match_pytorch_data() {
        QTest::addColumn<bool>("fused");
        QTest::newRow("fused") << true;
        QTest::newRow("eager") << false;
    }
    void eight_adam_updates_with_accumulation_match_pytorch() {
        QFETCH(bool, fused);
        auto engine = make_cpu_engine(fixture_spec(false, Precision::fp32, fused));
        engine->set_weights(load_weights(kDir + "cnn_weights.safetensors"));
        const Trace trace = train_fixture(*engine, 8);
        const auto train = read_all("cnn_train.safetensors");
        for (int u = 0; u < 8; ++u)
            QVERIFY2(std::abs(trace.losses[u] - train.at("train.losses").data[u]) < 1e-5 * trace.losses[u],
                     qPrintable(QString("update %1: %2 vs %3").arg(u).arg(trace.losses[u]).arg(train.at("train.losses").data[u])));
        for (const NamedTensor& w : trace.weights.tensors)
            EXPECT_CLOSE(QString::fromStdString(w.name), w.data, train.at("final." + w.name).data, 1e-4);
    }

    void checkpointing_changes_no_bit() {
        const ModelWeights initial = load_weights(kDir + "cnn_weights.safetensors");
        auto run = [&](bool checkpointing) {
            auto engine = make_cpu_engine(fixture_spec(checkpointing));
            engine->set_weights(initial);
            return train_fixture(*engine, 3).weights;
        };
        const ModelWeights plain = run(false);
        QVERIFY(same_bits(run(true), plain));
        QVERIFY(!same_bits(initial, plain));
    }

    // On a Fashion-MNIST-sized model (28x28, channels 32, 64, hidden 128): the plan is what the
    // engine allocated, category by category, and checkpointing drops what each block recomputes.
    void memory_plan_equals_the_allocation_and_checkpointing_lowers_activations_data() {
        QTest::addColumn<int>("precision");
        QTest::addColumn<bool>("fused");
        QTest::newRow("fp32") << int(Precision::fp32) << true;
        QTest::newRow("bf16") << int(Precision::bf16) << true;
        QTest::newRow("fp32-eager") << int(Precision::fp32) << false;
        QTest::newRow("bf16-eager") << int(Precision::bf16) << false;
    }
    void memory_plan_equals_the_allocation_and_checkpointing_lowers_activations() {
        QFETCH(int, precision);
        QFETCH(bool, fused);
        int64_t activations[2] = {0, 0};
        for (int checkpointing = 0; checkpointing < 2; ++checkpointing) {
            EngineSpec spec = fixture_spec(checkpointing != 0, Precision(precision), fused);
            spec.model = build_cnn(CnnShape{});
            spec.max_micro_batch = spec.max_eval_batch = 8;
            auto engine = make_cpu_engine(spec);
            engine->set_weights(init_weights(spec.model, 1));
            std::vector<float> images(8 * 28 * 28);
            for (size_t i = 0; i < images.size(); ++i) images[i] = float((i * 37) % 255) / 255.0f;
            std::vector<int32_t> labels = {0, 1, 2, 3, 4, 5, 6, 7};
            MicroBatch batch{images.data(), labels.data(), nullptr, nullptr, 8};
            engine->begin_update_timing();
            engine->zero_grad();
            engine->forward_backward(batch, 8.0, 1.0);
            engine->optimizer_step(1e-3, 1.0, 1);
            const BytesByCategory planned = plan_cpu_engine_memory(spec);
            CHECK_PEAK_EQUALS_PLAN(*engine, planned);
            activations[checkpointing] = planned[size_t(MemoryCategory::activations)];
        }
        qInfo("activations at micro-batch 8: %lld bytes, %lld with checkpointing", static_cast<long long>(activations[0]),
              static_cast<long long>(activations[1]));
        // Each block keeps only its input: the convolutions' outputs (the ReLU runs in place) are
        // dropped, and one recompute slot as large as the largest of them (block 1's, 32x28x28)
        // holds whichever block is rebuilt. The saving is block 2's convolution output,
        // 64x14x14 per image.
        const int64_t element = Precision(precision) == Precision::fp32 ? 4 : 2;
        QCOMPARE(activations[0] - activations[1], 8 * 64 * 14 * 14 * element);
    }

    void updates_do_not_allocate() {
        SKIP_WITHOUT_ALLOCATION_COUNTER();
        auto engine = make_cpu_engine(fixture_spec(true));
        engine->set_weights(load_weights(kDir + "cnn_weights.safetensors"));
        train_fixture_steps(*engine);  // the caches fill, the fixture is read once
        allocations = 0;
        counting = true;
        train_fixture_steps(*engine);
        counting = false;
        QCOMPARE(allocations.load(), 0L);
    }

private:
    // Two updates as train_fixture runs them, without its vectors (which allocate).
    static void train_fixture_steps(ComputeEngine& engine) {
        static const auto train = read_all("cnn_train.safetensors");
        static const auto labels = fixture_ids(train.at("train.labels"), 0, 4 * kBatch);
        const NamedTensor& inputs = train.at("train.inputs");
        for (int u = 0; u < 2; ++u) {
            engine.zero_grad();
            for (int m = 0; m < 2; ++m) {
                const int64_t first = (2 * u + m) * kBatch;
                MicroBatch batch{inputs.data.data() + first * kImage, labels.data() + first, nullptr, nullptr, kBatch};
                engine.forward_backward(batch, 2.0 * kBatch, 1.0);
            }
            engine.grad_norm_squared();
            engine.optimizer_step(3e-3, 1.0, u + 3);
        }
    }
};

QTEST_APPLESS_MAIN(TestCnnModel)
#include "test_cnn_model.moc"
