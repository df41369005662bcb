#pragma once
#include <QColor>
#include <QString>
#include <QStringList>
#include <optional>
#include <vector>

#include "trainbench/metrics.hpp"
#include "trainbench/run_config.hpp"
#include "trainbench/run_plan.hpp"
#include "trainbench/weights.hpp"

namespace trainbench::ui {

enum class RunState { running, completed, stopped, failed };
QString to_display_string(RunState state);

// Everything the app keeps about one run: its settings, every metric it reported and how it
// ended. Lives on the GUI thread; the worker only ever writes to a MetricsBuffer.
struct RunRecord {
    int id = 0;
    QString name;
    QColor color;
    bool visible = true;
    RunConfig config;
    std::optional<RunPlan> plan;
    std::vector<StepMetrics> steps;
    std::vector<EpochMetrics> epochs;
    QStringList notes;
    RunState state = RunState::running;
    QString message;        // why it stopped when it did not complete
    double seconds = 0.0;   // wall time of the whole run, set when it ends
    ModelWeights weights;   // final weights; empty for runs read back from a session

    double final_loss() const;
    double final_val_accuracy() const;  // NaN when no epoch was validated
    double final_val_loss() const;
    // High-water mark of the engine's allocator (live + cached blocks), as the engine measured
    // it, including peaks inside an update that the per-update snapshot cannot see.
    int64_t peak_memory_bytes() const;
    double elapsed_seconds() const;
};

// "batch 64 = 32×2 · fp32 · adam 1e-3 · 128,128 relu · spirals": the settings a user scans for.
QString key_settings_text(const RunConfig& config);
QString hidden_layers_text(const std::vector<int64_t>& hidden);
QString format_duration(double seconds);

}  // namespace trainbench::ui
