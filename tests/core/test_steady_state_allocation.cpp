// "No heap allocation in the steady-state training step": this executable interposes the C
// allocator and counts calls made while updates run, after the first few (which fill the
// arena's cache). The observer and the loop itself must not allocate either.
#include <QTemporaryDir>
#include <QtTest>

#include <atomic>
#include <cstdlib>

#include "core/allocation_counter.hpp"
#include "trainbench/trainer.hpp"

using namespace trainbench;

namespace {

// Trains `config` (40 updates) and counts the allocations of updates 5 to 35, after the first
// ones have filled the arena's cache.
void expect_no_allocation_in_updates_5_to_35(const RunConfig& config, std::shared_ptr<const Dataset> data) {
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
    const RunResult result = train(config, observer, nullptr, std::move(data));
    QVERIFY2(result.reason == StopReason::max_steps, result.message.c_str());
    QVERIFY2(during == 0, qPrintable(QString("%1 allocations during 30 updates").arg(during)));
}

}  // namespace

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
        SKIP_WITHOUT_ALLOCATION_COUNTER();
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
        expect_no_allocation_in_updates_5_to_35(config, data);
    }

    // A GPT on a text: token windows through the loader, attention, LayerNorm, embedding and
    // the --eval-every evaluations inside the counted updates.
    void gpt_updates_do_not_allocate_data() {
        QTest::addColumn<bool>("checkpointing");
        QTest::addColumn<int>("prefetch");
        QTest::newRow("fp32") << false << 0;
        QTest::newRow("checkpointing-prefetch") << true << 2;
    }
    void gpt_updates_do_not_allocate() {
        SKIP_WITHOUT_ALLOCATION_COUNTER();
        QFETCH(bool, checkpointing);
        QFETCH(int, prefetch);
        QTemporaryDir folder;
        QVERIFY(folder.isValid());
        QFile text(folder.filePath("text.txt"));
        QVERIFY(text.open(QIODevice::WriteOnly));
        for (int i = 0; i < 1000; ++i) text.write("And God said, Let there be light: and there was light.\n");
        text.close();
        RunConfig config = default_config(ModelFamily::gpt);
        config.dataset = "text:" + text.fileName().toStdString();
        config.n_layer = 2;
        config.n_embd = 64;
        config.block_size = 32;
        config.batch_size = 16;
        config.step_size = 2;
        config.max_steps = 40;
        config.threads = 2;
        config.eval_every = 10;
        config.eval_samples = 16;
        config.gradient_checkpointing = checkpointing;
        config.prefetch = prefetch;
        expect_no_allocation_in_updates_5_to_35(config, nullptr);
    }
};

QTEST_APPLESS_MAIN(TestSteadyStateAllocation)
#include "test_steady_state_allocation.moc"
