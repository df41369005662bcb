// The table of configuration fields: well formed, and every field travels through the JSON form
// and is range-checked by validate() with an Error that carries its key. (The CLI flags made
// from it are tested in tests/cli/test_cli_arguments.cpp.)
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <type_traits>
#include <variant>

#include "trainbench/config_fields.hpp"
#include "trainbench/config_json.hpp"
#include "trainbench/error.hpp"

using namespace trainbench;

namespace {

template <class Access>
bool holds(const ConfigField& field) {
    return std::holds_alternative<Access>(field.access);
}

bool access_matches_kind(const ConfigField& field) {
    switch (field.kind) {
        case FieldKind::integer: return holds<MemberAccess<int64_t>>(field) || holds<MemberAccess<int>>(field);
        case FieldKind::unsigned_integer: return holds<MemberAccess<uint64_t>>(field);
        case FieldKind::real: return holds<MemberAccess<double>>(field);
        case FieldKind::optional_real: return holds<OptionalRealAccess>(field);
        case FieldKind::boolean: return holds<MemberAccess<bool>>(field);
        case FieldKind::text: return holds<MemberAccess<std::string>>(field);
        case FieldKind::choice: return holds<ChoiceAccess>(field);
        case FieldKind::byte_size: return holds<MemberAccess<int64_t>>(field);
        case FieldKind::layer_widths: return holds<MemberAccess<std::vector<int64_t>>>(field);
    }
    return false;
}

bool is_numeric(FieldKind kind) {
    return kind == FieldKind::integer || kind == FieldKind::unsigned_integer || kind == FieldKind::real ||
           kind == FieldKind::optional_real || kind == FieldKind::byte_size || kind == FieldKind::layer_widths;
}

// The defaults of the model the field belongs to: a valid configuration where it is checked.
RunConfig defaults_for(const ConfigField& field) {
    return default_config(field.families.empty() ? ModelFamily::mlp : field.families.front());
}

// Another value than `c` has, which validate() still accepts on the family's defaults.
void set_unusual_value(const ConfigField& field, RunConfig& c) {
    std::visit(
        [&](const auto& access) {
            using Access = std::decay_t<decltype(access)>;
            if constexpr (std::is_same_v<Access, OptionalRealAccess>) {
                const double value = access.resolved(c);
                access.member.write(c) = value == 0.0 ? 0.375 : value / 2;
            } else if constexpr (std::is_same_v<Access, ChoiceAccess>) {
                const std::string current = access.read(c);
                for (const std::string& name : access.names)
                    if (name != current) return access.write(c, name);
            } else if constexpr (std::is_same_v<Access, MemberAccess<std::vector<int64_t>>>) {
                access.write(c) = {32, 3, 16};
            } else if constexpr (std::is_same_v<Access, MemberAccess<std::string>>) {
                access.write(c) = field.key == "device" ? "cuda:1" : access.read(c) + "unusual \"quoted\" value";
            } else if constexpr (std::is_same_v<Access, MemberAccess<bool>>) {
                access.write(c) = !access.read(c);
            } else if constexpr (std::is_same_v<Access, MemberAccess<uint64_t>>) {
                access.write(c) = std::numeric_limits<uint64_t>::max();  // needs all 64 bits
            } else if constexpr (std::is_same_v<Access, MemberAccess<double>>) {
                const double value = access.read(c);
                access.write(c) = value == 0.0 ? 0.375 : value / 2;
            } else {
                // Doubling keeps n_head dividing n_embd and step_size within batch_size.
                const auto value = access.read(c);
                access.write(c) = value == 0 ? 8 : value * 2;
            }
        },
        field.access);
}

// The value just outside the range, on the side that has a bound.
double just_below(double min, bool inclusive, bool integer) {
    if (!inclusive) return min;
    return integer ? min - 1 : std::nextafter(min, -std::numeric_limits<double>::infinity());
}
double just_above(double max, bool inclusive, bool integer) {
    if (!inclusive) return max;
    return integer ? max + 1 : std::nextafter(max, std::numeric_limits<double>::infinity());
}

void set_number(const ConfigField& field, RunConfig& c, double value) {
    std::visit(
        [&](const auto& access) {
            using Access = std::decay_t<decltype(access)>;
            if constexpr (std::is_same_v<Access, OptionalRealAccess>)
                access.member.write(c) = value;
            else if constexpr (std::is_same_v<Access, MemberAccess<std::vector<int64_t>>>)
                access.write(c) = {64, static_cast<int64_t>(value)};
            else if constexpr (std::is_same_v<Access, MemberAccess<int64_t>> ||
                               std::is_same_v<Access, MemberAccess<int>> ||
                               std::is_same_v<Access, MemberAccess<uint64_t>> ||
                               std::is_same_v<Access, MemberAccess<double>>)
                access.write(c) = static_cast<std::decay_t<decltype(access.read(c))>>(value);
            else
                QFAIL(("no number to set in " + field.key).c_str());
        },
        field.access);
}

// The Error validate() throws, or an empty message when it accepts the configuration.
Error validation_error(const RunConfig& c) {
    try {
        validate(c);
    } catch (const Error& e) {
        return e;
    }
    return Error("");
}

}  // namespace

