#pragma once
#include <QColor>
#include <QString>
#include <QStringList>
#include <optional>
#include <string_view>
#include <vector>

#include "trainbench/metrics.hpp"
#include "trainbench/run_config.hpp"
#include "trainbench/run_plan.hpp"
#include "trainbench/weights.hpp"

namespace trainbench::ui {

enum class RunState { running, completed, stopped, failed };
QString to_display_string(RunState state);

// Text a language model generated at one evaluation, decoded for display.
struct TextSample {
    int64_t update = 0;  // updates done when it was generated
    QString text;
};

// The engine's sample bytes as text: UTF-8 decoded leniently (a character-level model can emit
// half of a multi-byte character; that becomes U+FFFD), CR LF as LF, and the other control
// characters but tab and newline as their visible Unicode pictures (U+2400 block).
QString decode_sample_text(std::string_view bytes);

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
    std::vector<TextSample> samples;  // language models: one per evaluation, oldest first
    // A pipeline's stages in its newest update (the steps keep none: only the last is drawn).
    std::vector<PipelineStageMetrics> last_pipeline;
    int64_t last_pipeline_update = 0;
    RunState state = RunState::running;
    QString message;        // why it stopped when it did not complete
    double seconds = 0.0;   // wall time of the whole run, set when it ends
    ModelWeights weights;   // final weights; empty for runs read back from a session

    double final_loss() const;
    double final_val_accuracy() const;  // NaN when no epoch was validated
    double final_val_loss() const;
    // Validation loss of the evaluation at `update` (the one a sample at that update follows);
    // NaN when there was none.
    double val_loss_at(int64_t update) const;
    // High-water mark of the engine's allocator (live + cached blocks), as the engine measured
    // it, including peaks inside an update that the per-update snapshot cannot see.
    int64_t peak_memory_bytes() const;
    double elapsed_seconds() const;
};

// "batch 64 = 32×2 · fp32 · adam 1e-3 · 128,128 relu · spirals" (a GPT: "GPT L2 H4 C64 T64";
// several processes: "batch 64 = 16×2×2 processes · ..."): the settings a user scans for.
QString key_settings_text(const RunConfig& config);
QString hidden_layers_text(const std::vector<int64_t>& hidden);
QString format_duration(double seconds);

}  // namespace trainbench::ui
