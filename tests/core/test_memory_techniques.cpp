// Issue 4's techniques, measured through the engine's own allocator: 16-bit activations,
// gradient checkpointing, optimizer state, the cache, the memory budget and --auto-fit, and
// data prefetching (which must not change the numbers).
#include <QtTest>

#include <cmath>

#include "trainbench/error.hpp"
#include "trainbench/trainer.hpp"

using namespace trainbench;

namespace {

std::shared_ptr<const Dataset> spirals(int64_t rows = 600) {
    DataOptions options;
    options.synthetic_samples = rows;
    options.val_fraction = 0.1;
    return std::make_shared<const Dataset>(load_dataset("spirals", options));
}

RunConfig small_config() {
    RunConfig config;
    config.hidden = {64, 64, 64};
    config.batch_size = 32;
    config.step_size = 2;
    config.max_steps = 3;
    config.threads = 1;
    return config;
}

StepMetrics last_update(const RunConfig& config, std::shared_ptr<const Dataset> data) {
    StepMetrics last;
    Observer observer;
    observer.on_update = [&](const StepMetrics& m) { last = m; };
    const RunResult result = train(config, observer, nullptr, data);
    if (result.reason == StopReason::failed) qWarning("%s", result.message.c_str());
    return last;
}

int64_t peak(const StepMetrics& m, MemoryCategory c) { return m.memory.update_peak_bytes(c); }

}  // namespace

class TestMemoryTechniques : public QObject {
    Q_OBJECT
private slots:
    void sixteen_bit_activations_take_at_most_55_percent() {
        const auto data = spirals();
        RunConfig config = small_config();
        const int64_t fp32 = peak(last_update(config, data), MemoryCategory::activations);
        for (Precision p : {Precision::bf16, Precision::fp16}) {
            config.precision = p;
            const int64_t half = peak(last_update(config, data), MemoryCategory::activations);
            QVERIFY(fp32 > 0);
            QVERIFY2(half <= 0.55 * fp32, qPrintable(QString("%1: %2 vs fp32 %3").arg(QString::fromStdString(to_string(p))).arg(half).arg(fp32)));
        }
    }

    // ReLU, tanh and sigmoid run in place (their backward reads only the output), so an MLP
    // holds one buffer per layer: input, each hidden layer, logits. GELU keeps its input too.
    void mlp_activations_are_one_buffer_per_layer() {
        const auto data = spirals();
        RunConfig config = small_config();  // 2 features, 64-64-64, 3 classes, micro-batch 16
        for (Activation activation : {Activation::relu, Activation::tanh, Activation::sigmoid, Activation::gelu}) {
            config.activation = activation;
            const auto planned = plan_run(config, *data).planned_bytes[static_cast<size_t>(MemoryCategory::activations)];
            const int64_t floats = 16 * (2 + 64 + 64 + 64 + 3) + (activation == Activation::gelu ? 16 * 3 * 64 : 0);
            // Each buffer is rounded up to the arena's 64-byte granule.
            QVERIFY2(planned >= floats * 4 && planned < floats * 4 + 64 * 8,
                     qPrintable(QString("%1: %2 bytes planned for %3 floats").arg(QString::fromStdString(to_string(activation)))
                                    .arg(planned).arg(floats)));
        }
    }

    void sixteen_bit_keeps_fp32_master_weights() {
        RunConfig config = small_config();
        config.precision = Precision::bf16;
        const StepMetrics m = last_update(config, spirals());
        QVERIFY(m.memory.bytes(MemoryCategory::master_weights) > 0);
        QVERIFY(std::abs(m.memory.bytes(MemoryCategory::master_weights) - 2 * m.memory.bytes(MemoryCategory::parameters)) <= 128);
    }

    void checkpointing_takes_at_most_60_percent_and_more_time_per_update() {
        const auto data = spirals();
        RunConfig config = small_config();
        config.hidden = std::vector<int64_t>(16, 64);
        const int64_t plain = peak(last_update(config, data), MemoryCategory::activations);
        config.gradient_checkpointing = true;
        const int64_t checkpointed = peak(last_update(config, data), MemoryCategory::activations);
        QVERIFY2(checkpointed <= 0.60 * plain, qPrintable(QString("%1 vs %2").arg(checkpointed).arg(plain)));
    }

