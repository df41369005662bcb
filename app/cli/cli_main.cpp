// trainbench-cli: the headless front end of the TrainBench engine (docs/CLI.md).
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli_exit.hpp"
#include "commands.hpp"
#include "mpi_launch.hpp"
#include "trainbench/error.hpp"
#include "trainbench/processes.hpp"

namespace {

constexpr const char* kProgram = "trainbench-cli";

// Several processes fail alike before training, so only process 0 prints unless told.
void print_error(const std::string& message, bool every_process = false) {
    if (!every_process && trainbench::process_world().rank != 0) return;
    std::fflush(stdout);
    std::fprintf(stderr, "%s: error: %s\n", kProgram, message.c_str());
}

// The subcommand's exit status, with its failure printed as one line. Several processes
// (mpirun) fail alike before training, so process 0 alone prints that; a failure of one
// process during training aborts them all, as the others may be waiting for it.
int run_command(const trainbench::cli::Command& command, const trainbench::ProcessWorld& world) {
    using namespace trainbench;
    using namespace trainbench::cli;
    try {
        return command.run();
    } catch (const ProcessFailure& e) {
        print_error("process " + std::to_string(world.rank) + " of " + std::to_string(world.size) + ": " +
                        e.what(),
                    true);
        abort_process_world(kExitRuntimeError);
    } catch (const UsageError& e) {
        print_error(e.what());
        return kExitUsageError;
    } catch (const Error& e) {
        print_error(e.what());
        return kExitRuntimeError;
    } catch (const std::exception& e) {
        print_error(std::string("unexpected failure: ") + e.what(), true);
        if (world.size > 1) abort_process_world(kExitRuntimeError);
        return kExitRuntimeError;
    }
}

int run_cli(int argc, char** argv) {
    using namespace trainbench::cli;
    CLI::App app{"TrainBench: train small networks and measure speed and memory", kProgram};
    app.require_subcommand(1);
    std::vector<Command> commands = {add_train_command(app), add_plan_command(app), add_compare_command(app),
                                     add_devices_command(app)};

    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp&) {
        return app.exit(CLI::CallForHelp());
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
        // One line, pointing at the help of the subcommand the user was typing.
        std::string help = std::string(kProgram) + " --help";
        for (const auto& command : commands)
            if (argc > 1 && command.app->get_name() == argv[1])
                help = std::string(kProgram) + " " + command.app->get_name() + " --help";
        std::string message = e.what();
        for (char& c : message)
            if (c == '\n') c = ' ';
        print_error(message + " (run " + help + ")");
        return kExitUsageError;
    }

    for (const auto& command : commands)
        if (command.app->parsed()) return run_command(command, trainbench::process_world());
    return kExitUsageError;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace trainbench::cli;
    remember_command_line(argc, argv);
    try {
        trainbench::join_process_world();  // a world of one unless started by mpirun
    } catch (const trainbench::Error& e) {
        print_error(e.what());
        return kExitRuntimeError;
    }
    const int status = run_cli(argc, argv);
    trainbench::leave_process_world();
    return status;
}
