#include "trainbench/config_json.hpp"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "trainbench/error.hpp"

namespace trainbench {

using Json = nlohmann::ordered_json;

namespace {

// Optionals are written resolved so that --print-config shows the value the run will use.
Json optimizer_to_json(const OptimizerConfig& o) {
    Json j;
    j["kind"] = to_string(o.kind);
    j["lr"] = o.resolved_lr();
    j["momentum"] = o.momentum;
    j["dampening"] = o.dampening;
    j["nesterov"] = o.nesterov;
    j["weight_decay"] = o.resolved_weight_decay();
    j["beta1"] = o.beta1;
    j["beta2"] = o.beta2;
    j["eps"] = o.resolved_eps();
    j["alpha"] = o.alpha;
    j["centered"] = o.centered;
    j["lr_decay"] = o.lr_decay;
    j["initial_accumulator_value"] = o.initial_accumulator_value;
    return j;
}

Json schedule_to_json(const ScheduleConfig& s) {
    Json j;
    j["kind"] = to_string(s.kind);
    j["warmup_steps"] = s.warmup_steps;
    j["decay_every"] = s.decay_every;
    j["decay_gamma"] = s.decay_gamma;
    j["min_lr"] = s.min_lr;
    return j;
}

Json config_to_json_value(const RunConfig& c) {
    Json j;
    j["dataset"] = c.dataset;
    j["synthetic_samples"] = c.synthetic_samples;
    j["val_fraction"] = c.val_fraction;
    j["shuffle"] = c.shuffle;
    j["seed"] = c.seed;
    j["model"] = to_string(c.model);
    j["hidden"] = c.hidden;
    j["activation"] = to_string(c.activation);
    j["n_layer"] = c.n_layer;
    j["n_head"] = c.n_head;
    j["n_embd"] = c.n_embd;
    j["block_size"] = c.block_size;
    j["batch_size"] = c.batch_size;
    j["step_size"] = c.step_size;
    j["optimizer"] = optimizer_to_json(c.optimizer);
    j["schedule"] = schedule_to_json(c.schedule);
    j["clip_grad_norm"] = c.clip_grad_norm;
    j["epochs"] = c.epochs;
    j["max_steps"] = c.max_steps;
    j["eval_every"] = c.eval_every;
    j["eval_samples"] = c.eval_samples;
    j["device"] = c.device;
    j["precision"] = to_string(c.precision);
    j["threads"] = c.threads;
    j["memory_limit_bytes"] = c.memory_limit_bytes;
    j["auto_fit"] = c.auto_fit;
    j["gradient_checkpointing"] = c.gradient_checkpointing;
    j["empty_cache_steps"] = c.empty_cache_steps;
    j["prefetch"] = c.prefetch;
    j["preload_device"] = c.preload_device;
    j["init_weights"] = c.init_weights;
    j["save_weights"] = c.save_weights;
    j["metrics_out"] = c.metrics_out;
    j["checkpoint_every"] = c.checkpoint_every;
    j["checkpoint_dir"] = c.checkpoint_dir;
    j["resume_dir"] = c.resume_dir;
    return j;
}

[[noreturn]] void wrong_type(const std::string& key, const char* expected, const Json& value) {
    throw Error("config JSON key '" + key + "' must be " + expected + ", got " +
                value.type_name() + " " + value.dump());
}

// Reads one JSON value into a typed field; the key path is carried only for messages.
struct FieldReader {
    std::string key;
    const Json& value;

