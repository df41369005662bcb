#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "trainbench/run_config.hpp"

namespace trainbench {

// What a field holds; decides its JSON type, its flag's syntax and the control a form uses.
enum class FieldKind {
    integer,           // int64_t (int for threads)
    unsigned_integer,  // uint64_t: the seeds
    real,              // double
    optional_real,     // std::optional<double>: unset is the optimizer's PyTorch default; JSON
                       // shows it resolved and null restores it
    boolean,           // bool; its flag is a switch that sets `switch_sets`
    text,              // std::string
    choice,            // an enum, read and written by name
    byte_size,         // int64_t bytes; JSON and the flag also take a size such as "512MiB"
    layer_widths,      // std::vector<int64_t>; the flag takes "128,128"
};

// Typed access to one RunConfig member, nested ones included (c.optimizer.lr).
template <class T>
struct MemberAccess {
    const T& (*read)(const RunConfig&);
    T& (*write)(RunConfig&);
};

struct OptionalRealAccess {
    MemberAccess<std::optional<double>> member;
    double (*resolved)(const RunConfig&);  // the value a run uses, set or not
};

// An enum member seen through its names, so one form control or JSON string serves them all.
struct ChoiceAccess {
    std::vector<std::string> names;  // every accepted name, in declaration order
    std::function<std::string(const RunConfig&)> read;
    std::function<void(RunConfig&, const std::string&)> write;  // throws Error listing `names`
};

using FieldAccess =
    std::variant<MemberAccess<int64_t>, MemberAccess<int>, MemberAccess<uint64_t>, MemberAccess<double>,
                 OptionalRealAccess, MemberAccess<bool>, MemberAccess<std::string>, ChoiceAccess,
                 MemberAccess<std::vector<int64_t>>>;

// The values validate() accepts. Bounds are doubles: every bound in use is a small integer or
// a fraction, exact either way. NaN is outside every range.
struct FieldRange {
    std::optional<double> min{};
    bool min_inclusive = true;
    std::optional<double> max{};
    bool max_inclusive = true;
    bool finite = false;  // reals: infinity is out of range even without a max
    std::string hint{};   // what a boundary value means, e.g. "0 means no limit"
};

// A field that only matters for some values of a choice (momentum: sgd and rmsprop); the
// app hides it otherwise. The values are names as the choice reads them.
struct FieldCondition {
    std::string key;
    std::vector<std::string> values;
};

// One RunConfig setting as every front end sees it. Defaults are not here: they come from
// default_config(family) through `access`.
struct ConfigField {
    // Members are initialised so that the table can name only the ones that matter.
    std::string key{};    // JSON key; "optimizer.lr" is "lr" inside the "optimizer" object
    std::string flag{};   // CLI flag ("--lr"); empty for JSON-only fields
    std::string label{};  // a form's label
    std::string group{};  // CLI help section and form group
    std::string help{};   // what it does; the CLI's help adds the family and the choice names
    FieldKind kind = FieldKind::text;
    std::optional<FieldRange> range{};    // none: every value of the type runs
    std::vector<ModelFamily> families{};  // the models it applies to; empty: every model
    bool train_only = false;            // a per-run output or setting `compare` does not take
    bool switch_sets = true;            // boolean: the value its flag sets (--no-shuffle: false)
    std::string details{};              // a form's tooltip: what it does to speed and memory
    std::string zero_label{};           // a form's text for 0 where 0 is special ("never")
    std::optional<FieldCondition> only_when{};
    bool in_app = true;                 // false: per-run files the app manages itself
    FieldAccess access{};

    // Messages name a field by its flag, or by its key when it has none.
    const std::string& name_in_messages() const { return flag.empty() ? key : flag; }
    bool applies_to(ModelFamily model) const {
        return families.empty() || std::find(families.begin(), families.end(), model) != families.end();
    }
    // Whether only_when holds for `config` (always true without a condition).
    bool condition_holds(const RunConfig& config) const;
    // choice: the accepted names; empty for other kinds.
    const std::vector<std::string>& choices() const;
};

// Every RunConfig field once, in the order of the JSON form and of the CLI's help.
std::span<const ConfigField> config_fields();
// nullptr when no field has this key.
const ConfigField* find_config_field(std::string_view key);
// Copies this field's value from one configuration to another.
void copy_field_value(const ConfigField& field, const RunConfig& from, RunConfig& to);
// The field's value as text: numbers as the JSON writes them, choices by name, widths "128,128".
std::string field_value_text(const ConfigField& field, const RunConfig& config);
// The arguments of `trainbench-cli train` that give this configuration: --model, then every
// field with a flag whose value differs from the family's default. Fields without a flag
// (optimizer.beta1, ...) and switches set against their flag are left out; a --config file
// carries those.
std::vector<std::string> cli_arguments_for(const RunConfig& config);

}  // namespace trainbench
