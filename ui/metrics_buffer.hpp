#pragma once
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "trainbench/trainer.hpp"

namespace trainbench::ui {

// Text a language model generated, as the engine's bytes (decoded on the GUI thread).
struct RawTextSample {
    int64_t update = 0;
    std::string text;
};

struct MetricsBatch {
    std::optional<RunPlan> plan;
    std::vector<StepMetrics> steps;
    std::vector<EpochMetrics> epochs;
    std::vector<std::string> notes;
    std::vector<RawTextSample> samples;
    bool empty() const {
        return !plan && steps.empty() && epochs.empty() && notes.empty() && samples.empty();
    }
};

// The hand-over point between the training thread and the GUI thread: the engine's observer
// appends under a short lock, and the GUI's timer takes everything pending at its own pace, so
// the plot update rate never depends on the step rate.
class MetricsBuffer {
public:
    Observer observer();
    MetricsBatch take();

private:
    static constexpr std::size_t kReservedSteps = 1024;
    std::mutex mutex_;
    MetricsBatch pending_;
};

}  // namespace trainbench::ui
