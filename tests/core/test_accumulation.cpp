// Gradient accumulation must not change training: for any step_size the updates equal those
// of step_size 1 (one batch of the same global size) up to float rounding, including a batch
// size that step_size does not divide and a partial last batch. Same config -> same bits.
#include <QtTest>

#include <cmath>

#include "trainbench/error.hpp"
#include "trainbench/trainer.hpp"

using namespace trainbench;

namespace {

struct Trace {
    std::vector<double> losses;
    std::vector<double> grad_norms;
    std::vector<int64_t> batch_samples;
    RunResult result;
};

Trace run(RunConfig config, std::shared_ptr<const Dataset> data) {
    Trace trace;
    Observer observer;
    observer.on_update = [&](const StepMetrics& m) {
        trace.losses.push_back(m.loss);
        trace.grad_norms.push_back(m.grad_norm);
        trace.batch_samples.push_back(m.batch_samples);
    };
    trace.result = train(config, observer, nullptr, data);
    return trace;
}

double max_relative_weight_difference(const ModelWeights& a, const ModelWeights& b) {
    double worst = 0.0;
    for (size_t l = 0; l < a.tensors.size(); ++l) {
        double diff = 0.0, norm = 0.0;
        for (size_t i = 0; i < a.tensors[l].data.size(); ++i) {
            diff += std::pow(a.tensors[l].data[i] - b.tensors[l].data[i], 2);
            norm += std::pow(a.tensors[l].data[i], 2);
        }
        worst = std::max(worst, std::sqrt(diff / norm));
    }
    return worst;
}

std::shared_ptr<const Dataset> spirals(int64_t rows) {
    DataOptions options;
    options.synthetic_samples = rows;
    options.val_fraction = 0.0;
    options.seed = 5;
    return std::make_shared<const Dataset>(load_dataset("spirals", options));
}

RunConfig base_config(OptimizerKind optimizer) {
    RunConfig config;
    config.dataset = "spirals";
    config.hidden = {16, 16};
    config.batch_size = 10;       // 10 with step_size 4 -> micro-batches 3,3,2,2
    config.epochs = 2;
    config.val_fraction = 0.0;
    config.optimizer.kind = optimizer;
    config.optimizer.lr = optimizer == OptimizerKind::sgd ? 0.05 : 0.01;
    config.optimizer.momentum = optimizer == OptimizerKind::sgd ? 0.9 : 0.0;
    config.threads = 1;
    return config;
}

}  // namespace

class TestAccumulation : public QObject {
    Q_OBJECT
private slots:
    void micro_batches_split_contiguously_and_evenly() {
        QCOMPARE(split_micro_batches(10, 4), (std::vector<int64_t>{3, 3, 2, 2}));
        QCOMPARE(split_micro_batches(8, 2), (std::vector<int64_t>{4, 4}));
        QCOMPARE(split_micro_batches(3, 8), (std::vector<int64_t>{1, 1, 1}));
        QCOMPARE(updates_per_epoch(203, 10), int64_t{21});
    }

    void step_size_does_not_change_the_updates_data() {
        QTest::addColumn<int>("optimizer");
        QTest::addColumn<int>("step_size");
        for (int step : {2, 3, 4, 8}) {
            QTest::newRow(qPrintable(QString("sgd-step%1").arg(step))) << static_cast<int>(OptimizerKind::sgd) << step;
            QTest::newRow(qPrintable(QString("adamw-step%1").arg(step))) << static_cast<int>(OptimizerKind::adamw) << step;
        }
    }
    void step_size_does_not_change_the_updates() {
        QFETCH(int, optimizer);
        QFETCH(int, step_size);
        const auto data = spirals(203);  // 203 rows, batch 10: the 21st batch has 3 samples
        RunConfig config = base_config(static_cast<OptimizerKind>(optimizer));
        config.step_size = 1;
        const Trace reference = run(config, data);
        config.step_size = step_size;
        const Trace accumulated = run(config, data);

        QCOMPARE(reference.result.reason, StopReason::completed);
        QCOMPARE(accumulated.losses.size(), reference.losses.size());
        QCOMPARE(reference.losses.size(), size_t{42});
        QCOMPARE(accumulated.batch_samples[20], int64_t{3});  // the partial last batch still updates
        for (size_t u = 0; u < reference.losses.size(); ++u) {
            QVERIFY2(std::abs(accumulated.losses[u] - reference.losses[u]) <= 1e-5 * std::abs(reference.losses[u]),
                     qPrintable(QString("update %1: loss %2 vs %3").arg(u + 1).arg(accumulated.losses[u], 0, 'g', 9).arg(reference.losses[u], 0, 'g', 9)));
            QVERIFY(std::abs(accumulated.grad_norms[u] - reference.grad_norms[u]) <= 1e-4 * reference.grad_norms[u]);
        }
        QVERIFY(max_relative_weight_difference(accumulated.result.weights, reference.result.weights) < 1e-5);
    }

    void loss_is_normalised_by_the_global_batch_not_per_micro_batch() {
        // With micro-batches 3,3,2,2 the mean of per-micro-batch means differs from the
        // global mean; the reported loss must be the global mean, equal to step_size 1's.
        const auto data = spirals(40);
        RunConfig config = base_config(OptimizerKind::sgd);
        config.epochs = 1;
        config.step_size = 4;
        const Trace four = run(config, data);
        config.step_size = 1;
        const Trace one = run(config, data);
        QCOMPARE(four.losses.size(), size_t{4});
        for (size_t u = 0; u < one.losses.size(); ++u) QVERIFY(std::abs(four.losses[u] - one.losses[u]) < 1e-6);
    }

    void same_config_and_seed_give_identical_bits() {
        const auto data = spirals(400);
        RunConfig config = base_config(OptimizerKind::adam);
        config.step_size = 3;
        config.threads = 2;
        const Trace first = run(config, data);
        const Trace second = run(config, data);
        QCOMPARE(first.losses, second.losses);
        QCOMPARE(first.grad_norms, second.grad_norms);
        for (size_t l = 0; l < first.result.weights.tensors.size(); ++l)
            QCOMPARE(first.result.weights.tensors[l].data, second.result.weights.tensors[l].data);
    }

    void stop_flag_ends_the_run_within_one_micro_batch() {
        const auto data = spirals(2000);
        RunConfig config = base_config(OptimizerKind::sgd);
        config.epochs = 100;
        std::atomic<bool> stop{false};
        int64_t updates = 0;
        Observer observer;
        observer.on_update = [&](const StepMetrics& m) {
            updates = m.update;
            if (m.update == 5) stop = true;
        };
        const RunResult result = train(config, observer, &stop, data);
        QCOMPARE(result.reason, StopReason::stopped);
        QCOMPARE(updates, int64_t{5});
    }

    void step_size_larger_than_batch_is_rejected() {
        RunConfig config = base_config(OptimizerKind::sgd);
        config.step_size = 11;
        try {
            train(config, {}, nullptr, spirals(100));
            QFAIL("expected an error");
        } catch (const Error& e) {
            QVERIFY2(QString(e.what()).contains("step_size"), e.what());
        }
    }

    void divergence_stops_with_a_clear_reason() {
        RunConfig config = base_config(OptimizerKind::sgd);
        config.optimizer.lr = 1e30;
        config.optimizer.momentum = 0.0;
        const RunResult result = train(config, {}, nullptr, spirals(200));
        QCOMPARE(result.reason, StopReason::diverged);
        QVERIFY2(QString::fromStdString(result.message).contains("--lr"), result.message.c_str());
    }
};

QTEST_APPLESS_MAIN(TestAccumulation)
#include "test_accumulation.moc"
