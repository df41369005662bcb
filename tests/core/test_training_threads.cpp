// The engine's threads as the app uses them, for ThreadSanitizer (scripts/sanitize.sh tsan,
// docs/RELIABILITY.md): train() runs on a thread of its own (the app's QThread) with the CPU
// engine's worker team of two and the prefetch loader thread, while the thread that started it
// reads the progress the observer publishes and presses Stop by setting the flag. The other
// suites set the flag from inside the observer, on the training thread itself, where TSan has
// no second thread to watch.
#include <QTemporaryDir>
#include <QtTest>

#include <atomic>
#include <chrono>
#include <thread>

#include "trainbench/trainer.hpp"

using namespace trainbench;

namespace {

RunConfig mlp_config(int64_t prefetch) {
    RunConfig config;
    config.dataset = "spirals";
    config.synthetic_samples = 2000;
    config.hidden = {64, 64};
    config.batch_size = 64;
    config.step_size = 2;
    config.epochs = 1000;  // far more than the test waits for: only Stop ends the run
    config.threads = 2;
    config.prefetch = prefetch;
    return config;
}

// Starts `config` on a thread, waits (from this thread) until `stop_after` updates are done,
// sets the stop flag and joins. Returns the result and the updates the observer saw.
struct Stopped {
    RunResult result;
    int64_t updates_seen = 0;
    bool waited_too_long = false;
};
Stopped run_and_stop_from_here(const RunConfig& config, int64_t stop_after) {
    std::atomic<bool> stop{false};
    std::atomic<int64_t> updates{0};
    Observer observer;
    observer.on_update = [&](const StepMetrics& m) { updates.store(m.update, std::memory_order_release); };
    Stopped out;
    std::thread runner([&] { out.result = train(config, observer, &stop); });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
    while (updates.load(std::memory_order_acquire) < stop_after) {
        if (std::chrono::steady_clock::now() > deadline) {
            out.waited_too_long = true;
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    stop.store(true);
    runner.join();
    out.updates_seen = updates.load();
    return out;
}

}  // namespace

class TestTrainingThreads : public QObject {
    Q_OBJECT
private slots:
    void stop_from_another_thread_data() {
        QTest::addColumn<int>("prefetch");
        QTest::addColumn<int>("stop_after");
        QTest::newRow("inline-loading") << 0 << 3;
        QTest::newRow("prefetch-2") << 2 << 3;
        QTest::newRow("prefetch-1-stop-at-once") << 1 << 0;  // Stop races the run's start
    }
    void stop_from_another_thread() {
        QFETCH(int, prefetch);
        QFETCH(int, stop_after);
        const Stopped run = run_and_stop_from_here(mlp_config(prefetch), stop_after);
        QVERIFY2(!run.waited_too_long, "the run did not reach the update to stop at within 5 minutes");
        QCOMPARE(run.result.reason, StopReason::stopped);
        QVERIFY(run.updates_seen >= stop_after);
        QCOMPARE(run.result.last.update, run.updates_seen);
    }

    // A GPT: the attention, LayerNorm and embedding kernels on the worker team, token windows
    // through the loader, recomputation with gradient checkpointing, evaluations and text
    // samples within the run.
    void gpt_stops_from_another_thread() {
        QTemporaryDir folder;
        QVERIFY(folder.isValid());
        QFile text(folder.filePath("text.txt"));
        QVERIFY(text.open(QIODevice::WriteOnly));
        for (int i = 0; i < 400; ++i) text.write("And God said, Let there be light: and there was light.\n");
        text.close();
        RunConfig config = default_config(ModelFamily::gpt);
        config.dataset = "text:" + text.fileName().toStdString();
        config.n_layer = 2;
        config.n_head = 2;
        config.n_embd = 32;
        config.block_size = 16;
        config.batch_size = 8;
        config.step_size = 2;
        config.epochs = 1000;
        config.max_steps = 0;
        config.threads = 2;
        config.prefetch = 2;
        config.gradient_checkpointing = true;
        config.eval_every = 2;
        config.eval_samples = 8;
        config.sample_chars = 16;
        const Stopped run = run_and_stop_from_here(config, 4);
        QVERIFY2(!run.waited_too_long, "the run did not reach update 4 within 5 minutes");
        QCOMPARE(run.result.reason, StopReason::stopped);
        QVERIFY(run.updates_seen >= 4);
    }
};

QTEST_APPLESS_MAIN(TestTrainingThreads)
#include "test_training_threads.moc"