    void operator()(std::string& out) const {
        if (!value.is_string()) wrong_type(key, "a string", value);
        out = value.get<std::string>();
    }
    void operator()(bool& out) const {
        if (!value.is_boolean()) wrong_type(key, "true or false", value);
        out = value.get<bool>();
    }
    void operator()(double& out) const {
        if (!value.is_number()) wrong_type(key, "a number", value);
        out = value.get<double>();
    }
    void operator()(std::optional<double>& out) const {
        // null restores the optimizer's PyTorch default.
        if (value.is_null()) {
            out.reset();
            return;
        }
        if (!value.is_number()) wrong_type(key, "a number or null", value);
        out = value.get<double>();
    }
    void operator()(int64_t& out) const {
        if (value.is_number_unsigned()) {
            if (value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
                wrong_type(key, "an integer that fits in 64 bits", value);
        } else if (!value.is_number_integer()) {
            wrong_type(key, "an integer", value);
        }
        out = value.get<int64_t>();
    }
    void operator()(int& out) const {
        int64_t wide = 0;
        (*this)(wide);
        if (wide < INT32_MIN || wide > INT32_MAX)
            wrong_type(key, "an integer that fits in 32 bits", value);
        out = static_cast<int>(wide);
    }
    void operator()(uint64_t& out) const {
        // nlohmann stores non-negative integer literals as unsigned, negative ones as signed.
        if (!value.is_number_unsigned()) wrong_type(key, "an integer >= 0", value);
        out = value.get<uint64_t>();
    }
    void operator()(std::vector<int64_t>& out) const {
        if (!value.is_array()) wrong_type(key, "an array of integers", value);
        std::vector<int64_t> widths;
        for (size_t i = 0; i < value.size(); ++i) {
            int64_t width = 0;
            FieldReader{key + "[" + std::to_string(i) + "]", value[i]}(width);
            widths.push_back(width);
        }
        out = std::move(widths);
    }
    template <typename Enum>
    void parse_enum(Enum& out, Enum (*parse)(const std::string&)) const {
        std::string text;
        (*this)(text);
        try {
            out = parse(text);
        } catch (const Error& e) {
            throw Error("config JSON key '" + key + "': " + e.what());
        }
    }
    void operator()(Activation& out) const { parse_enum(out, &parse_activation); }
    void operator()(OptimizerKind& out) const { parse_enum(out, &parse_optimizer); }
    void operator()(ScheduleKind& out) const { parse_enum(out, &parse_schedule); }
    void operator()(Precision& out) const { parse_enum(out, &parse_precision); }
    void operator()(ModelFamily& out) const { parse_enum(out, &parse_model_family); }
};

[[noreturn]] void unknown_key(const std::string& key) {
    throw Error("unknown key '" + key + "' in config JSON (keys are the RunConfig field names; "
                "see --print-config)");
}

void require_object(const std::string& key, const Json& value) {
    if (!value.is_object()) wrong_type(key, "an object", value);
}

void apply_optimizer(const Json& j, OptimizerConfig& o) {
    // "optimizer": "sgd" is accepted as shorthand for {"kind": "sgd"}.
    if (j.is_string()) {
        FieldReader{"optimizer", j}(o.kind);
        return;
    }
    require_object("optimizer", j);
    for (const auto& [name, value] : j.items()) {
        const FieldReader read{"optimizer." + name, value};
        if (name == "kind") read(o.kind);
        else if (name == "lr") read(o.lr);
        else if (name == "momentum") read(o.momentum);
        else if (name == "dampening") read(o.dampening);
        else if (name == "nesterov") read(o.nesterov);
        else if (name == "weight_decay") read(o.weight_decay);
        else if (name == "beta1") read(o.beta1);
        else if (name == "beta2") read(o.beta2);
        else if (name == "eps") read(o.eps);
        else if (name == "alpha") read(o.alpha);
        else if (name == "centered") read(o.centered);
        else if (name == "lr_decay") read(o.lr_decay);
        else if (name == "initial_accumulator_value") read(o.initial_accumulator_value);
        else unknown_key("optimizer." + name);
    }
}

void apply_schedule(const Json& j, ScheduleConfig& s) {
    if (j.is_string()) {
        FieldReader{"schedule", j}(s.kind);
        return;
    }
    require_object("schedule", j);
    for (const auto& [name, value] : j.items()) {
        const FieldReader read{"schedule." + name, value};
        if (name == "kind") read(s.kind);
        else if (name == "warmup_steps") read(s.warmup_steps);
        else if (name == "decay_every") read(s.decay_every);
        else if (name == "decay_gamma") read(s.decay_gamma);
        else if (name == "min_lr") read(s.min_lr);
        else unknown_key("schedule." + name);
    }
}

void apply_memory_limit(const Json& value, int64_t& out) {
    // A budget is easier to write as "512MiB" than as a byte count.
    if (value.is_string()) {
        try {
            out = parse_byte_size(value.get<std::string>());
        } catch (const Error& e) {
            throw Error(std::string("config JSON key 'memory_limit_bytes': ") + e.what());
        }
        return;
    }
    if (!value.is_number_integer())
        wrong_type("memory_limit_bytes", "an integer or a size such as \"512MiB\"", value);
    FieldReader{"memory_limit_bytes", value}(out);
}

void apply_config(const Json& j, RunConfig& c) {
    if (!j.is_object())
        throw Error(std::string("config JSON must be an object of RunConfig fields, got ") +
                    j.type_name());
    for (const auto& [name, value] : j.items()) {
        const FieldReader read{name, value};
        if (name == "dataset") read(c.dataset);
        else if (name == "synthetic_samples") read(c.synthetic_samples);
        else if (name == "val_fraction") read(c.val_fraction);
        else if (name == "shuffle") read(c.shuffle);
        else if (name == "seed") read(c.seed);
        else if (name == "model") continue;  // applied first, see config_from_json
        else if (name == "hidden") read(c.hidden);
        else if (name == "n_layer") read(c.n_layer);
        else if (name == "n_head") read(c.n_head);
        else if (name == "n_embd") read(c.n_embd);
        else if (name == "block_size") read(c.block_size);
        else if (name == "activation") read(c.activation);
        else if (name == "batch_size") read(c.batch_size);
        else if (name == "step_size") read(c.step_size);
        else if (name == "optimizer") apply_optimizer(value, c.optimizer);
        else if (name == "schedule") apply_schedule(value, c.schedule);
        else if (name == "clip_grad_norm") read(c.clip_grad_norm);
        else if (name == "epochs") read(c.epochs);
        else if (name == "max_steps") read(c.max_steps);
        else if (name == "eval_every") read(c.eval_every);
        else if (name == "eval_samples") read(c.eval_samples);
        else if (name == "device") read(c.device);
        else if (name == "precision") read(c.precision);
        else if (name == "threads") read(c.threads);
        else if (name == "memory_limit_bytes") apply_memory_limit(value, c.memory_limit_bytes);
        else if (name == "auto_fit") read(c.auto_fit);
        else if (name == "gradient_checkpointing") read(c.gradient_checkpointing);
        else if (name == "empty_cache_steps") read(c.empty_cache_steps);
        else if (name == "prefetch") read(c.prefetch);
        else if (name == "preload_device") read(c.preload_device);
        else if (name == "init_weights") read(c.init_weights);
        else if (name == "save_weights") read(c.save_weights);
        else if (name == "metrics_out") read(c.metrics_out);
        else if (name == "checkpoint_every") read(c.checkpoint_every);
        else if (name == "checkpoint_dir") read(c.checkpoint_dir);
        else if (name == "resume_dir") read(c.resume_dir);
        else unknown_key(name);
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
    return config_to_json_value(config).dump(indent < 0 ? -1 : indent);
}

RunConfig config_from_json(const std::string& json_text, const RunConfig& base) {
    Json j;
    try {
        j = Json::parse(json_text);
    } catch (const Json::parse_error& e) {
        throw Error("malformed config JSON: " + without_exception_tag(e.what()));
    }
    // A file that names another model family starts from that family's defaults, so that
    // {"model": "gpt"} trains with the GPT's recipe, not the MLP's optimizer.
    RunConfig config = base;
    if (j.is_object() && j.contains("model")) {
        ModelFamily family = base.model;
        FieldReader{"model", j["model"]}(family);
        if (family != base.model) config = default_config(family);
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
        throw Error("config file '" + path + "': " + e.what());
    }
}

}  // namespace trainbench