    void checkpointing_does_not_change_the_updates() {
        const auto data = spirals();
        RunConfig config = small_config();
        config.hidden = std::vector<int64_t>(9, 32);
        config.activation = Activation::gelu;
        config.max_steps = 10;
        const RunResult plain = train(config, {}, nullptr, data);
        config.gradient_checkpointing = true;
        const RunResult checkpointed = train(config, {}, nullptr, data);
        QCOMPARE(checkpointed.last.loss, plain.last.loss);
        for (size_t l = 0; l < plain.weights.tensors.size(); ++l)
            QCOMPARE(checkpointed.weights.tensors[l].data, plain.weights.tensors[l].data);
    }

    void optimizer_state_is_zero_one_or_two_times_the_parameters_data() {
        QTest::addColumn<int>("optimizer");
        QTest::addColumn<double>("momentum");
        QTest::addColumn<int>("multiple");
        QTest::newRow("sgd") << static_cast<int>(OptimizerKind::sgd) << 0.0 << 0;
        QTest::newRow("sgd-momentum") << static_cast<int>(OptimizerKind::sgd) << 0.9 << 1;
        QTest::newRow("adagrad") << static_cast<int>(OptimizerKind::adagrad) << 0.0 << 1;
        QTest::newRow("adam") << static_cast<int>(OptimizerKind::adam) << 0.0 << 2;
        QTest::newRow("adamw") << static_cast<int>(OptimizerKind::adamw) << 0.0 << 2;
    }
    void optimizer_state_is_zero_one_or_two_times_the_parameters() {
        QFETCH(int, optimizer);
        QFETCH(double, momentum);
        QFETCH(int, multiple);
        RunConfig config = small_config();
        config.optimizer.kind = static_cast<OptimizerKind>(optimizer);
        config.optimizer.momentum = momentum;
        const StepMetrics m = last_update(config, spirals());
        const int64_t params = m.memory.bytes(MemoryCategory::parameters);
        const int64_t state = m.memory.bytes(MemoryCategory::optimizer_state);
        QVERIFY(std::abs(state - multiple * params) <= 64);  // one allocation's alignment
    }

    void empty_cache_releases_the_cached_blocks() {
        RunConfig config = small_config();
        const StepMetrics kept = last_update(config, spirals());
        QVERIFY(kept.memory.bytes(MemoryCategory::cache) > 0);
        config.empty_cache_steps = 1;
        const StepMetrics emptied = last_update(config, spirals());
        // Metrics are read before the release; the next update starts from an empty cache,
        // so reserved memory between updates is the live memory alone.
        QCOMPARE(emptied.memory.update_peak_bytes(MemoryCategory::activations), kept.memory.update_peak_bytes(MemoryCategory::activations));
    }

    // The composition the app stacks is one moment's: its live part is the update's live peak,
    // and with the cache on top it never passes the run's peak; each category's own peak within
    // the update, summed, does (activations peak in the forward, gradients in the backward).
    void held_at_the_live_peak_adds_up_to_what_was_held() {
        const auto data = spirals();
        for (bool checkpointing : {false, true}) {
            RunConfig config = small_config();
            config.gradient_checkpointing = checkpointing;
            config.max_steps = 4;
            std::vector<StepMetrics> steps;
            Observer observer;
            observer.on_update = [&](const StepMetrics& m) { steps.push_back(m); };
            train(config, observer, nullptr, data);
            QCOMPARE(steps.size(), size_t{4});
            for (const StepMetrics& m : steps) {
                const MemoryReport& memory = m.memory;
                const int64_t held = sum_bytes(memory.update_peak_held);
                const int64_t cache = memory.update_peak_held[static_cast<size_t>(MemoryCategory::cache)];
                QCOMPARE(held - cache, memory.update_live_peak);
                QVERIFY(held <= memory.reserved_peak);
                for (int c = 0; c < kMemoryCategoryCount; ++c)
                    QVERIFY(memory.update_peak_held[static_cast<size_t>(c)] <= memory.update_peak[static_cast<size_t>(c)]);
                qInfo("update %lld: held at the live peak %lld bytes (cache %lld), run peak %lld, categories' own peaks "
                      "summed %lld", static_cast<long long>(m.update), static_cast<long long>(held),
                      static_cast<long long>(cache), static_cast<long long>(memory.reserved_peak),
                      static_cast<long long>(sum_bytes(memory.update_peak)));
            }
        }
    }

