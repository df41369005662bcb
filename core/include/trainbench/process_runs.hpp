#pragma once
// A run of several processes inside a technique comparison (`trainbench-cli compare`, the app's
// "Measure techniques..."): the comparison trains its other rows in this process, but a
// data-parallel row needs an MPI job, so it runs as a child `trainbench-cli train --config FILE
// --events-out FILE` (which starts itself under mpirun) and its progress is read back from that
// event stream (trainbench/run_events.hpp). Blocks until the child ends: for a worker thread.
#include <atomic>
#include <string>

#include "trainbench/dataset.hpp"
#include "trainbench/run_events.hpp"
#include "trainbench/run_config.hpp"
#include "trainbench/trainer.hpp"

namespace trainbench {

// Runs `config` (processes > 1) as a child `cli_program` (a trainbench-cli) and reports to `observer` as train() would: the
// plan first, then process 0's updates. A stop request is passed on as a line "stop" on the
// child's stdin (--stop-on-input: process 0 agrees it with the others at the next micro-batch);
// the child runs in a process group of its own, so a terminal's Ctrl-C reaches only the caller. Throws Error when the child cannot
// start; a child that fails gives a failed result with its last error line.
RunResult run_in_processes(const std::string& cli_program, const RunConfig& config, const Dataset& data,
                           const Observer& observer, const std::atomic<bool>* stop);

// How a child run of `processes` processes ended (the app's and compare's alike): what its event
// stream said; without an end event, stopped when a stop was sent to it, otherwise failed with
// the most telling line of its stderr `errors`: the CLI's own error, else mpirun's account of a
// process that died, else the stream's unreadable line (cut short by a killed process), else
// the last thing said, else the exit status. No weights: the child writes them to a file.
RunResult child_run_result(const RunEventReader& events, bool stop_sent, const std::string& errors,
                           int64_t processes, int exit_code);

}  // namespace trainbench
