// Checkpoints: a run resumed from its checkpoint continues with exactly the metrics and
// weights of the uninterrupted run (CPU); damaged checkpoints are refused clearly.
#include <QtTest>

#include <filesystem>
#include <fstream>

#include "trainbench/error.hpp"
#include "trainbench/trainer.hpp"

using namespace trainbench;

namespace {

struct Row {
    int64_t update;
    double loss, lr, grad_norm, loss_scale;
    bool operator==(const Row&) const = default;
};

// stop_after > 0 interrupts the run after that update, as a user pressing Stop would.
std::vector<Row> run(const RunConfig& config, std::shared_ptr<const Dataset> data, RunResult* result = nullptr,
                     int64_t stop_after = 0) {
    std::vector<Row> rows;
    std::atomic<bool> stop{false};
    Observer observer;
    observer.on_update = [&](const StepMetrics& m) {
        rows.push_back({m.update, m.loss, m.learning_rate, m.grad_norm, m.loss_scale});
        if (m.update == stop_after) stop = true;
    };
    RunResult r = train(config, observer, &stop, data);
    if (result) *result = r;
    return rows;
}

}  // namespace

class TestCheckpointResume : public QObject {
    Q_OBJECT
private slots:
    void resume_reproduces_the_uninterrupted_run_data() {
        QTest::addColumn<int>("precision");
        QTest::addColumn<int>("prefetch");
        QTest::newRow("fp32-adamw-cosine") << static_cast<int>(Precision::fp32) << 0;
        QTest::newRow("fp16-scaler") << static_cast<int>(Precision::fp16) << 2;
    }
    void resume_reproduces_the_uninterrupted_run() {
        QFETCH(int, precision);
        QFETCH(int, prefetch);
        QTemporaryDir dir;
        DataOptions options;
        options.synthetic_samples = 500;
        const auto data = std::make_shared<const Dataset>(load_dataset("moons", options));
        RunConfig config;
        config.dataset = "moons";
        config.hidden = {32, 32};
        config.batch_size = 40;  // 450 rows: 12 updates per epoch, the last one partial
        config.step_size = 3;
        config.epochs = 3;
        config.optimizer.kind = OptimizerKind::adamw;
        config.schedule.kind = ScheduleKind::cosine;
        config.schedule.warmup_steps = 5;
        config.precision = static_cast<Precision>(precision);
        config.prefetch = prefetch;
        config.threads = 1;
        RunResult full_result;
        const auto full = run(config, data, &full_result);
        QCOMPARE(full.size(), size_t{36});

        // Stop after update 17 (mid-epoch 2) with a checkpoint at 15, then resume from it.
        RunConfig first = config;
        first.checkpoint_every = 5;
        first.checkpoint_dir = dir.path().toStdString();
        RunResult interrupted;
        run(first, data, &interrupted, 17);
        QCOMPARE(interrupted.reason, StopReason::stopped);
        RunConfig resumed = config;
        resumed.resume_dir = first.checkpoint_dir;
        RunResult resumed_result;
        const auto rest = run(resumed, data, &resumed_result);
        QCOMPARE(rest.size(), size_t{21});
        QCOMPARE(rest.front().update, int64_t{16});
        for (size_t i = 0; i < rest.size(); ++i) QVERIFY2(rest[i] == full[15 + i], qPrintable(QString("update %1 differs").arg(rest[i].update)));
        for (size_t l = 0; l < full_result.weights.tensors.size(); ++l)
            QCOMPARE(resumed_result.weights.tensors[l].data, full_result.weights.tensors[l].data);
        QCOMPARE(resumed_result.last_epoch.val_loss, full_result.last_epoch.val_loss);
    }

    void truncated_checkpoint_is_rejected() {
        QTemporaryDir dir;
        RunConfig config;
        config.hidden = {16};
        config.max_steps = 4;
        config.checkpoint_every = 2;
        config.checkpoint_dir = dir.path().toStdString();
        train(config);
        const auto path = std::filesystem::path(config.checkpoint_dir) / "latest.safetensors";
        QVERIFY(std::filesystem::exists(path));
        std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
        RunConfig resumed = config;
        resumed.checkpoint_every = 0;
        resumed.resume_dir = config.checkpoint_dir;
        try {
            train(resumed);
            QFAIL("expected the truncated checkpoint to be refused");
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).contains("latest.safetensors"), e.what());
        }
    }

    void missing_checkpoint_folder_is_rejected() {
        RunConfig config;
        config.resume_dir = "/nonexistent/trainbench-checkpoints";
        QVERIFY_THROWS_EXCEPTION(Error, train(config));
    }

    void checkpoint_write_leaves_no_temporary_file() {
        QTemporaryDir dir;
        RunConfig config;
        config.hidden = {8};
        config.max_steps = 3;
        config.checkpoint_every = 1;
        config.checkpoint_dir = dir.path().toStdString();
        train(config);
        int files = 0;
        for (const auto& entry : std::filesystem::directory_iterator(config.checkpoint_dir)) {
            ++files;
            QCOMPARE(QString::fromStdString(entry.path().filename().string()), QString("latest.safetensors"));
        }
        QCOMPARE(files, 1);
    }
};

QTEST_APPLESS_MAIN(TestCheckpointResume)
#include "test_checkpoint_resume.moc"
