#pragma once
// `trainbench-cli train --processes N` started outside mpirun: the CLI starts itself again
// under mpirun as N processes, with the same arguments, and becomes that mpirun.
#include <cstdint>
#include <string>

namespace trainbench::cli {

// main() keeps its arguments for the relaunch.
void remember_command_line(int argc, char** argv);

// This program's real path (/proc/self/exe), so a child finds it whatever PATH and cwd it was
// started with.
std::string this_program_path();

// Replaces this process by `mpirun -np processes <this program> <the same arguments>`; returns
// only by throwing Error (no MPI in this build, mpirun missing or not executable).
[[noreturn]] void relaunch_under_mpirun(int64_t processes);

}  // namespace trainbench::cli
