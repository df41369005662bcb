#include "run_flags.hpp"

#include <cctype>
#include <memory>

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

}  // namespace

template <class Value, class Apply>
void RunFlags::add_value(CLI::App& command, const std::string& name, const std::string& help,
                         Apply apply) {
    auto value = std::make_shared<Value>();
    // Scripts append overrides (`... --max-steps 20 ... --max-steps 40`): the last one wins.
    CLI::Option* option =
        command.add_option(name, *value, help)->group(group_)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    overrides_.push_back({option, [value, apply, name](RunConfig& config) {
                              try {
                                  apply(config, *value);
                              } catch (const Error& e) {
                                  throw UsageError(name + ": " + e.what());
                              }
                          }});
}

template <class Apply>
void RunFlags::add_switch(CLI::App& command, const std::string& name, const std::string& help,
                          Apply apply) {
    CLI::Option* option = command.add_flag(name, help)->group(group_);
    overrides_.push_back({option, [apply](RunConfig& config) { apply(config); }});
}

RunFlags::RunFlags(CLI::App& command, Scope scope) {
    config_option_ = command.add_option("--config", config_path_,
                                        "JSON file with run settings (flags given override it)");

    group_ = "Data";
    add_value<std::string>(command, "--dataset",
                           "spirals|moons|blobs|sine|fashion-mnist|csv:PATH|idx:DIR (MLP); kjv|text:PATH (GPT)",
                           [](RunConfig& c, const std::string& v) { c.dataset = v; });
    add_value<int64_t>(command, "--samples", "rows generated for the synthetic sets",
                       [](RunConfig& c, int64_t v) { c.synthetic_samples = v; });
    add_value<double>(command, "--val-fraction",
                      "share of rows held out for validation where the data has no test set (0 allowed)",
                      [](RunConfig& c, double v) { c.val_fraction = v; });
    add_switch(command, "--no-shuffle", "keep the file's order (no shuffling)",
               [](RunConfig& c) { c.shuffle = false; });
    add_value<uint64_t>(command, "--seed", "seed for data, shuffling and initial weights",
                        [](RunConfig& c, uint64_t v) { c.seed = v; });

    group_ = "Model";
    model_option_ = command.add_option("--model", model_name_,
                                       "mlp|gpt (gpt also switches to its defaults: --dataset kjv, AdamW, ...)")
                        ->group(group_)
                        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    overrides_.push_back({model_option_, [this](RunConfig& c) { c.model = parsed_model_family(); }});
    add_value<std::string>(command, "--hidden", "mlp: hidden layer widths, e.g. 128,128",
                           [](RunConfig& c, const std::string& v) { c.hidden = parse_layer_widths(v); });
    add_value<std::string>(command, "--activation", "mlp: relu|gelu|tanh|sigmoid",
                           [](RunConfig& c, const std::string& v) { c.activation = parse_activation(v); });
    add_value<int64_t>(command, "--n-layer", "gpt: transformer blocks",
                       [](RunConfig& c, int64_t v) { c.n_layer = v; });
    add_value<int64_t>(command, "--n-head", "gpt: attention heads (must divide --n-embd)",
                       [](RunConfig& c, int64_t v) { c.n_head = v; });
    add_value<int64_t>(command, "--n-embd", "gpt: embedding width",
                       [](RunConfig& c, int64_t v) { c.n_embd = v; });
    add_value<int64_t>(command, "--block-size", "gpt: context length in tokens (tokens per sample)",
                       [](RunConfig& c, int64_t v) { c.block_size = v; });

    group_ = "Batching and optimization";
    add_value<int64_t>(command, "--batch-size", "samples per optimizer update (the global batch)",
                       [](RunConfig& c, int64_t v) { c.batch_size = v; });
    add_value<int64_t>(command, "--step-size", "micro-batches accumulated per update (default 2)",
                       [](RunConfig& c, int64_t v) { c.step_size = v; });

    add_value<std::string>(command, "--optimizer", "sgd|adam|adamw|rmsprop|adagrad",
                           [](RunConfig& c, const std::string& v) { c.optimizer.kind = parse_optimizer(v); });
    add_value<double>(command, "--lr", "learning rate (default: the optimizer's PyTorch default)",
                      [](RunConfig& c, double v) { c.optimizer.lr = v; });
    add_value<double>(command, "--momentum", "momentum (sgd, rmsprop)",
                      [](RunConfig& c, double v) { c.optimizer.momentum = v; });
    add_value<double>(command, "--weight-decay", "weight decay (default 0, adamw 0.01)",
                      [](RunConfig& c, double v) { c.optimizer.weight_decay = v; });
    add_value<std::string>(command, "--schedule", "constant|linear|cosine|step",
                           [](RunConfig& c, const std::string& v) { c.schedule.kind = parse_schedule(v); });
    add_value<int64_t>(command, "--warmup-steps", "linear warmup over this many updates",
                       [](RunConfig& c, int64_t v) { c.schedule.warmup_steps = v; });
    add_value<int64_t>(command, "--decay-every", "step schedule: decay every N updates",
                       [](RunConfig& c, int64_t v) { c.schedule.decay_every = v; });
    add_value<double>(command, "--decay-gamma", "step schedule: multiply the lr by this",
                      [](RunConfig& c, double v) { c.schedule.decay_gamma = v; });
    add_value<double>(command, "--clip-grad-norm", "clip gradients to this global L2 norm (0 = off)",
                      [](RunConfig& c, double v) { c.clip_grad_norm = v; });
    add_value<int64_t>(command, "--epochs", "passes over the training set",
                       [](RunConfig& c, int64_t v) { c.epochs = v; });
    add_value<int64_t>(command, "--max-steps",
                       scope == Scope::compare ? "updates per run (same for every run)"
                                               : "stop after this many updates (0 = no limit)",
                       [](RunConfig& c, int64_t v) { c.max_steps = v; });

    add_value<int64_t>(command, "--eval-every", "also validate every N updates within an epoch (0 = epoch ends only)",
                       [](RunConfig& c, int64_t v) { c.eval_every = v; });
    add_value<int64_t>(command, "--eval-samples",
                       "validation samples per evaluation, evenly spaced (0 = the whole split)",
                       [](RunConfig& c, int64_t v) { c.eval_samples = v; });

    group_ = "Device and efficiency techniques";
    add_value<std::string>(command, "--device", "cpu|cuda|cuda:N",
                           [](RunConfig& c, const std::string& v) { c.device = v; });
    add_value<std::string>(command, "--precision", "fp32|fp16|bf16 (16-bit = mixed precision)",
                           [](RunConfig& c, const std::string& v) { c.precision = parse_precision(v); });
    add_value<int>(command, "--threads", "CPU threads (0 = all cores)",
                   [](RunConfig& c, int v) { c.threads = v; });

    add_value<std::string>(command, "--memory-limit", "memory budget, e.g. 512MiB (0 = none)",
                           [](RunConfig& c, const std::string& v) { c.memory_limit_bytes = parse_byte_size(v); });
    add_switch(command, "--auto-fit", "raise step_size (same global batch) until the run fits --memory-limit",
               [](RunConfig& c) { c.auto_fit = true; });
    add_switch(command, "--gradient-checkpointing", "recompute activations in backward to save memory",
               [](RunConfig& c) { c.gradient_checkpointing = true; });
    if (scope == Scope::train)
        add_value<int64_t>(command, "--empty-cache-steps", "release the allocator cache every N updates",
                           [](RunConfig& c, int64_t v) { c.empty_cache_steps = v; });
    add_value<int64_t>(command, "--prefetch", "micro-batches prepared ahead on a loader thread (0 = inline)",
                       [](RunConfig& c, int64_t v) { c.prefetch = v; });
    add_switch(command, "--preload-device", "cuda: keep the whole training set on the device",
               [](RunConfig& c) { c.preload_device = true; });

    group_ = "Files";
    add_value<std::string>(command, "--init-weights", "safetensors file to start from",
                           [](RunConfig& c, const std::string& v) { c.init_weights = v; });
    if (scope == Scope::train) {
        add_value<std::string>(command, "--save-weights", "write the final weights (safetensors)",
                               [](RunConfig& c, const std::string& v) { c.save_weights = v; });
        add_value<std::string>(command, "--metrics-out", "write one CSV row per update",
                               [](RunConfig& c, const std::string& v) { c.metrics_out = v; });
        add_value<int64_t>(command, "--checkpoint-every", "save a checkpoint every N updates",
                           [](RunConfig& c, int64_t v) { c.checkpoint_every = v; });
        add_value<std::string>(command, "--checkpoint-dir", "folder for checkpoints",
                               [](RunConfig& c, const std::string& v) { c.checkpoint_dir = v; });
        add_value<std::string>(command, "--resume", "continue from the latest checkpoint in DIR",
                               [](RunConfig& c, const std::string& v) { c.resume_dir = v; });
    }
}

ModelFamily RunFlags::parsed_model_family() const {
    try {
        return parse_model_family(model_name_);
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
