#pragma once
#include <QString>
#include <cstdint>

#include "trainbench/metrics.hpp"

namespace trainbench::ui {

struct RunRecord;

// Tokens in one training sample: the context length for a language model, 0 for other models.
// From the run's plan; for a run without one (not started yet, or read back from a session
// that did not keep it), from its settings.
int64_t run_tokens_per_sample(const RunRecord& run);
inline bool is_language_model(const RunRecord& run) { return run_tokens_per_sample(run) > 0; }

// A language model's tokens per second in `step` (the engine's figure, or samples/s x context
// for a step that lacks it); 0 for other models.
inline double step_tokens_per_second(const StepMetrics& step, int64_t tokens_per_sample) {
    if (tokens_per_sample <= 0) return 0.0;
    return step.tokens_per_second > 0.0 ? step.tokens_per_second
                                        : step.samples_per_second * static_cast<double>(tokens_per_sample);
}

// The measured device peak a run's MFU is relative to, as the engine describes it ("the
// engine's fp32 matrix product on 2 threads, 120.3 GFLOP/s, measured now"), or why there is
// none ("no peak: built without CUDA"); empty when the run has no plan.
QString peak_source_text(const RunRecord& run);

// "12.3%", "0.45%": an MFU (a fraction) as a percentage; empty for NaN.
QString mfu_text(double mfu);

}  // namespace trainbench::ui