class TestConfigFields : public QObject {
    Q_OBJECT

private slots:
    // The app hides a field whose condition fails; conditions name real choices of real fields.
    void conditions_name_real_values() {
        for (const ConfigField& field : config_fields()) {
            if (!field.only_when) continue;
            const ConfigField* subject = find_config_field(field.only_when->key);
            QVERIFY2(subject, field.key.c_str());
            for (const std::string& value : field.only_when->values)
                if (subject->kind == FieldKind::choice)
                    QVERIFY2(std::find(subject->choices().begin(), subject->choices().end(), value) !=
                                 subject->choices().end(),
                             (field.key + ": " + value).c_str());
        }
        RunConfig c;
        const ConfigField& momentum = *find_config_field("optimizer.momentum");
        const ConfigField& preload = *find_config_field("preload_device");
        c.optimizer.kind = OptimizerKind::adam;
        QVERIFY(!momentum.condition_holds(c));
        c.optimizer.kind = OptimizerKind::rmsprop;
        QVERIFY(momentum.condition_holds(c));
        QVERIFY(!preload.condition_holds(c));  // cpu
        c.device = "cuda:1";
        QVERIFY(preload.condition_holds(c));
        QVERIFY(find_config_field("seed")->condition_holds(c));  // no condition
    }

    void copy_and_text_of_a_field() {
        RunConfig from, to;
        from.optimizer.lr = 0.001;
        from.hidden = {7, 9};
        from.optimizer.kind = OptimizerKind::adagrad;
        for (const char* key : {"optimizer.lr", "hidden", "optimizer.kind"})
            copy_field_value(*find_config_field(key), from, to);
        QCOMPARE(to.optimizer.lr, std::optional<double>(0.001));
        QCOMPARE(to.hidden, (std::vector<int64_t>{7, 9}));
        QCOMPARE(to.optimizer.kind, OptimizerKind::adagrad);
        QCOMPARE(field_value_text(*find_config_field("optimizer.lr"), to), std::string("0.001"));
        QCOMPARE(field_value_text(*find_config_field("hidden"), to), std::string("7,9"));
        QCOMPARE(field_value_text(*find_config_field("optimizer.kind"), to), std::string("adagrad"));
        // An unset optional shows the value the run uses: Adagrad's eps default.
        QCOMPARE(field_value_text(*find_config_field("optimizer.eps"), to), std::string("1e-10"));
    }

    void keys_and_flags_are_unique() {
        std::set<std::string> keys, flags;
        for (const ConfigField& field : config_fields()) {
            QVERIFY2(keys.insert(field.key).second, ("duplicate key " + field.key).c_str());
            if (!field.flag.empty())
                QVERIFY2(flags.insert(field.flag).second, ("duplicate flag " + field.flag).c_str());
            QCOMPARE(find_config_field(field.key), &field);
        }
        QVERIFY(find_config_field("no_such_field") == nullptr);
    }

    void every_field_is_described() {
        for (const ConfigField& field : config_fields()) {
            const char* key = field.key.c_str();
            QVERIFY2(!field.label.empty() && !field.group.empty(), key);
            QVERIFY2(!field.help.empty() || field.kind == FieldKind::choice, key);  // choices list their names
            QVERIFY2(field.flag.empty() || field.flag.rfind("--", 0) == 0, key);
            QVERIFY2(access_matches_kind(field), key);
            QVERIFY2(!field.range || is_numeric(field.kind), key);
            QVERIFY2((field.kind == FieldKind::choice) == !field.choices().empty(), key);
            if (field.kind == FieldKind::boolean && !field.flag.empty()) {
                // A switch can only move a setting away from its default.
                const RunConfig defaults = defaults_for(field);
                QVERIFY2(std::get<MemberAccess<bool>>(field.access).read(defaults) != field.switch_sets, key);
            }
        }
        const ConfigField* optimizer = find_config_field("optimizer.kind");
        QVERIFY(optimizer != nullptr);
        QCOMPARE(optimizer->choices(), (std::vector<std::string>{"sgd", "adam", "adamw", "rmsprop", "adagrad"}));
        QVERIFY(find_config_field("optimizer.beta1")->flag.empty());  // JSON-only
        QVERIFY(find_config_field("n_head")->families == std::vector{ModelFamily::gpt});
        QVERIFY(find_config_field("save_weights")->train_only);
    }

