#pragma once
#include <atomic>
#include <string>

namespace trainbench::cli {

// Ctrl-C (SIGINT) or SIGTERM asks the run to stop: the trainer sees the flag between
// micro-batches, and the CLI still writes what was measured. A second signal aborts at once,
// removing the temporary files registered below so nothing half-written stays behind.
// `quiet`: say nothing (the processes of a multi-process run other than 0, which mpirun
// signals too).
void install_interrupt_handlers(bool quiet = false);
const std::atomic<bool>& stop_requested();
// The same request from the program itself (a "stop" line on stdin, stop_on_input.hpp); a
// signal after it still aborts.
void request_stop();
int received_signal();  // 0 when none

// Temporary files a forced abort must delete (async-signal-safe bookkeeping, a few slots).
int register_temporary_file(const std::string& path);
void unregister_temporary_file(int slot);

}  // namespace trainbench::cli
