#include "metrics_buffer.hpp"

namespace trainbench::ui {

Observer MetricsBuffer::observer() {
    Observer observer;
    observer.on_start = [this](const RunPlan& plan) {
        std::lock_guard lock(mutex_);
        pending_.plan = plan;
    };
    observer.on_update = [this](const StepMetrics& step) {
        std::lock_guard lock(mutex_);
        pending_.steps.push_back(step);
    };
    observer.on_epoch_end = [this](const EpochMetrics& epoch) {
        std::lock_guard lock(mutex_);
        pending_.epochs.push_back(epoch);
    };
    observer.on_note = [this](const std::string& note) {
        std::lock_guard lock(mutex_);
        pending_.notes.push_back(note);
    };
    observer.on_sample = [this](int64_t update, const std::string& text) {
        // The copy is made before taking the lock: the engine reuses its sample buffer.
        RawTextSample sample{update, text};
        std::lock_guard lock(mutex_);
        pending_.samples.push_back(std::move(sample));
    };
    return observer;
}

MetricsBatch MetricsBuffer::take() {
    MetricsBatch taken;
    // Reserved on the GUI thread so the training thread's appends rarely allocate.
    taken.steps.reserve(kReservedSteps);
    std::lock_guard lock(mutex_);
    std::swap(taken, pending_);
    return taken;
}

}  // namespace trainbench::ui
