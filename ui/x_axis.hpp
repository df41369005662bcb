#pragma once
#include <QString>
#include <cstdint>

#include "trainbench/metrics.hpp"

namespace trainbench::ui {

struct RunRecord;

// What the horizontal axis of every plot measures; all three grow monotonically within a run,
// which lets the hover read-out binary-search a run's updates. samples_seen counts training
// samples, and for a language model the tokens in them (samples x context length), the unit
// its speed and loss are measured in.
enum class XAxisKind { update, samples_seen, wall_time };

// `tokens_per_sample` is the run's (run_tokens_per_sample): 0 for models that do not read tokens.
inline double x_value(const StepMetrics& step, XAxisKind kind, int64_t tokens_per_sample) {
    switch (kind) {
        case XAxisKind::samples_seen:
            return static_cast<double>(step.samples_seen) *
                   static_cast<double>(tokens_per_sample > 0 ? tokens_per_sample : 1);
        case XAxisKind::wall_time: return step.wall_seconds;
        case XAxisKind::update: break;
    }
    return static_cast<double>(step.update);
}

// x_value for the steps of one run.
struct RunX {
    XAxisKind kind = XAxisKind::update;
    int64_t tokens_per_sample = 0;
    double operator()(const StepMetrics& step) const { return x_value(step, kind, tokens_per_sample); }
};
RunX run_x(const RunRecord& run, XAxisKind kind);

// The axis title for the runs drawn: samples_seen reads "tokens" when they are all language
// models and says which runs count what when they are mixed.
QString x_axis_label(XAxisKind kind, bool languageModels = false, bool otherModels = true);

}  // namespace trainbench::ui