    void measured_memory_equals_the_plan() {
        const auto data = spirals();
        RunConfig config = small_config();
        for (bool checkpointing : {false, true}) {
            for (Precision p : {Precision::fp32, Precision::bf16}) {
                config.gradient_checkpointing = checkpointing;
                config.precision = p;
                config.hidden = {64, 48, 64, 32, 64};
                RunPlan plan;
                StepMetrics last;
                Observer observer;
                observer.on_start = [&](const RunPlan& pl) { plan = pl; };
                observer.on_update = [&](const StepMetrics& m) { last = m; };
                train(config, observer, nullptr, data);
                QCOMPARE(last.memory.update_live_peak, plan.planned_total());
            }
        }
    }

    void too_small_budget_fails_before_training_and_names_the_fix() {
        RunConfig config = small_config();
        config.hidden = {512, 512};
        config.batch_size = 256;
        const auto data = spirals();
        const RunPlan full = plan_run(config, *data);
        config.memory_limit_bytes = full.planned_total() - full.planned_bytes[static_cast<int>(MemoryCategory::activations)] / 2;
        bool updated = false;
        Observer observer;
        observer.on_update = [&](const StepMetrics&) { updated = true; };
        try {
            train(config, observer, nullptr, data);
            QFAIL("expected the budget to be refused");
        } catch (const Error& e) {
            const QString message = e.what();
            QVERIFY2(message.contains("needs") && message.contains("--memory-limit") && message.contains("--step-size"), e.what());
        }
        QVERIFY(!updated);
    }

    void auto_fit_finds_the_smallest_step_size_that_fits() {
        RunConfig config = small_config();
        config.hidden = {512, 512};
        config.batch_size = 256;
        config.step_size = 1;
        const auto data = spirals();
        const RunPlan full = plan_run(config, *data);
        config.memory_limit_bytes = full.planned_total() - full.planned_bytes[static_cast<int>(MemoryCategory::activations)] * 2 / 3;
        config.auto_fit = true;
        const RunPlan fitted = plan_run(config, *data);
        QVERIFY(fitted.step_size > 1);
        QVERIFY(fitted.planned_total() <= config.memory_limit_bytes);
        QCOMPARE(fitted.global_batch, int64_t{256});
        QVERIFY(!fitted.auto_fit_note.empty());
        RunConfig smaller = config;
        smaller.auto_fit = false;
        smaller.memory_limit_bytes = 0;
        smaller.step_size = fitted.step_size - 1;
        QVERIFY(plan_run(smaller, *data).planned_total() > config.memory_limit_bytes);
        // And the run trains within the budget.
        const RunResult result = train(config, {}, nullptr, data);
        QCOMPARE(result.reason, StopReason::max_steps);
        QVERIFY(result.last.memory.reserved_peak <= config.memory_limit_bytes);
    }

    void prefetch_gives_the_same_updates_as_inline_loading() {
        const auto data = spirals(1000);
        RunConfig config = small_config();
        config.max_steps = 0;
        config.epochs = 2;
        const RunResult inline_loading = train(config, {}, nullptr, data);
        config.prefetch = 3;
        const RunResult prefetched = train(config, {}, nullptr, data);
        QCOMPARE(prefetched.last.update, inline_loading.last.update);
        QCOMPARE(prefetched.last.loss, inline_loading.last.loss);
        QCOMPARE(prefetched.weights.tensors[0].data, inline_loading.weights.tensors[0].data);
    }
};

QTEST_APPLESS_MAIN(TestMemoryTechniques)
#include "test_memory_techniques.moc"
