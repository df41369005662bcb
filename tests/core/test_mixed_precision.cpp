// Mixed precision trains as well as fp32 (within a small margin), and fp16's dynamic loss
// scaler halves the scale and skips the update when a batch overflows.
#include <QtTest>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "trainbench/error.hpp"
#include "trainbench/trainer.hpp"

using namespace trainbench;

namespace {

EpochMetrics final_validation(RunConfig config, std::shared_ptr<const Dataset> data) {
    const RunResult result = train(config, {}, nullptr, data);
    if (result.reason == StopReason::failed || result.reason == StopReason::diverged) qWarning("%s", result.message.c_str());
    return result.last_epoch;
}

}  // namespace

class TestMixedPrecision : public QObject {
    Q_OBJECT
private slots:
    void sixteen_bit_matches_fp32_on_spirals() {
        DataOptions options;
        options.synthetic_samples = 3000;
        const auto data = std::make_shared<const Dataset>(load_dataset("spirals", options));
        RunConfig config;
        config.hidden = {128, 128};
        config.batch_size = 32;
        config.epochs = 8;
        config.threads = 2;
        const EpochMetrics fp32 = final_validation(config, data);
        QVERIFY2(fp32.val_accuracy >= 0.95, qPrintable(QString::number(fp32.val_accuracy)));
        for (Precision p : {Precision::bf16, Precision::fp16}) {
            config.precision = p;
            const EpochMetrics half = final_validation(config, data);
            QVERIFY2(half.val_accuracy >= fp32.val_accuracy - 0.02,
                     qPrintable(QString("%1: %2 vs fp32 %3").arg(QString::fromStdString(to_string(p))).arg(half.val_accuracy).arg(fp32.val_accuracy)));
        }
    }

    void sixteen_bit_matches_fp32_on_fashion_mnist() {
        if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"))
            QSKIP("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)");
        const auto data = std::make_shared<const Dataset>(load_dataset("fashion-mnist", DataOptions{}));
        RunConfig config;
        config.dataset = "fashion-mnist";
        config.hidden = {128};
        config.batch_size = 64;
        config.max_steps = 400;
        config.threads = 2;
        const EpochMetrics fp32 = final_validation(config, data);
        QVERIFY2(fp32.val_accuracy > 0.75, qPrintable(QString::number(fp32.val_accuracy)));
        for (Precision p : {Precision::bf16, Precision::fp16}) {
            config.precision = p;
            const EpochMetrics half = final_validation(config, data);
            QVERIFY2(std::abs(half.val_accuracy - fp32.val_accuracy) <= 0.02,
                     qPrintable(QString("%1: %2 vs fp32 %3").arg(QString::fromStdString(to_string(p))).arg(half.val_accuracy).arg(fp32.val_accuracy)));
            QVERIFY(std::abs(half.val_loss - fp32.val_loss) <= 0.05);
        }
    }

    void fp16_scaler_halves_and_skips_on_overflow() {
        // Sample 70 has a feature of 1e6, past fp16's 65504: its batch overflows in 16 bits.
        QTemporaryDir dir;
        const std::string path = dir.filePath("overflow.csv").toStdString();
        {
            std::ofstream csv(path);
            csv << "x1,x2,label\n";
            for (int i = 0; i < 200; ++i) csv << (i == 70 ? 1e6 : 0.01 * (i % 17)) << "," << 0.02 * (i % 11) << "," << (i % 2) << "\n";
        }
        RunConfig config;
        config.dataset = "csv:" + path;
        config.shuffle = false;
        config.val_fraction = 0.0;
        config.hidden = {16};
        config.batch_size = 20;  // sample 70 is in update 4
        config.epochs = 1;
        config.precision = Precision::fp16;
        std::vector<StepMetrics> steps;
        Observer observer;
        observer.on_update = [&](const StepMetrics& m) { steps.push_back(m); };
        const RunResult result = train(config, observer, nullptr, nullptr);
        QCOMPARE(result.reason, StopReason::completed);
        QCOMPARE(steps.size(), size_t{10});
        QCOMPARE(steps[0].loss_scale, 65536.0);
        for (size_t u = 0; u < steps.size(); ++u) QCOMPARE(steps[u].skipped, u == 3);
        QCOMPARE(steps[3].loss_scale, 65536.0);  // the scale used by the overflowing update
        QCOMPARE(steps[4].loss_scale, 32768.0);  // halved for the next one
        QCOMPARE(steps.back().skipped_updates, int64_t{1});

        // The same data in fp32 and bf16 does not overflow (their range reaches 3e38).
        config.precision = Precision::bf16;
        steps.clear();
        train(config, observer, nullptr, nullptr);
        for (const auto& s : steps) QVERIFY(!s.skipped);
    }

    void fp16_scaler_grows_after_2000_clean_updates() {
        DataOptions options;
        options.synthetic_samples = 2100;
        options.val_fraction = 0.0;
        const auto data = std::make_shared<const Dataset>(load_dataset("blobs", options));
        RunConfig config;
        config.dataset = "blobs";
        config.hidden = {8};
        config.batch_size = 1;
        config.step_size = 1;
        config.max_steps = 2001;
        config.optimizer.kind = OptimizerKind::sgd;
        config.optimizer.lr = 1e-3;
        config.precision = Precision::fp16;
        config.threads = 1;
        std::vector<double> scales;
        int64_t skipped = 0;
        Observer observer;
        observer.on_update = [&](const StepMetrics& m) {
            scales.push_back(m.loss_scale);
            skipped = m.skipped_updates;
        };
        train(config, observer, nullptr, data);
        QCOMPARE(skipped, int64_t{0});
        QCOMPARE(scales[1999], 65536.0);
        QCOMPARE(scales[2000], 131072.0);
    }
};

QTEST_APPLESS_MAIN(TestMixedPrecision)
#include "test_mixed_precision.moc"
