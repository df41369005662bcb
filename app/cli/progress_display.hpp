#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "trainbench/metrics.hpp"
#include "trainbench/run_plan.hpp"

namespace trainbench::cli {

// What `train` shows while it runs. On a terminal: one progress line redrawn in place at most
// ~10 times a second (update/total, loss, samples/s, ETA) with epoch results printed above it.
// Otherwise (a log file, a pipe): plain lines, one per epoch and one every tenth of the run.
class ProgressDisplay {
public:
    ProgressDisplay(std::FILE* out, bool terminal, bool quiet);

    void start(const RunPlan& plan);
    void update(const StepMetrics& metrics);
    void epoch_end(const EpochMetrics& epoch);
    void note(const std::string& text);
    // A language model's generated text, indented under a heading line.
    void sample(int64_t update, const std::string& text);
    // Removes the progress line so the summary starts on a clean line.
    void finish();

private:
    void draw_bar(const StepMetrics& metrics);
    void print_line(const StepMetrics& metrics);
    void clear_bar();
    double eta_seconds(const StepMetrics& metrics) const;

    std::FILE* out_;
    bool terminal_;
    bool quiet_;
    int64_t total_updates_ = 0;
    int64_t updates_per_epoch_ = 0;
    int64_t line_every_ = 1;
    bool bar_shown_ = false;
    std::chrono::steady_clock::time_point last_draw_{};
    int64_t samples_at_last_draw_ = 0;
    double wall_at_last_draw_ = 0.0;
    double shown_rate_ = 0.0;
};

// "1:02:03", "2:03", "45s".
std::string format_duration(double seconds);

}  // namespace trainbench::cli
