#pragma once
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "trainbench/run_config.hpp"

namespace trainbench::cli {

// The flags that describe a run, shared by `train` and `compare`. A flag given on the command
// line overrides the same setting from --config; a flag not given leaves it alone, so the
// resolved config is: defaults, then the JSON file's keys, then the flags the user passed.
class RunFlags {
public:
    enum class Scope {
        train,    // every flag, file outputs and checkpoints included
        compare,  // no per-run outputs; --empty-cache-steps belongs to the comparison itself
    };
    RunFlags(CLI::App& command, Scope scope);

    // Throws UsageError naming the flag or the config file when something does not parse.
    RunConfig resolve(const RunConfig& defaults) const;

private:
    struct Override {
        CLI::Option* option;
        std::function<void(RunConfig&)> apply;
    };

    template <class Value, class Apply>
    void add_value(CLI::App& command, const std::string& name, const std::string& help,
                   Apply apply);
    template <class Apply>
    void add_switch(CLI::App& command, const std::string& name, const std::string& help,
                    Apply apply);

    ModelFamily parsed_model_family() const;

    std::string group_ = "Options";  // help section of the flags being added
    std::string config_path_;
    CLI::Option* config_option_ = nullptr;
    std::string model_name_;
    CLI::Option* model_option_ = nullptr;
    std::vector<Override> overrides_;
};

}  // namespace trainbench::cli
