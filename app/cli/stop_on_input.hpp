#pragma once
// `trainbench-cli train --stop-on-input`: a line "stop" on stdin, or its end, asks the run to
// stop after the current micro-batch, as Ctrl-C does. A program that runs the CLI as a child
// (the app, for a run of several processes) stops it this way rather than with a signal:
// mpirun hands its stdin to process 0, which agrees the stop with the others at the next
// micro-batch, and the run ends normally with every event and output file written, where a
// signal makes mpirun tear the job's output down. A parent that dies closes the pipe, which
// stops the run too.
#include <atomic>
#include <thread>

namespace trainbench::cli {

// Watches stdin from a thread of its own for as long as it lives. Unless `quiet`, says on stderr
// why the run is stopping (a run started with stdin at its end stops at once).
class StopOnInput {
public:
    explicit StopOnInput(bool quiet);
    ~StopOnInput();
    StopOnInput(const StopOnInput&) = delete;
    StopOnInput& operator=(const StopOnInput&) = delete;

private:
    void watch();
    void stop_because(const char* why);
    bool quiet_;
    std::atomic<bool> done_{false};
    std::thread watcher_;
};

}  // namespace trainbench::cli
