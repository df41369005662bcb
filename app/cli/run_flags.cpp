#include "run_flags.hpp"

#include <cctype>
#include <memory>
#include <type_traits>
#include <variant>

#include "cli_exit.hpp"
#include "trainbench/config_json.hpp"
#include "trainbench/error.hpp"

namespace trainbench::cli {

namespace {

std::vector<int64_t> parse_layer_widths(const std::string& text) {
    std::vector<int64_t> widths;
    std::string item;
    auto flush = [&] {
        size_t first = item.find_first_not_of(" \t");
        size_t last = item.find_last_not_of(" \t");
        std::string token = first == std::string::npos ? "" : item.substr(first, last - first + 1);
        bool digits = !token.empty();
        for (char c : token) digits = digits && std::isdigit(static_cast<unsigned char>(c));
        if (!digits || token.size() > 9)
            throw UsageError("--hidden: '" + text +
                             "' is not a comma-separated list of layer widths, e.g. --hidden 128,128");
        widths.push_back(std::stoll(token));
        item.clear();
    };
    if (text.find_first_not_of(" \t") == std::string::npos) return widths;  // no hidden layer
    for (char c : text) {
        if (c == ',') flush();
        else item += c;
    }
    flush();
    return widths;
}

// The family and the choices lead the help: "gpt: transformer blocks",
// "sgd|adam|adamw|rmsprop|adagrad", "fp32|fp16|bf16 (16-bit = mixed precision)".
std::string flag_help(const ConfigField& field, RunFlags::Scope scope) {
    // `compare` gives every run the same number of updates.
    if (scope == RunFlags::Scope::compare && field.key == "max_steps")
        return "updates per run (same for every run)";
    std::string help;
    for (size_t i = 0; i < field.families.size(); ++i)
        help += (i ? "/" : "") + to_string(field.families[i]) + (i + 1 == field.families.size() ? ": " : "");
    if (field.kind != FieldKind::choice) return help + field.help;
    for (size_t i = 0; i < field.choices().size(); ++i)
        help += (i > 0 ? "|" : "") + field.choices()[i];
    return field.help.empty() ? help : help + " (" + field.help + ")";
}

bool in_scope(const ConfigField& field, RunFlags::Scope scope) {
    switch (scope) {
        case RunFlags::Scope::train: return true;
        case RunFlags::Scope::compare: return !field.train_only;
        // The run's files (weights, metrics, checkpoints) change nothing in its plan.
        case RunFlags::Scope::plan: return !field.train_only || field.group != "Files";
    }
    return false;
}

}  // namespace

template <class Value, class Apply>
void RunFlags::add_value(CLI::App& command, const ConfigField& field, const std::string& help,
                         Apply apply) {
    auto value = std::make_shared<Value>();
    // Scripts append overrides (`... --max-steps 20 ... --max-steps 40`): the last one wins.
    CLI::Option* option = command.add_option(field.flag, *value, help)
                              ->group(field.group)
                              ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    overrides_.push_back({option, [value, apply, flag = field.flag](RunConfig& config) {
                              try {
                                  apply(config, *value);
                              } catch (const Error& e) {
                                  throw UsageError(flag + ": " + e.what());
                              }
                          }});
}

void RunFlags::add_switch(CLI::App& command, const ConfigField& field, const std::string& help) {
    CLI::Option* option = command.add_flag(field.flag, help)->group(field.group);
    const MemberAccess<bool> member = std::get<MemberAccess<bool>>(field.access);
    overrides_.push_back({option, [member, sets = field.switch_sets](RunConfig& c) { member.write(c) = sets; }});
}

void RunFlags::add_field_flag(CLI::App& command, const ConfigField& field, const std::string& help) {
    std::visit(
        [&](const auto& access) {
            using Access = std::decay_t<decltype(access)>;
            if constexpr (std::is_same_v<Access, MemberAccess<bool>>) {
                add_switch(command, field, help);
            } else if constexpr (std::is_same_v<Access, OptionalRealAccess>) {
                add_value<double>(command, field, help,
                                  [access](RunConfig& c, double v) { access.member.write(c) = v; });
            } else if constexpr (std::is_same_v<Access, ChoiceAccess>) {
                add_value<std::string>(command, field, help,
                                       [access](RunConfig& c, const std::string& v) { access.write(c, v); });
            } else if constexpr (std::is_same_v<Access, MemberAccess<std::vector<int64_t>>>) {
                add_value<std::string>(command, field, help, [access](RunConfig& c, const std::string& v) {
                    access.write(c) = parse_layer_widths(v);
                });
            } else if constexpr (std::is_same_v<Access, MemberAccess<int64_t>>) {
                if (field.kind == FieldKind::byte_size)
                    add_value<std::string>(command, field, help, [access](RunConfig& c, const std::string& v) {
                        access.write(c) = parse_byte_size(v);
                    });
                else
                    add_value<int64_t>(command, field, help, [access](RunConfig& c, int64_t v) { access.write(c) = v; });
            } else {
                // int, uint64_t, double and text: CLI11 parses the member's own type.
                using Value = std::decay_t<decltype(access.read(std::declval<const RunConfig&>()))>;
                add_value<Value>(command, field, help,
                                 [access](RunConfig& c, const Value& v) { access.write(c) = v; });
            }
        },
        field.access);
}

RunFlags::RunFlags(CLI::App& command, Scope scope) {
    config_option_ = command.add_option("--config", config_path_,
                                        "JSON file with run settings (flags given override it)");
    for (const ConfigField& field : config_fields()) {
        if (field.flag.empty() || !in_scope(field, scope)) continue;
        add_field_flag(command, field, flag_help(field, scope));
        if (field.key == "model") model_option_ = overrides_.back().option;
    }
}

ModelFamily RunFlags::parsed_model_family() const {
    try {
        return parse_model_family(model_option_->as<std::string>());
    } catch (const Error& e) {
        throw UsageError(std::string("--model: ") + e.what());
    }
}

RunConfig RunFlags::resolve(const RunConfig& defaults) const {
    // --model picks its family's defaults first; the file and the other flags then apply.
    RunConfig config = defaults;
    if (model_option_->count() > 0 && parsed_model_family() != defaults.model)
        config = default_config(parsed_model_family());
    if (config_option_->count() > 0) {
        try {
            config = load_config_file(config_path_, config);
        } catch (const Error& e) {
            throw UsageError(std::string("--config: ") + e.what());
        }
    }
    for (const auto& override_entry : overrides_)
        if (override_entry.option->count() > 0) override_entry.apply(config);
    return config;
}

}  // namespace trainbench::cli
