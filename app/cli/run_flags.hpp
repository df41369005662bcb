#pragma once
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "trainbench/config_fields.hpp"
#include "trainbench/run_config.hpp"

namespace trainbench::cli {

// The flags that describe a run, shared by `train` and `compare`, made from config_fields(). A
// flag given on the command line overrides the same setting from --config; a flag not given
// leaves it alone, so the resolved config is: defaults (of --model's family), then the JSON
// file's keys, then the flags the user passed.
class RunFlags {
public:
    enum class Scope {
        train,    // every flag, file outputs and checkpoints included
        compare,  // no per-run outputs; --empty-cache-steps belongs to the comparison itself
        plan,     // every flag that shapes the run's memory; no output files, checkpoints or resume
    };
    RunFlags(CLI::App& command, Scope scope);

    // Throws UsageError naming the flag or the config file when something does not parse.
    RunConfig resolve(const RunConfig& defaults) const;

private:
    struct Override {
        CLI::Option* option;
        std::function<void(RunConfig&)> apply;
    };

    // One flag per ConfigField that has one; its syntax follows the field's kind.
    void add_field_flag(CLI::App& command, const ConfigField& field, const std::string& help);
    template <class Value, class Apply>
    void add_value(CLI::App& command, const ConfigField& field, const std::string& help, Apply apply);
    void add_switch(CLI::App& command, const ConfigField& field, const std::string& help);

    ModelFamily parsed_model_family() const;

    std::string config_path_;
    CLI::Option* config_option_ = nullptr;
    CLI::Option* model_option_ = nullptr;
    std::vector<Override> overrides_;
};

}  // namespace trainbench::cli
