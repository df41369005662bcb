#pragma once
#include <functional>
#include <memory>

#include <CLI/CLI.hpp>

namespace trainbench::cli {

// Each subcommand registers its flags on `app` and returns the action to run when it was
// chosen; the action returns the process exit status (cli_exit.hpp) and throws UsageError or
// trainbench::Error for the caller to print as one line.
struct Command {
    CLI::App* app = nullptr;
    std::function<int()> run;
};

Command add_train_command(CLI::App& parent);
Command add_compare_command(CLI::App& parent);
Command add_devices_command(CLI::App& parent);
Command add_plan_command(CLI::App& parent);

}  // namespace trainbench::cli
