// Issue 3 asks the plots to keep up with 100,000 updates per run and 10 runs at once. This feeds
// that much synthetic-but-plausible data through the path a live run uses (RunStore::appendMetrics
// in drain-sized batches, exactly as RunController::drain does every 33 ms, into the MainWindow's
// plots), then times a drain, a full replot of every plot, the hover read-out and a redraw after
// a view change, and checks that the GUI thread keeps ticking while a run streams in on top.
//
// The bounds are about 3-4x what this test measured on the team's slow, shared 2-core box
// (offscreen platform, Release build); the measured figures are printed so a regression shows
// how far it moved. Every figure is the GUI thread's CPU time (testing::ThreadCpuTimer), not
// wall time: under load the scheduler's pauses made wall-clock bounds fail without any change
// in the code. They still catch a real problem: re-adding every point each drain, graphs
// drawn without adaptive sampling, plots replotting back to back, or a linear hover search.
#include <QTimer>
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <random>

#include "loss_plot.hpp"
#include "main_window.hpp"
#include "memory_plot.hpp"
#include "plot_area.hpp"
#include "run_store.hpp"
#include "speed_plot.hpp"
#include "ui_test_support.hpp"
#include "x_axis.hpp"

using namespace trainbench;
using namespace trainbench::ui;

namespace {

constexpr int kRuns = 10;
constexpr int64_t kUpdatesPerRun = 100'000;
// A small model updates ~4,000 times a second here, so one 33 ms drain carries ~130 steps.
constexpr int64_t kStepsPerDrain = 128;
constexpr int64_t kUpdatesPerEpoch = 85;

// Measured on the shared 2-core box (load ~3 from other builds), Release, offscreen: drain mean
// 0.13-0.17 ms, p99 0.4-1.0 ms; full replot loss 38-58 ms, memory 22-49 ms, speed 43-68 ms;
// read-out 0.05 ms per plot; x-axis switch 170-230 ms; smoothing change 110-150 ms; largest
// event-loop gap while streaming 91-98 ms (one replot). Before the fixes that came with this
// test, the loss replot took ~100 ms (every validation marker drawn) and plots replotted back
// to back, stalling the loop 140-165 ms. Each bound is about 3-4x the measurement.
constexpr double kMeanDrainBoundMs = 0.6;
// A drain's cost must not grow with the points already plotted: the median drain of the last
// fifth of each finished run against that of its first fifth, a tenth of a second apart, so
// that load on the machine weighs on both alike (a p99 bound on single drains failed under
// load). Re-adding every point each drain would make that ratio about 9 (90,000 points against
// 10,000).
constexpr double kDrainGrowthBound = 4.0;
constexpr double kReplotBoundMs = 250.0;
constexpr double kReadoutBoundMs = 0.2;
constexpr double kAxisSwitchBoundMs = 800.0;
constexpr double kSmoothingBoundMs = 600.0;
constexpr qint64 kTickGapBoundMs = 300;
// Wall time between two ticks also counts the scheduler's pauses; beyond a second it is a freeze.
constexpr qint64 kFreezeBoundMs = 1000;

// Generates one run's metrics the way the engine reports them: a decaying, noisy loss, jittery
// update times, constant parameter/gradient/optimizer memory and activations that breathe.
class SyntheticRun {
public:
    SyntheticRun(int index, int64_t batchSize)
        : random_(1234u + static_cast<unsigned>(index)), batch_size_(batchSize),
          decay_(6000.0 + 1500.0 * index), floor_(0.02 + 0.01 * index) {}

