#pragma once
// Multi-process (data-parallel) runs: several processes started by MPI's launcher (mpirun)
// each train on their own share of every global batch and sum their gradients before the
// update (docs/ARCHITECTURE.md, "Several processes"). A program that may run under mpirun
// calls join_process_world() first and leave_process_world() last.
#include <cstdint>
#include <string>

#include "trainbench/error.hpp"

namespace trainbench {

// A failure on one process of several while they train (a checkpoint that cannot be written,
// an engine error): the others may be waiting for it in a collective that will never complete,
// so the program prints it and aborts the whole job (abort_process_world). Failures before
// training (a bad flag, unreadable data) happen on every process alike and are plain Errors.
class ProcessFailure : public Error {
public:
    using Error::Error;
};

struct ProcessWorld {
    int rank = 0;
    int size = 1;
};

// True when this build has MPI (TRAINBENCH_MPI).
bool mpi_built_in();

// The mpirun this build was configured with (CMake's MPIEXEC_EXECUTABLE); empty without MPI.
std::string mpi_launcher();

// Why `processes` > 1 cannot start here (no MPI in this build, mpirun missing), as one line
// that says how to fix it; empty when it can.
std::string several_processes_unavailable(int64_t processes);

// True when an MPI launcher started this process (Open MPI's OMPI_COMM_WORLD_SIZE, PMIx's
// PMIX_RANK): only then does join_process_world() initialise MPI.
bool launched_by_mpi();

// Joins the MPI job this process was launched in (MPI_Init_thread); a process not launched by
// MPI stays a world of one. Throws Error when launched by mpirun but built without MPI.
ProcessWorld join_process_world();
// The world joined above (rank 0 of 1 before or without it).
ProcessWorld process_world();
// MPI_Finalize when joined. After a failure on some ranks only, abort_process_world() instead:
// the others may be waiting in a collective that will never complete.
void leave_process_world();
[[noreturn]] void abort_process_world(int exit_code);

}  // namespace trainbench
