#include "mpi_launch.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "trainbench/error.hpp"
#include "trainbench/processes.hpp"

namespace trainbench::cli {

namespace {
std::vector<std::string> command_line;
}

void remember_command_line(int argc, char** argv) { command_line.assign(argv, argv + argc); }

std::string this_program_path() {
    std::string self(4096, '\0');
    const ssize_t length = ::readlink("/proc/self/exe", self.data(), self.size() - 1);
    return length > 0 ? self.substr(0, static_cast<size_t>(length)) : command_line.at(0);
}

void relaunch_under_mpirun(int64_t processes) {
    if (const std::string why = several_processes_unavailable(processes); !why.empty()) throw Error(why, "processes");
    const std::string launcher = mpi_launcher();
    const std::string self = this_program_path();

    std::vector<std::string> arguments = {launcher, "-np", std::to_string(processes),
                                          // The engine's own threads are placed by the OS; pinning
                                          // each process to one core would serialise them.
                                          "--bind-to", "none",
                                          // More processes than cores is allowed when asked for.
                                          "--oversubscribe"};
    // Open MPI refuses root unless told; the user asked for these processes on this machine.
    if (::geteuid() == 0) arguments.emplace_back("--allow-run-as-root");
    arguments.push_back(self);
    arguments.insert(arguments.end(), command_line.begin() + 1, command_line.end());
    std::vector<char*> argv;
    for (auto& argument : arguments) argv.push_back(argument.data());
    argv.push_back(nullptr);
    std::fflush(stdout);
    std::fflush(stderr);
    ::execv(launcher.c_str(), argv.data());
    throw Error("could not start " + launcher + ": " + std::strerror(errno) + "; use --processes 1", "processes");
}

}  // namespace trainbench::cli