    void next(std::vector<StepMetrics>& steps, std::vector<EpochMetrics>& epochs, int64_t count) {
        steps.clear();
        epochs.clear();
        std::lognormal_distribution<double> noise(0.0, 0.25);
        std::normal_distribution<double> jitter(0.0, 0.04);
        for (int64_t i = 0; i < count; ++i) {
            StepMetrics step;
            step.update = ++update_;
            step.epoch = (update_ - 1) / kUpdatesPerEpoch + 1;
            step.samples_seen = update_ * batch_size_;
            step.batch_samples = batch_size_;
            const double expected_loss = 1.1 * std::exp(-static_cast<double>(update_) / decay_) + floor_;
            step.loss = expected_loss * noise(random_);
            step.learning_rate = 3e-3;
            step.grad_norm = 2.0 * expected_loss * noise(random_);
            step.update_ms = std::max(0.05, 0.25 * (1.0 + jitter(random_)) * noise(random_));
            step.samples_per_second = static_cast<double>(batch_size_) / step.update_ms * 1000.0;
            wall_seconds_ += step.update_ms / 1000.0;
            step.wall_seconds = wall_seconds_;
            fill_memory(step.memory);
            step.rss_bytes = 48 << 20;
            steps.push_back(step);
            if (update_ % kUpdatesPerEpoch == 0) {
                EpochMetrics epoch;
                epoch.epoch = step.epoch;
                epoch.update = update_;
                epoch.train_loss = expected_loss;
                epoch.val_loss = expected_loss * 1.05;
                epoch.val_accuracy = std::min(1.0, 0.4 + static_cast<double>(update_) / 50'000.0);
                epoch.val_samples = 600;
                epoch.wall_seconds = wall_seconds_;
                epochs.push_back(epoch);
            }
        }
    }

private:
    void fill_memory(MemoryReport& memory) {
        constexpr int64_t kParameters = 68 << 10;
        auto& peak = memory.update_peak;
        peak[static_cast<int>(MemoryCategory::parameters)] = kParameters;
        peak[static_cast<int>(MemoryCategory::gradients)] = kParameters;
        peak[static_cast<int>(MemoryCategory::optimizer_state)] = 2 * kParameters;
        peak[static_cast<int>(MemoryCategory::activations)] = batch_size_ * 1024 + (update_ % 7) * 256;
        peak[static_cast<int>(MemoryCategory::workspace)] = 16 << 10;
        peak[static_cast<int>(MemoryCategory::cache)] = (update_ % 5) * 2048;
        memory.current = peak;
        memory.update_live_peak = sum_bytes(peak) - peak[static_cast<int>(MemoryCategory::cache)];
        memory.reserved = sum_bytes(peak);
        reserved_peak_ = std::max(reserved_peak_, memory.reserved);
        memory.reserved_peak = reserved_peak_;
        memory.live_peak = std::max(memory.live_peak, memory.update_live_peak);
        memory.peak = peak;
    }

    std::mt19937 random_;
    int64_t batch_size_;
    double decay_;
    double floor_;
    int64_t update_ = 0;
    double wall_seconds_ = 0.0;
    int64_t reserved_peak_ = 0;
};

double milliseconds(const testing::ThreadCpuTimer& timer) { return static_cast<double>(timer.nsecsElapsed()) / 1e6; }

// Time of one full redraw of `plot` as the app does it (autoscale, layout, every graph).
double full_replot_ms(RunPlot& plot) {
    plot.replot();  // the first replot after a data change lays out once; time the steady state
    testing::ThreadCpuTimer timer;
    timer.start();
    plot.replot();
    return milliseconds(timer);
}

}  // namespace

class PlotScaleTest : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { testing::isolate_settings(); }

