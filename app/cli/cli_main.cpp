// trainbench-cli: the headless front end of the TrainBench engine (docs/CLI.md).
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli_exit.hpp"
#include "commands.hpp"
#include "trainbench/error.hpp"

namespace {

constexpr const char* kProgram = "trainbench-cli";

void print_error(const std::string& message) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: error: %s\n", kProgram, message.c_str());
}

}  // namespace

int main(int argc, char** argv) {
    using namespace trainbench::cli;
    CLI::App app{"TrainBench: train small networks and measure speed and memory", kProgram};
    app.require_subcommand(1);
    std::vector<Command> commands = {add_train_command(app), add_compare_command(app),
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

    for (const auto& command : commands) {
        if (!command.app->parsed()) continue;
        try {
            return command.run();
        } catch (const UsageError& e) {
            print_error(e.what());
            return kExitUsageError;
        } catch (const trainbench::Error& e) {
            print_error(e.what());
            return kExitRuntimeError;
        } catch (const std::exception& e) {
            print_error(std::string("unexpected failure: ") + e.what());
            return kExitRuntimeError;
        }
    }
    return kExitUsageError;
}