    void the_json_form_follows_the_table() {
        const std::string json = config_to_json(RunConfig{});
        size_t previous = 0;
        for (const ConfigField& field : config_fields()) {
            const std::string name = field.key.substr(field.key.find('.') + 1);
            const size_t at = json.find("\"" + name + "\":", previous);
            QVERIFY2(at != std::string::npos, ("missing or out of order: " + field.key).c_str());
            previous = at;
        }
    }

    void every_field_round_trips_through_json() {
        for (const ConfigField& field : config_fields()) {
            RunConfig config = defaults_for(field);
            const std::string before = config_to_json(config);
            set_unusual_value(field, config);
            const std::string written = config_to_json(config);
            QVERIFY2(written != before, ("no unusual value for " + field.key).c_str());

            const RunConfig back = config_from_json(written);
            QVERIFY2(config_to_json(back) == written, field.key.c_str());
        }
    }

    void every_range_rejects_the_value_just_outside() {
        int checked = 0;
        for (const ConfigField& field : config_fields()) {
            if (!field.range) continue;
            const FieldRange& range = *field.range;
            const bool integer = field.kind != FieldKind::real && field.kind != FieldKind::optional_real;
            std::vector<double> outside;
            if (range.min) outside.push_back(just_below(*range.min, range.min_inclusive, integer));
            if (range.max) outside.push_back(just_above(*range.max, range.max_inclusive, integer));
            if (range.finite) outside.push_back(std::numeric_limits<double>::infinity());
            if (!integer) outside.push_back(std::numeric_limits<double>::quiet_NaN());
            QVERIFY2(!outside.empty(), field.key.c_str());

            for (double value : outside) {
                RunConfig config = defaults_for(field);
                validate(config);
                set_number(field, config, value);
                const Error error = validation_error(config);
                const std::string what = field.key + " = " + std::to_string(value) + ": " + error.what();
                QVERIFY2(error.key() == field.key, what.c_str());
                QVERIFY2(std::string(error.what()).rfind("invalid " + field.name_in_messages() + ": ", 0) == 0,
                         what.c_str());
                ++checked;
            }
        }
        QVERIFY(checked > 30);
    }

    void fields_of_the_other_model_are_not_checked() {
        RunConfig mlp;
        mlp.n_layer = 0;
        mlp.sample_temperature = 0.0;
        validate(mlp);
        RunConfig gpt = default_config(ModelFamily::gpt);
        gpt.hidden = {0};
        validate(gpt);
        gpt.n_layer = 0;
        QCOMPARE(validation_error(gpt).key(), std::string("n_layer"));
    }

    void rules_between_fields_carry_a_key() {
        struct Case {
            const char* key;
            std::function<void(RunConfig&)> break_it;
        };
        const std::vector<Case> cases = {
            {"dataset", [](RunConfig& c) { c.dataset.clear(); }},
            {"dataset", [](RunConfig& c) { c.model = ModelFamily::gpt; }},
            {"model", [](RunConfig& c) { c.dataset = "kjv"; }},
            {"n_head",
             [](RunConfig& c) {
                 c = default_config(ModelFamily::gpt);
                 c.n_head = 3;
             }},
            {"preload_device",
             [](RunConfig& c) {
                 c = default_config(ModelFamily::gpt);
                 c.preload_device = true;
             }},
            {"step_size", [](RunConfig& c) { c.step_size = c.batch_size + 1; }},
            {"optimizer.nesterov",
             [](RunConfig& c) {
                 c.optimizer.kind = OptimizerKind::sgd;
                 c.optimizer.nesterov = true;
             }},
            {"device", [](RunConfig& c) { c.device = "gpu"; }},
            {"auto_fit", [](RunConfig& c) { c.auto_fit = true; }},
            {"checkpoint_every", [](RunConfig& c) { c.checkpoint_every = 10; }},
        };
        for (const Case& test_case : cases) {
            RunConfig config;
            test_case.break_it(config);
            const Error error = validation_error(config);
            QVERIFY2(error.key() == test_case.key, (std::string(test_case.key) + ": " + error.what()).c_str());
            QVERIFY(find_config_field(error.key()) != nullptr);
        }
    }

    void an_error_without_a_field_has_no_key() {
        QCOMPARE(Error("plain").key(), std::string());
        const Error copy = Error("about a field", "epochs");
        QCOMPARE(copy.key(), std::string("epochs"));
        QCOMPARE(std::string(copy.what()), std::string("about a field"));
    }
};

QTEST_APPLESS_MAIN(TestConfigFields)
#include "test_config_fields.moc"