    void tenRunsOfHundredThousandUpdates() {
        MainWindow window;
        window.resize(1400, 900);
        window.show();
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        RunStore& store = window.runStore();
        PlotArea& plots = *window.plotArea();

        // Nine finished runs, fed drain by drain as if each had run live.
        std::vector<double> drain_ms;
        drain_ms.reserve(kRuns * kUpdatesPerRun / kStepsPerDrain + kRuns);
        double largest_growth = 0.0;
        auto median = [](std::vector<double> values) {
            std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2), values.end());
            return values[values.size() / 2];
        };
        std::vector<StepMetrics> steps;
        std::vector<EpochMetrics> epochs;
        steps.reserve(kStepsPerDrain);
        for (int index = 0; index < kRuns - 1; ++index) {
            RunConfig config = testing::small_config(kUpdatesPerRun, index % 4 + 1);
            const int id = store.addRun(config).id;
            SyntheticRun run(index, config.batch_size);
            const std::size_t first_drain = drain_ms.size();
            for (int64_t done = 0; done < kUpdatesPerRun; done += kStepsPerDrain) {
                run.next(steps, epochs, std::min(kStepsPerDrain, kUpdatesPerRun - done));
                testing::ThreadCpuTimer timer;
                timer.start();
                store.appendMetrics(id, steps, epochs, {});
                drain_ms.push_back(milliseconds(timer));
            }
            store.finishRun(id, RunState::completed, {}, 25.0, {});
            const auto begin = drain_ms.begin() + static_cast<std::ptrdiff_t>(first_drain);
            const auto fifth = static_cast<std::ptrdiff_t>((drain_ms.size() - first_drain) / 5);
            largest_growth = std::max(largest_growth, median(std::vector<double>(drain_ms.end() - fifth, drain_ms.end())) /
                                                          median(std::vector<double>(begin, begin + fifth)));
        }

        // The tenth run streams in live: drains every 33 ms on the GUI thread's event loop while
        // the plots replot themselves, and a 5 ms ticker measures how long the loop ever stalls.
        RunConfig live_config = testing::small_config(kUpdatesPerRun, 8);
        const int live_id = store.addRun(live_config).id;
        SyntheticRun live(kRuns - 1, live_config.batch_size);
        for (int64_t done = 0; done < kUpdatesPerRun - 20'000; done += kStepsPerDrain) {
            live.next(steps, epochs, kStepsPerDrain);
            store.appendMetrics(live_id, steps, epochs, {});
        }
        int64_t streamed = kUpdatesPerRun - 20'000;
        testing::EventLoopGapProbe probe;
        QTimer drain_timer;
        drain_timer.setInterval(33);
        connect(&drain_timer, &QTimer::timeout, this, [&] {
            if (streamed >= kUpdatesPerRun) return;
            live.next(steps, epochs, std::min(kStepsPerDrain, kUpdatesPerRun - streamed));
            streamed += static_cast<int64_t>(steps.size());
            testing::ThreadCpuTimer timer;
            timer.start();
            store.appendMetrics(live_id, steps, epochs, {});
            drain_ms.push_back(milliseconds(timer));
        });
        probe.start();
        drain_timer.start();
        QTest::qWait(3000);
        probe.stop();
        drain_timer.stop();
        QVERIFY(probe.ticks() > 100);
        while (streamed < kUpdatesPerRun) {
            live.next(steps, epochs, std::min(kStepsPerDrain, kUpdatesPerRun - streamed));
            streamed += static_cast<int64_t>(steps.size());
            store.appendMetrics(live_id, steps, epochs, {});
        }
        QCOMPARE(store.runs().size(), std::size_t(kRuns));
        for (const auto& run : store.runs()) QCOMPARE(run->steps.size(), std::size_t(kUpdatesPerRun));

        // Every run's every update reached the plots (raw + smoothed loss per update).
        QVERIFY(plots.lossPlot()->dataPointCount() >= 2 * kRuns * kUpdatesPerRun);
        QVERIFY(plots.speedPlot()->dataPointCount() >= 3 * kRuns * kUpdatesPerRun);
        QVERIFY(plots.memoryPlot()->dataPointCount() >= kRuns * kUpdatesPerRun);

        std::vector<double> sorted = drain_ms;
        std::sort(sorted.begin(), sorted.end());
        double mean_drain = 0.0;
        for (double ms : sorted) mean_drain += ms;
        mean_drain /= static_cast<double>(sorted.size());
        const double p99_drain = sorted[sorted.size() * 99 / 100];

        QString replots;
        double slowest_replot = 0.0;
        for (RunPlot* plot : plots.plots()) {
            if (!plot->isVisible()) continue;
            const double ms = full_replot_ms(*plot);
            slowest_replot = std::max(slowest_replot, ms);
            replots += QStringLiteral(" %1 %2 ms").arg(plot->objectName()).arg(ms, 0, 'f', 1);
        }

        // Hover: the read-out of all ten runs at 200 cursor positions.
        testing::ThreadCpuTimer hover;
        hover.start();
        int readouts = 0;
        for (int i = 0; i < 200; ++i) {
            const double x = static_cast<double>(kUpdatesPerRun) * (i + 0.5) / 200.0;
            for (RunPlot* plot : {static_cast<RunPlot*>(plots.lossPlot()), static_cast<RunPlot*>(plots.memoryPlot()),
                                  static_cast<RunPlot*>(plots.speedPlot())})
                readouts += plot->readoutAt(x).count(QStringLiteral("<b>"));
        }
        const double readout_ms = milliseconds(hover) / (200.0 * 3);
        QCOMPARE(readouts, 200 * 3 * kRuns);

        // Switching the x-axis redraws every run from its stored metrics.
        testing::ThreadCpuTimer switching;
        switching.start();
        plots.setXAxisKind(XAxisKind::samples_seen);
        const double view_change_ms = milliseconds(switching);
        QCOMPARE(plots.lossPlot()->xAxisKind(), XAxisKind::samples_seen);
        // Moving the smoothing slider recomputes the smoothed curves of every run.
        testing::ThreadCpuTimer smoothing;
        smoothing.start();
        plots.setSmoothing(0.9);
        const double smoothing_ms = milliseconds(smoothing);
        QCOMPARE(plots.lossPlot()->smoothing(), 0.9);

        const QString summary =
            QStringLiteral("drain mean %1 ms p99 %2 ms max %3 ms over %4 drains, last fifth / first fifth of a run "
                           "up to %10x; replot:%5; readout %6 ms; "
                           "x-axis switch %7 ms; smoothing change %8 ms; while streaming: %9")
                .arg(mean_drain, 0, 'f', 3)
                .arg(p99_drain, 0, 'f', 3)
                .arg(sorted.back(), 0, 'f', 1)
                .arg(sorted.size())
                .arg(replots)
                .arg(readout_ms, 0, 'f', 3)
                .arg(view_change_ms, 0, 'f', 0)
                .arg(smoothing_ms, 0, 'f', 0)
                .arg(probe.summary())
                .arg(largest_growth, 0, 'f', 2);
        qInfo().noquote() << summary;
        QVERIFY2(mean_drain < kMeanDrainBoundMs, qPrintable(summary));
        QVERIFY2(largest_growth < kDrainGrowthBound, qPrintable(summary));
        QVERIFY2(slowest_replot < kReplotBoundMs, qPrintable(summary));
        QVERIFY2(readout_ms < kReadoutBoundMs, qPrintable(summary));
        QVERIFY2(view_change_ms < kAxisSwitchBoundMs, qPrintable(summary));
        QVERIFY2(smoothing_ms < kSmoothingBoundMs, qPrintable(summary));
        QVERIFY2(probe.largestCpuGapMs() < kTickGapBoundMs, qPrintable(summary));
        QVERIFY2(probe.largestGapMs() < kFreezeBoundMs, qPrintable(summary));
    }
};

QTEST_MAIN(PlotScaleTest)
#include "test_plot_scale.moc"
