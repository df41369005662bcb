#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "trainbench/dataset.hpp"
#include "trainbench/metrics.hpp"
#include "trainbench/run_config.hpp"
#include "trainbench/run_plan.hpp"
#include "trainbench/weights.hpp"

namespace trainbench {

// Who watches a run. Every callback is optional and is called on the training thread; keep
// them cheap (the Qt adapter only appends to a buffer that the GUI thread drains).
struct Observer {
    std::function<void(const RunPlan&)> on_start;
    std::function<void(const StepMetrics&)> on_update;
    std::function<void(const EpochMetrics&)> on_epoch_end;
    std::function<void(const std::string&)> on_note;  // checkpoint written, cache released...
    // Language models with --sample-chars: text generated at an evaluation after `update`.
    std::function<void(int64_t update, const std::string& text)> on_sample;
};

enum class StopReason { completed, max_steps, stopped, diverged, failed };
std::string to_string(StopReason);

struct RunResult {
    StopReason reason = StopReason::completed;
    std::string message;          // why it stopped, for failures one clear line
    RunPlan plan;
    StepMetrics last;             // metrics of the last update (update == 0 if none ran)
    EpochMetrics last_epoch;      // last validation (epoch == 0 if none ran)
    double seconds = 0.0;
    ModelWeights weights;         // final weights
};

// The data-loading options a configuration implies (seed, held-out share, shuffle, rows).
DataOptions data_options_for(const RunConfig& config);

// Checks the configuration, loads the data (unless given), resolves the plan and applies
// --auto-fit. Throws Error with one clear line when the run cannot start.
RunPlan plan_run(const RunConfig& config, const Dataset& data);

// Trains one run to completion, max_steps, a stop request or a failure. Throws Error only for
// problems found before training starts (bad config, unreadable data, memory budget); a
// failure during training (divergence to NaN, ...) is returned with reason failed/diverged.
// `stop` is checked between micro-batches. `data` may be null: the trainer then loads
// config.dataset itself.
RunResult train(const RunConfig& config, const Observer& observer = {},
                const std::atomic<bool>* stop = nullptr,
                std::shared_ptr<const Dataset> data = nullptr);

// CUDA devices visible to this build, for the app's device list. When there are none,
// `cuda_unavailable_reason()` says why (built without CUDA, no driver, no GPU).
struct DeviceInfo {
    std::string id;      // "cpu", "cuda:0", ...
    std::string name;    // "CPU (2 threads)", "NVIDIA H100 80GB HBM3"
    int64_t memory_bytes = 0;
    int compute_major = 0, compute_minor = 0;
};
std::vector<DeviceInfo> available_devices();
std::string cuda_unavailable_reason();

}  // namespace trainbench
