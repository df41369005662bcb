#include "trainbench/config_json.hpp"

#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <type_traits>
#include <utility>
#include <variant>

#include <nlohmann/json.hpp>

#include "trainbench/config_fields.hpp"
#include "trainbench/error.hpp"

namespace trainbench {

using Json = nlohmann::ordered_json;

namespace {

// "optimizer.lr" -> {"optimizer", "lr"}; "epochs" -> {"", "epochs"}.
std::pair<std::string, std::string> split_key(const std::string& key) {
    const auto dot = key.find('.');
    if (dot == std::string::npos) return {"", key};
    return {key.substr(0, dot), key.substr(dot + 1)};
}

// Optionals are written resolved so that --print-config shows the value the run will use.
Json field_to_json(const ConfigField& field, const RunConfig& c) {
    return std::visit(
        [&](const auto& access) -> Json {
            if constexpr (std::is_same_v<std::decay_t<decltype(access)>, OptionalRealAccess>)
                return access.resolved(c);
            else
                return access.read(c);
        },
        field.access);
}

Json config_to_json_value(const RunConfig& c) {
    Json j = Json::object();
    for (const ConfigField& field : config_fields()) {
        const auto [section, name] = split_key(field.key);
        (section.empty() ? j : j[section])[name] = field_to_json(field, c);
    }
    return j;
}

[[noreturn]] void wrong_type(const std::string& path, const char* expected, const Json& value,
                             const std::string& field_key) {
    throw Error("config JSON key '" + path + "' must be " + expected + ", got " + value.type_name() + " " +
                    value.dump(),
                field_key);
}

// Reads one JSON value into a field; `path` names the value in messages ("hidden[1]", or
// "optimizer" for the shorthand), the Error's key is always the field's.
struct FieldReader {
    const ConfigField& field;
    std::string path;
    const Json& value;

    [[noreturn]] void refuse_type(const char* expected) const { wrong_type(path, expected, value, field.key); }
    [[noreturn]] void rethrow_with_key(const Error& e) const {
        throw Error("config JSON key '" + path + "': " + e.what(), field.key);
    }

