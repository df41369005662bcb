#pragma once
// Shared set-up for the app's tests: isolated settings and a small, fast configuration.
#include <QCoreApplication>
#include <QElapsedTimer>
#include <QFile>
#include <QStandardPaths>
#include <QTimer>
#include <algorithm>

#include "trainbench/run_config.hpp"

namespace trainbench::ui::testing {

// Settings go to Qt's test location and start empty, so tests neither read nor change the
// user's own settings.
inline void isolate_settings() {
    QStandardPaths::setTestModeEnabled(true);
    QCoreApplication::setOrganizationName(QStringLiteral("TrainBenchTests"));
    QCoreApplication::setApplicationName(QStringLiteral("TrainBenchTests"));
    QFile::remove(QStandardPaths::writableLocation(QStandardPaths::AppConfigLocation) + QStringLiteral("/trainbench.ini"));
}

// Spirals with a small model: a few hundred updates take well under a second on 2 cores.
inline RunConfig small_config(int64_t max_steps, int64_t step_size = 2) {
    RunConfig config;
    config.dataset = "spirals";
    config.synthetic_samples = 2000;
    config.hidden = {32, 32};
    config.batch_size = 32;
    config.step_size = step_size;
    config.epochs = 1000;
    config.max_steps = max_steps;
    config.threads = 1;
    config.optimizer.lr = 0.003;
    return config;
}

// Measures how long the GUI thread's event loop ever stalls: a 5 ms timer records the largest
// gap between its ticks while started.
class EventLoopGapProbe {
public:
    EventLoopGapProbe() {
        ticker_.setInterval(5);
        QObject::connect(&ticker_, &QTimer::timeout, [this] {
            const qint64 now = clock_.elapsed();
            if (ticks_++ > 0) largest_gap_ = std::max(largest_gap_, now - last_tick_);
            last_tick_ = now;
        });
    }
    void start() {
        clock_.start();
        ticker_.start();
    }
    void stop() { ticker_.stop(); }
    qint64 largestGapMs() const { return largest_gap_; }
    int ticks() const { return ticks_; }

private:
    QTimer ticker_;
    QElapsedTimer clock_;
    qint64 last_tick_ = 0, largest_gap_ = 0;
    int ticks_ = 0;
};

}  // namespace trainbench::ui::testing
