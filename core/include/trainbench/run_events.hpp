#pragma once
// A run's progress as JSON lines (docs/METRICS.md, "Event stream"): what an Observer sees,
// written by `trainbench-cli train --events-out` (process 0 of a multi-process run) and read
// back by the app and by `compare`, which run several processes as a child program. One
// object per line, each with an "event" member: plan, update, evaluation, note, sample, end.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "trainbench/trainer.hpp"

namespace trainbench {

// How a run ended, as its "end" event says.
struct RunEnd {
    StopReason reason = StopReason::completed;
    std::string message;
    double seconds = 0.0;
    int64_t updates = 0;
};

// An Observer whose callbacks each pass one event line (no newline) to `write_line`.
Observer event_writing_observer(std::function<void(const std::string& line)> write_line);
// The "end" event of a finished run.
std::string end_event_line(const RunResult& result);

// Reads the lines of a stream, calling `observer` for each event as train() would have and
// keeping the "end" event. Throws Error naming the line for text that is not an event.
class RunEventReader {
public:
    explicit RunEventReader(Observer observer) : observer_(std::move(observer)) {}
    void read_line(std::string_view line);
    // As read_line, for the stream of a child that may have been killed mid-line: a line that is
    // not an event ends the reading instead of throwing; unreadable() says why, and later lines
    // are ignored.
    void read_line_of_child(std::string_view line);
    const std::string& unreadable() const { return unreadable_; }
    // Set once the "end" event has been read.
    const std::optional<RunEnd>& end() const { return end_; }
    // The run as train() would have returned it, from what was read so far: the plan, the last
    // update and evaluation, and the end's reason, message and seconds (no weights: the child
    // writes them to a file).
    RunResult result() const;

private:
    Observer observer_;
    std::optional<RunEnd> end_;
    std::string unreadable_;
    RunPlan plan_;
    StepMetrics last_;
    EpochMetrics last_epoch_;
};

}  // namespace trainbench