    std::string text() const {
        if (!value.is_string()) refuse_type("a string");
        return value.get<std::string>();
    }
    bool boolean() const {
        if (!value.is_boolean()) refuse_type("true or false");
        return value.get<bool>();
    }
    double real() const {
        if (!value.is_number()) refuse_type("a number");
        return value.get<double>();
    }
    std::optional<double> optional_real() const {
        if (value.is_null()) return std::nullopt;  // restores the optimizer's PyTorch default
        if (!value.is_number()) refuse_type("a number or null");
        return value.get<double>();
    }
    int64_t integer() const {
        if (value.is_number_unsigned()) {
            if (value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
                refuse_type("an integer that fits in 64 bits");
        } else if (!value.is_number_integer()) {
            refuse_type("an integer");
        }
        return value.get<int64_t>();
    }
    int integer32() const {
        const int64_t wide = integer();
        if (wide < INT32_MIN || wide > INT32_MAX) refuse_type("an integer that fits in 32 bits");
        return static_cast<int>(wide);
    }
    uint64_t unsigned_integer() const {
        // nlohmann stores non-negative integer literals as unsigned, negative ones as signed.
        if (!value.is_number_unsigned()) refuse_type("an integer >= 0");
        return value.get<uint64_t>();
    }
    std::vector<int64_t> layer_widths() const {
        if (!value.is_array()) refuse_type("an array of integers");
        std::vector<int64_t> widths;
        for (size_t i = 0; i < value.size(); ++i)
            widths.push_back(FieldReader{field, path + "[" + std::to_string(i) + "]", value[i]}.integer());
        return widths;
    }
    int64_t byte_size() const {
        // A budget is easier to write as "512MiB" than as a byte count.
        if (value.is_string()) {
            try {
                return parse_byte_size(value.get<std::string>());
            } catch (const Error& e) {
                rethrow_with_key(e);
            }
        }
        if (!value.is_number_integer()) refuse_type("an integer or a size such as \"512MiB\"");
        return integer();
    }

    void read_into(RunConfig& c) const {
        std::visit(
            [&](const auto& access) {
                using Access = std::decay_t<decltype(access)>;
                if constexpr (std::is_same_v<Access, MemberAccess<int64_t>>)
                    access.write(c) = field.kind == FieldKind::byte_size ? byte_size() : integer();
                else if constexpr (std::is_same_v<Access, MemberAccess<int>>)
                    access.write(c) = integer32();
                else if constexpr (std::is_same_v<Access, MemberAccess<uint64_t>>)
                    access.write(c) = unsigned_integer();
                else if constexpr (std::is_same_v<Access, MemberAccess<double>>)
                    access.write(c) = real();
                else if constexpr (std::is_same_v<Access, OptionalRealAccess>)
                    access.member.write(c) = optional_real();
                else if constexpr (std::is_same_v<Access, MemberAccess<bool>>)
                    access.write(c) = boolean();
                else if constexpr (std::is_same_v<Access, MemberAccess<std::string>>)
                    access.write(c) = text();
                else if constexpr (std::is_same_v<Access, MemberAccess<std::vector<int64_t>>>)
                    access.write(c) = layer_widths();
                else if constexpr (std::is_same_v<Access, ChoiceAccess>)
                    read_choice(access, c);
                else
                    static_assert(sizeof(Access) == 0, "every FieldAccess has a JSON form");
            },
            field.access);
    }

    void read_choice(const ChoiceAccess& access, RunConfig& c) const {
        const std::string name = text();
        try {
            access.write(c, name);
        } catch (const Error& e) {
            rethrow_with_key(e);
        }
    }
};

[[noreturn]] void unknown_key(const std::string& key) {
    throw Error("unknown key '" + key + "' in config JSON (keys are the RunConfig field names; "
                "see --print-config)");
}

// "optimizer" and "schedule": the objects that nest the fields keyed "optimizer.*", ...
bool is_section(const std::string& name) {
    for (const ConfigField& field : config_fields())
        if (split_key(field.key).first == name) return true;
    return false;
}

void apply_section(const std::string& section, const Json& value, RunConfig& c) {
    // "optimizer": "sgd" is accepted as shorthand for {"kind": "sgd"}.
    const ConfigField* kind = find_config_field(section + ".kind");
    if (value.is_string() && kind) {
        FieldReader{*kind, section, value}.read_into(c);
        return;
    }
    if (!value.is_object()) wrong_type(section, "an object", value, "");
    for (const auto& [name, item] : value.items()) {
        const std::string key = section + "." + name;
        const ConfigField* field = find_config_field(key);
        if (!field) unknown_key(key);
        FieldReader{*field, key, item}.read_into(c);
    }
}

void apply_config(const Json& j, RunConfig& c) {
    if (!j.is_object())
        throw Error(std::string("config JSON must be an object of RunConfig fields, got ") +
                    j.type_name());
    for (const auto& [name, value] : j.items()) {
        if (is_section(name)) {
            apply_section(name, value, c);
            continue;
        }
        // A dotted key is only valid nested in its section's object.
        const ConfigField* field = split_key(name).first.empty() ? find_config_field(name) : nullptr;
        if (!field) unknown_key(name);
        FieldReader{*field, name, value}.read_into(c);
    }
}

// nlohmann's messages start with "[json.exception.parse_error.101] "; users need only the rest.
std::string without_exception_tag(const std::string& message) {
    const auto close = message.find("] ");
    if (message.rfind("[json.exception.", 0) == 0 && close != std::string::npos)
        return message.substr(close + 2);
    return message;
}

}  // namespace

std::string config_to_json(const RunConfig& config, int indent) {
    // A path need not be UTF-8 (Linux file names are bytes) but JSON text must be: a byte that
    // is not UTF-8 is written as U+FFFD instead of throwing nlohmann's type_error, which
    // reached the user as "unexpected failure: [json.exception.type_error.316] ...".
    return config_to_json_value(config).dump(indent < 0 ? -1 : indent, ' ', false,
                                             Json::error_handler_t::replace);
}

RunConfig config_from_json(const std::string& json_text, const RunConfig& base) {
    Json j;
    try {
        j = Json::parse(json_text);
    } catch (const Json::exception& e) {
        // parse_error, and out_of_range for a number beyond double (1e999), which escaped as a
        // foreign exception before (found by fuzz/fuzz_config_json).
        throw Error("malformed config JSON: " + without_exception_tag(e.what()));
    }
    // A file that names another model family starts from that family's defaults, so that
    // {"model": "gpt"} trains with the GPT's recipe, not the MLP's optimizer.
    RunConfig config = base;
    if (j.is_object() && j.contains("model")) {
        RunConfig named = base;
        FieldReader{*find_config_field("model"), "model", j.at("model")}.read_into(named);
        if (named.model != base.model) config = default_config(named.model);
    }
    apply_config(j, config);
    return config;
}

RunConfig load_config_file(const std::string& path, const RunConfig& base) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error("cannot open config file '" + path + "'");
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) throw Error("cannot read config file '" + path + "'");
    try {
        return config_from_json(text.str(), base);
    } catch (const Error& e) {
        throw Error("config file '" + path + "': " + e.what(), e.key());
    }
}

}  // namespace trainbench
