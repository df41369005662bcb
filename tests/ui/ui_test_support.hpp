#pragma once
// Shared set-up for the app's tests: isolated settings and a small, fast configuration.
#include <QCoreApplication>
#include <QElapsedTimer>
#include <QFile>
#include <QStandardPaths>
#include <QString>
#include <QTimer>
#include <QtGlobal>
#include <algorithm>
#include <ctime>

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

// Open MPI refuses to start as root (CI's containers) unless told. Call it in initTestCase,
// before any window exists: setenv while a window's dataset loader reads the environment
// (getenv, for the cache folder) on a pool thread crashed the loader (SIGSEGV in getenv, CI
// at b7f343b); glibc's setenv and getenv are not safe against each other across threads.
inline void allow_mpi_as_root() {
    qputenv("OMPI_ALLOW_RUN_AS_ROOT", "1");
    qputenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
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

// A stopwatch of the calling thread's CPU time, with QElapsedTimer's interface: what a piece of
// GUI work costs, without the moments a busy or shared machine took the core away, so bounds on
// it hold on a noisy CI machine and still catch work that grew.
class ThreadCpuTimer {
public:
    void start() { started_ = now_ns(); }
    qint64 nsecsElapsed() const { return now_ns() - started_; }
    qint64 elapsed() const { return nsecsElapsed() / 1'000'000; }
    static qint64 now_ns() {
        timespec now{};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
        return static_cast<qint64>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
    }

private:
    qint64 started_ = 0;
};

// Measures how long the GUI thread's event loop ever stalls: a 5 ms timer records, between two
// of its ticks, the wall time that passed and the CPU time the GUI thread itself spent.
// The CPU time is the GUI's own work (a replot, a table update) and does not depend on how
// busy the machine is; the wall time also counts the moments the scheduler gave the core to
// the training threads or to another process, which on a shared 2-core CI machine reached
// 164 ms while the GUI's own work stayed far below it. Tests bound the CPU-time gap tightly
// and the wall-time gap only as a freeze (the GUI waiting on the worker).
class EventLoopGapProbe {
public:
    EventLoopGapProbe() {
        ticker_.setInterval(5);
        QObject::connect(&ticker_, &QTimer::timeout, [this] {
            const qint64 now = clock_.elapsed();
            const qint64 cpu_now = ThreadCpuTimer::now_ns() / 1'000'000;
            if (ticks_++ > 0) {
                largest_gap_ = std::max(largest_gap_, now - last_tick_);
                largest_cpu_gap_ = std::max(largest_cpu_gap_, cpu_now - last_cpu_);
            }
            last_tick_ = now;
            last_cpu_ = cpu_now;
        });
    }
    void start() {
        clock_.start();
        ticker_.start();
    }
    void stop() { ticker_.stop(); }
    qint64 largestGapMs() const { return largest_gap_; }
    qint64 largestCpuGapMs() const { return largest_cpu_gap_; }
    int ticks() const { return ticks_; }
    QString summary() const {
        return QStringLiteral("largest gap %1 ms wall, %2 ms of GUI-thread CPU time, over %3 ticks")
            .arg(largest_gap_)
            .arg(largest_cpu_gap_)
            .arg(ticks_);
    }

private:
    QTimer ticker_;
    QElapsedTimer clock_;
    qint64 last_tick_ = 0, largest_gap_ = 0, last_cpu_ = 0, largest_cpu_gap_ = 0;
    int ticks_ = 0;
};

}  // namespace trainbench::ui::testing
