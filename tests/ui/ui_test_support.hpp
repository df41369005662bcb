#pragma once
// Shared set-up for the app's tests: isolated settings and a small, fast configuration.
#include <QCoreApplication>
#include <QFile>
#include <QStandardPaths>

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

}  // namespace trainbench::ui::testing
