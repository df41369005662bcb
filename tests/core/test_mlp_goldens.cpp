// The MLP's weights after 30 updates, bit for bit, against goldens recorded before the engine
// became model-agnostic (issue 9: "the MLP path is ported, not rewritten"). Any change to the
// arithmetic of an MLP update (product order, activation, loss gradient, optimizer) shows up
// here; a deliberate change re-records the goldens and says why in the commit.
//
// Re-record (from the build directory):
//   TRAINBENCH_RECORD_GOLDENS=1 tests/core_test_mlp_goldens
// which rewrites tests/fixtures/mlp_goldens/*.safetensors.
//
// Bits depend on the vector instructions the products were compiled for (-march=native), so
// the goldens carry the CPU's vector width and the test skips, saying so, on another kind.
#include <QtTest>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>

#include "core/sanitizer_build.hpp"
#include "trainbench/error.hpp"
#include "trainbench/trainer.hpp"
#include "trainbench/weights.hpp"

using namespace trainbench;

namespace {

const std::string kGoldenDir = std::string(TRAINBENCH_FIXTURES_DIR) + "/mlp_goldens";

// What the compiler vectorised for: the widest instruction set this binary was built with.
std::string vector_isa() {
#if defined(__AVX512F__)
    return "avx512f";
#elif defined(__AVX2__)
    return "avx2";
#else
    return "baseline";
#endif
}

struct GoldenCase {
    const char* name;
    RunConfig config;
};

RunConfig base() {
    RunConfig config;
    config.dataset = "spirals";
    config.synthetic_samples = 590;  // 24 full batches and a partial one of 14 per epoch
    config.val_fraction = 0.0;
    config.seed = 11;
    config.hidden = {32, 32, 32};  // three hidden layers: checkpointing keeps some, drops some
    config.batch_size = 24;
    config.step_size = 1;
    config.max_steps = 30;
    config.epochs = 10;
    config.threads = 2;            // the products split across two workers
    config.optimizer.kind = OptimizerKind::adam;
    config.optimizer.lr = 0.01;
    // The goldens pin the engine's own Eigen products, whatever this CPU's automatic choice;
    // oneDNN's are checked against fp64 references and PyTorch (test_onednn_products.cpp).
    config.cpu_products = CpuProducts::eigen;
    return config;
}

std::vector<GoldenCase> golden_cases() {
    std::vector<GoldenCase> cases;
    cases.push_back({"fp32_step1_relu_adam", base()});
    {
        RunConfig c = base();
        c.step_size = 4;  // 24 -> four micro-batches of 6
        cases.push_back({"fp32_step4_relu_adam", c});
    }
    {
        RunConfig c = base();
        c.precision = Precision::bf16;
        c.gradient_checkpointing = true;
        c.step_size = 2;
        cases.push_back({"bf16_checkpointing_step2_relu_adam", c});
    }
    {
        RunConfig c = base();
        c.activation = Activation::gelu;
        c.optimizer.kind = OptimizerKind::adamw;
        c.clip_grad_norm = 0.5;
        cases.push_back({"fp32_gelu_adamw_clip", c});
    }
    {
        RunConfig c = base();
        c.optimizer.kind = OptimizerKind::sgd;
        c.optimizer.lr = 0.05;
        c.optimizer.momentum = 0.9;
        c.step_size = 3;  // 24 -> 8, 8, 8; the epoch's last batch of 14 -> 5, 5, 4
        cases.push_back({"fp32_sgd_momentum_step3", c});
    }
    {
        RunConfig c = base();
        c.precision = Precision::fp16;
        c.activation = Activation::gelu;
        c.gradient_checkpointing = true;
        c.step_size = 2;
        cases.push_back({"fp16_gelu_checkpointing_step2", c});
    }
    {
        RunConfig c = base();
        c.hidden = {160, 160};  // products large enough to be split across the two workers
        c.batch_size = 64;
        c.step_size = 2;
        cases.push_back({"fp32_wide_threaded_step2", c});
    }
    return cases;
}

std::vector<NamedTensor> trained_weights(const RunConfig& config, const QString& dir) {
    const RunResult result = train(config);
    if (result.reason != StopReason::max_steps) throw Error("run stopped early: " + result.message);
    const std::string path = (dir + "/weights.safetensors").toStdString();
    save_weights(path, result.weights);
    return read_safetensors(path);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

class TestMlpGoldens : public QObject {
    Q_OBJECT
private slots:
    void weights_after_30_updates_equal_the_goldens_bit_for_bit_data() {
        QTest::addColumn<int>("index");
        const auto cases = golden_cases();
        for (size_t i = 0; i < cases.size(); ++i) QTest::newRow(cases[i].name) << static_cast<int>(i);
    }

    void weights_after_30_updates_equal_the_goldens_bit_for_bit() {
        QFETCH(int, index);
        const GoldenCase golden = golden_cases()[static_cast<size_t>(index)];
        const std::string path = kGoldenDir + "/" + golden.name + ".safetensors";
        QTemporaryDir dir;
        const std::vector<NamedTensor> weights = trained_weights(golden.config, dir.path());

        if (std::getenv("TRAINBENCH_RECORD_GOLDENS")) {
            write_safetensors(path, weights, {{"vector_isa", vector_isa()}});
            QSKIP(qPrintable(QString("recorded %1").arg(QString::fromStdString(path))));
        }

        if (TRAINBENCH_SANITIZED_BUILD)
            QSKIP("trained under a sanitizer (which checked the 30 updates), bits not compared: the "
                  "goldens hold the Release build's arithmetic, and -O1 with instrumentation "
                  "vectorises (so sums) differently");
        std::map<std::string, std::string> metadata;
        const std::vector<NamedTensor> expected = read_safetensors(path, &metadata);
        if (metadata["vector_isa"] != vector_isa())
            QSKIP(qPrintable(QString("goldens were recorded with %1 products, this build uses %2")
                                 .arg(QString::fromStdString(metadata["vector_isa"]),
                                      QString::fromStdString(vector_isa()))));
        QCOMPARE(weights.size(), expected.size());
        for (size_t t = 0; t < expected.size(); ++t) {
            QCOMPARE(weights[t].name, expected[t].name);
            QCOMPARE(weights[t].shape, expected[t].shape);
            if (!same_bits(weights[t].data, expected[t].data)) {
                size_t first = 0;
                while (first < expected[t].data.size() && weights[t].data[first] == expected[t].data[first]) ++first;
                QFAIL(qPrintable(QString("%1 differs from the golden (first at element %2: %3 vs %4)")
                                     .arg(QString::fromStdString(expected[t].name))
                                     .arg(first)
                                     .arg(double(weights[t].data[first]), 0, 'g', 9)
                                     .arg(double(expected[t].data[first]), 0, 'g', 9)));
            }
        }
    }

    // The goldens must be sensitive: a run one update shorter does not match them.
    void one_update_fewer_does_not_match() {
        const GoldenCase golden = golden_cases().front();
        std::map<std::string, std::string> metadata;
        const auto expected = read_safetensors(kGoldenDir + "/" + golden.name + ".safetensors", &metadata);
        RunConfig config = golden.config;
        config.max_steps = 29;
        QTemporaryDir dir;
        const auto weights = trained_weights(config, dir.path());
        bool all_same = true;
        for (size_t t = 0; t < expected.size(); ++t) all_same = all_same && same_bits(weights[t].data, expected[t].data);
        QVERIFY(!all_same);
    }
};

QTEST_APPLESS_MAIN(TestMlpGoldens)
#include "test_mlp_goldens.moc"
