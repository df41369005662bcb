// "No heap allocation in the steady-state training step": this executable interposes the C
// allocator and counts calls made while updates run, after the first few (which fill the
// arena's cache). The observer and the loop itself must not allocate either.
#include <QtTest>

#include <atomic>
#include <cstdlib>

#include "core/allocation_counter.hpp"
#include "trainbench/trainer.hpp"

using namespace trainbench;

class TestSteadyStateAllocation : public QObject {
    Q_OBJECT
private slots:
    void updates_do_not_allocate_data() {
        QTest::addColumn<QString>("precision");
        QTest::addColumn<bool>("checkpointing");
        QTest::addColumn<int>("prefetch");
        QTest::newRow("fp32") << "fp32" << false << 0;
        QTest::newRow("bf16-checkpointing") << "bf16" << true << 0;
        QTest::newRow("fp16-prefetch") << "fp16" << false << 2;
    }
    void updates_do_not_allocate() {
        QFETCH(QString, precision);
        QFETCH(bool, checkpointing);
        QFETCH(int, prefetch);
        DataOptions options;
        options.synthetic_samples = 20000;
        const auto data = std::make_shared<const Dataset>(load_dataset("spirals", options));
        RunConfig config;
        config.hidden = {256, 256, 256, 256};
        config.batch_size = 256;  // products large enough for Eigen's blocked, threaded kernels
        config.step_size = 4;
        config.max_steps = 40;
        config.threads = 2;
        config.precision = parse_precision(precision.toStdString());
        config.gradient_checkpointing = checkpointing;
        config.prefetch = prefetch;
        long during = 0;
        Observer observer;
        observer.on_update = [&](const StepMetrics& m) {
            if (m.update == 5) {
                allocations = 0;
                counting = true;
            }
            if (m.update == 35) {
                counting = false;
                during = allocations.load();
            }
        };
        const RunResult result = train(config, observer, nullptr, data);
        QCOMPARE(result.reason, StopReason::max_steps);
        QVERIFY2(during == 0, qPrintable(QString("%1 allocations during 30 updates").arg(during)));
    }
};

QTEST_APPLESS_MAIN(TestSteadyStateAllocation)
#include "test_steady_state_allocation.moc"
