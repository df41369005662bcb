#include "trainbench/config_fields.hpp"

#include <algorithm>
#include <limits>
#include <type_traits>

namespace trainbench {

namespace {

// `of` is a generic lambda returning a reference to a member, e.g.
// [](auto& c) -> auto& { return c.optimizer.lr; }; instantiating it for a const and a mutable
// RunConfig gives both accessors from one expression of the member's path.
template <class Of>
auto member_access(Of of) {
    using T = std::remove_reference_t<decltype(of(std::declval<RunConfig&>()))>;
    return MemberAccess<T>{static_cast<const T& (*)(const RunConfig&)>(of),
                           static_cast<T& (*)(RunConfig&)>(of)};
}

template <class Of, class Enum>
ChoiceAccess choice_access(Of of, Enum (*parse)(const std::string&)) {
    const MemberAccess<Enum> member = member_access(of);
    return {names_of<Enum>(),
            [member](const RunConfig& c) { return to_string(member.read(c)); },
            [member, parse](RunConfig& c, const std::string& name) { member.write(c) = parse(name); }};
}

#define RUN_CONFIG_MEMBER(path) member_access([](auto& c) -> auto& { return c.path; })
#define RUN_CONFIG_CHOICE(path, parse) choice_access([](auto& c) -> auto& { return c.path; }, parse)

FieldRange at_least(double min, std::string hint = {}) {
    return {.min = min, .hint = std::move(hint)};
}
FieldRange finite_at_least(double min) { return {.min = min, .finite = true}; }
FieldRange finite_above(double min) { return {.min = min, .min_inclusive = false, .finite = true}; }
// [min, max] or [min, max): the share, momentum and smoothing coefficients.
FieldRange between(double min, double max, bool max_inclusive) {
    return {.min = min, .max = max, .max_inclusive = max_inclusive};
}

const char* const kData = "Data";
const char* const kModel = "Model";
const char* const kOptimization = "Batching and optimization";
const char* const kDevice = "Device and efficiency techniques";
const char* const kFiles = "Files";

std::vector<ConfigField> make_fields() {
    using K = FieldKind;
    const ModelFamily mlp = ModelFamily::mlp;
    const ModelFamily gpt = ModelFamily::gpt;
    // The help texts are the CLI's (docs/CLI.md repeats them); see RunFlags for how the family
    // and the choice names are added in front.
    return {
        // Data
        {.key = "dataset", .flag = "--dataset", .label = "Dataset", .group = kData,
         .help = "spirals|moons|blobs|sine|fashion-mnist|csv:PATH|idx:DIR (MLP); kjv|text:PATH (GPT)",
         .kind = K::text, .access = RUN_CONFIG_MEMBER(dataset)},
        {.key = "synthetic_samples", .flag = "--samples", .label = "Samples", .group = kData,
         .help = "rows generated for the synthetic sets", .kind = K::integer, .range = at_least(1),
         .access = RUN_CONFIG_MEMBER(synthetic_samples)},
        {.key = "val_fraction", .flag = "--val-fraction", .label = "Validation share", .group = kData,
         .help = "share of rows held out for validation where the data has no test set (0 allowed)",
         .kind = K::real, .range = between(0.0, 1.0, false), .access = RUN_CONFIG_MEMBER(val_fraction)},
        {.key = "shuffle", .flag = "--no-shuffle", .label = "Shuffle", .group = kData,
         .help = "keep the file's order (no shuffling)", .kind = K::boolean, .switch_sets = false,
         .access = RUN_CONFIG_MEMBER(shuffle)},
        {.key = "seed", .flag = "--seed", .label = "Seed", .group = kData,
         .help = "seed for data, shuffling and initial weights", .kind = K::unsigned_integer,
         .access = RUN_CONFIG_MEMBER(seed)},

        // Model
        {.key = "model", .flag = "--model", .label = "Model", .group = kModel,
         .help = "gpt also switches to its defaults: --dataset kjv, AdamW, ...", .kind = K::choice,
         .access = RUN_CONFIG_CHOICE(model, &parse_model_family)},
        {.key = "hidden", .flag = "--hidden", .label = "Hidden layers", .group = kModel,
         .help = "hidden layer widths, e.g. 128,128", .kind = K::layer_widths,
         .range = at_least(1, "e.g. --hidden 128,128"), .family = mlp, .access = RUN_CONFIG_MEMBER(hidden)},
        {.key = "activation", .flag = "--activation", .label = "Activation", .group = kModel, .kind = K::choice,
         .family = mlp, .access = RUN_CONFIG_CHOICE(activation, &parse_activation)},
        {.key = "n_layer", .flag = "--n-layer", .label = "Layers", .group = kModel, .help = "transformer blocks",
         .kind = K::integer, .range = at_least(1), .family = gpt, .access = RUN_CONFIG_MEMBER(n_layer)},
        {.key = "n_head", .flag = "--n-head", .label = "Heads", .group = kModel,
         .help = "attention heads (must divide --n-embd)", .kind = K::integer, .range = at_least(1),
         .family = gpt, .access = RUN_CONFIG_MEMBER(n_head)},
        {.key = "n_embd", .flag = "--n-embd", .label = "Embedding width", .group = kModel,
         .help = "embedding width", .kind = K::integer, .range = at_least(1), .family = gpt,
         .access = RUN_CONFIG_MEMBER(n_embd)},
        {.key = "block_size", .flag = "--block-size", .label = "Context length", .group = kModel,
         .help = "context length in tokens (tokens per sample)", .kind = K::integer, .range = at_least(1),
         .family = gpt, .access = RUN_CONFIG_MEMBER(block_size)},

        // Batching and optimization
        {.key = "batch_size", .flag = "--batch-size", .label = "Batch size", .group = kOptimization,
         .help = "samples per optimizer update (the global batch)", .kind = K::integer, .range = at_least(1),
         .access = RUN_CONFIG_MEMBER(batch_size)},
        {.key = "step_size", .flag = "--step-size", .label = "step_size", .group = kOptimization,
         .help = "micro-batches accumulated per update (default 2)", .kind = K::integer,
         .range = at_least(1, "it is the number of micro-batches accumulated per update"),
         .access = RUN_CONFIG_MEMBER(step_size)},

        {.key = "optimizer.kind", .flag = "--optimizer", .label = "Optimizer", .group = kOptimization,
         .kind = K::choice, .access = RUN_CONFIG_CHOICE(optimizer.kind, &parse_optimizer)},
        {.key = "optimizer.lr", .flag = "--lr", .label = "Learning rate", .group = kOptimization,
         .help = "learning rate (default: the optimizer's PyTorch default)", .kind = K::optional_real,
         .range = finite_above(0.0),
         .access = OptionalRealAccess{RUN_CONFIG_MEMBER(optimizer.lr),
                                      [](const RunConfig& c) { return c.optimizer.resolved_lr(); }}},
        {.key = "optimizer.momentum", .flag = "--momentum", .label = "Momentum", .group = kOptimization,
         .help = "momentum (sgd, rmsprop)", .kind = K::real, .range = between(0.0, 1.0, false),
         .access = RUN_CONFIG_MEMBER(optimizer.momentum)},
        {.key = "optimizer.dampening", .label = "Dampening", .group = kOptimization,
         .help = "dampening of the momentum (sgd)", .kind = K::real, .range = between(0.0, 1.0, true),
         .access = RUN_CONFIG_MEMBER(optimizer.dampening)},
        {.key = "optimizer.nesterov", .label = "Nesterov", .group = kOptimization,
         .help = "Nesterov momentum (sgd; needs momentum > 0 and dampening 0)", .kind = K::boolean,
         .access = RUN_CONFIG_MEMBER(optimizer.nesterov)},
        {.key = "optimizer.weight_decay", .flag = "--weight-decay", .label = "Weight decay", .group = kOptimization,
         .help = "weight decay (default 0, adamw 0.01)", .kind = K::optional_real, .range = finite_at_least(0.0),
         .access = OptionalRealAccess{RUN_CONFIG_MEMBER(optimizer.weight_decay),
                                      [](const RunConfig& c) { return c.optimizer.resolved_weight_decay(); }}},
        {.key = "optimizer.beta1", .label = "Beta 1", .group = kOptimization,
         .help = "decay of the gradient's running average (adam, adamw)", .kind = K::real,
         .range = between(0.0, 1.0, false), .access = RUN_CONFIG_MEMBER(optimizer.beta1)},
        {.key = "optimizer.beta2", .label = "Beta 2", .group = kOptimization,
         .help = "decay of the squared gradient's running average (adam, adamw)", .kind = K::real,
         .range = between(0.0, 1.0, false), .access = RUN_CONFIG_MEMBER(optimizer.beta2)},
        {.key = "optimizer.eps", .label = "Epsilon", .group = kOptimization,
         .help = "added to the denominator for numerical stability (default 1e-8, adagrad 1e-10)",
         .kind = K::optional_real, .range = finite_at_least(0.0),
         .access = OptionalRealAccess{RUN_CONFIG_MEMBER(optimizer.eps),
                                      [](const RunConfig& c) { return c.optimizer.resolved_eps(); }}},
        {.key = "optimizer.alpha", .label = "Alpha", .group = kOptimization,
         .help = "smoothing of the squared gradient's running average (rmsprop)", .kind = K::real,
         .range = between(0.0, 1.0, true), .access = RUN_CONFIG_MEMBER(optimizer.alpha)},
        {.key = "optimizer.centered", .label = "Centered", .group = kOptimization,
         .help = "normalise by the gradient's estimated variance (rmsprop)", .kind = K::boolean,
         .access = RUN_CONFIG_MEMBER(optimizer.centered)},
        {.key = "optimizer.lr_decay", .label = "LR decay", .group = kOptimization,
         .help = "learning rate decay per update (adagrad)", .kind = K::real, .range = finite_at_least(0.0),
         .access = RUN_CONFIG_MEMBER(optimizer.lr_decay)},
        {.key = "optimizer.initial_accumulator_value", .label = "Initial accumulator", .group = kOptimization,
         .help = "starting value of the sum of squared gradients (adagrad)", .kind = K::real,
         .range = finite_at_least(0.0), .access = RUN_CONFIG_MEMBER(optimizer.initial_accumulator_value)},

        {.key = "schedule.kind", .flag = "--schedule", .label = "Schedule", .group = kOptimization,
         .kind = K::choice, .access = RUN_CONFIG_CHOICE(schedule.kind, &parse_schedule)},
        {.key = "schedule.warmup_steps", .flag = "--warmup-steps", .label = "Warmup updates", .group = kOptimization,
         .help = "linear warmup over this many updates", .kind = K::integer, .range = at_least(0),
         .access = RUN_CONFIG_MEMBER(schedule.warmup_steps)},
        {.key = "schedule.decay_every", .flag = "--decay-every", .label = "Decay every", .group = kOptimization,
         .help = "step schedule: decay every N updates", .kind = K::integer, .range = at_least(1),
         .access = RUN_CONFIG_MEMBER(schedule.decay_every)},
        {.key = "schedule.decay_gamma", .flag = "--decay-gamma", .label = "Decay factor", .group = kOptimization,
         .help = "step schedule: multiply the lr by this", .kind = K::real, .range = finite_above(0.0),
         .access = RUN_CONFIG_MEMBER(schedule.decay_gamma)},
        {.key = "schedule.min_lr", .label = "Final learning rate", .group = kOptimization,
         .help = "cosine and linear schedules end at this learning rate", .kind = K::real,
         .range = finite_at_least(0.0), .access = RUN_CONFIG_MEMBER(schedule.min_lr)},

        {.key = "clip_grad_norm", .flag = "--clip-grad-norm", .label = "Clip grad norm", .group = kOptimization,
         .help = "clip gradients to this global L2 norm (0 = off)", .kind = K::real,
         .range = at_least(0.0, "0 turns clipping off"), .access = RUN_CONFIG_MEMBER(clip_grad_norm)},
        {.key = "epochs", .flag = "--epochs", .label = "Epochs", .group = kOptimization,
         .help = "passes over the training set", .kind = K::integer, .range = at_least(1),
         .access = RUN_CONFIG_MEMBER(epochs)},
        {.key = "max_steps", .flag = "--max-steps", .label = "Max updates", .group = kOptimization,
         .help = "stop after this many updates (0 = no limit)", .kind = K::integer,
         .range = at_least(0, "0 means no limit"), .access = RUN_CONFIG_MEMBER(max_steps)},
        {.key = "eval_every", .flag = "--eval-every", .label = "Evaluate every", .group = kOptimization,
         .help = "also validate every N updates within an epoch (0 = epoch ends only)", .kind = K::integer,
         .range = at_least(0, "0 evaluates at the end of each epoch only"), .access = RUN_CONFIG_MEMBER(eval_every)},
        {.key = "eval_samples", .flag = "--eval-samples", .label = "Evaluation samples", .group = kOptimization,
         .help = "validation samples per evaluation, evenly spaced (0 = the whole split)", .kind = K::integer,
         .range = at_least(0, "0 evaluates the whole validation split"), .access = RUN_CONFIG_MEMBER(eval_samples)},
        {.key = "sample_chars", .flag = "--sample-chars", .label = "Sample length", .group = kOptimization,
         .help = "characters of text generated at each evaluation (0 = none)", .kind = K::integer,
         .range = at_least(0, "0 generates no text"), .family = gpt, .access = RUN_CONFIG_MEMBER(sample_chars)},
        {.key = "sample_temperature", .flag = "--sample-temperature", .label = "Sample temperature",
         .group = kOptimization, .help = "sampling temperature (lower = more likely characters)", .kind = K::real,
         .range = finite_above(0.0), .family = gpt, .access = RUN_CONFIG_MEMBER(sample_temperature)},
        {.key = "sample_seed", .flag = "--sample-seed", .label = "Sample seed", .group = kOptimization,
         .help = "seed of the sampling (the same at every evaluation)", .kind = K::unsigned_integer,
         .family = gpt, .access = RUN_CONFIG_MEMBER(sample_seed)},

        // Device and efficiency techniques
        {.key = "device", .flag = "--device", .label = "Device", .group = kDevice, .help = "cpu|cuda|cuda:N",
         .kind = K::text, .access = RUN_CONFIG_MEMBER(device)},
        {.key = "precision", .flag = "--precision", .label = "Precision", .group = kDevice,
         .help = "16-bit = mixed precision", .kind = K::choice,
         .access = RUN_CONFIG_CHOICE(precision, &parse_precision)},
        {.key = "threads", .flag = "--threads", .label = "CPU threads", .group = kDevice,
         .help = "CPU threads (0 = all cores)", .kind = K::integer, .range = at_least(0, "0 uses all cores"),
         .access = RUN_CONFIG_MEMBER(threads)},
        {.key = "memory_limit_bytes", .flag = "--memory-limit", .label = "Memory budget", .group = kDevice,
         .help = "memory budget, e.g. 512MiB (0 = none)", .kind = K::byte_size,
         .range = at_least(0, "0 means no budget"), .access = RUN_CONFIG_MEMBER(memory_limit_bytes)},
        {.key = "auto_fit", .flag = "--auto-fit", .label = "Auto-fit", .group = kDevice,
         .help = "raise step_size (same global batch) until the run fits --memory-limit", .kind = K::boolean,
         .access = RUN_CONFIG_MEMBER(auto_fit)},
        {.key = "gradient_checkpointing", .flag = "--gradient-checkpointing", .label = "Grad checkpointing",
         .group = kDevice, .help = "recompute activations in backward to save memory", .kind = K::boolean,
         .access = RUN_CONFIG_MEMBER(gradient_checkpointing)},
        // `compare` has its own --empty-cache-steps: the N of its "empty cache" run.
        {.key = "empty_cache_steps", .flag = "--empty-cache-steps", .label = "Empty cache every", .group = kDevice,
         .help = "release the allocator cache every N updates", .kind = K::integer,
         .range = at_least(0, "0 never releases the cache"), .train_only = true,
         .access = RUN_CONFIG_MEMBER(empty_cache_steps)},
        {.key = "prefetch", .flag = "--prefetch", .label = "Prefetch", .group = kDevice,
         .help = "micro-batches prepared ahead on a loader thread (0 = inline)", .kind = K::integer,
         .range = at_least(0, "0 loads batches inline"), .access = RUN_CONFIG_MEMBER(prefetch)},
        {.key = "preload_device", .flag = "--preload-device", .label = "Preload to device", .group = kDevice,
         .help = "cuda: keep the whole training set on the device", .kind = K::boolean,
         .access = RUN_CONFIG_MEMBER(preload_device)},

        // Files; per-run outputs are not flags of `compare`, which runs many.
        {.key = "init_weights", .flag = "--init-weights", .label = "Initial weights", .group = kFiles,
         .help = "safetensors file to start from", .kind = K::text, .access = RUN_CONFIG_MEMBER(init_weights)},
        {.key = "save_weights", .flag = "--save-weights", .label = "Save weights", .group = kFiles,
         .help = "write the final weights (safetensors)", .kind = K::text, .train_only = true,
         .access = RUN_CONFIG_MEMBER(save_weights)},
        {.key = "metrics_out", .flag = "--metrics-out", .label = "Metrics CSV", .group = kFiles,
         .help = "write one CSV row per update", .kind = K::text, .train_only = true,
         .access = RUN_CONFIG_MEMBER(metrics_out)},
        {.key = "checkpoint_every", .flag = "--checkpoint-every", .label = "Checkpoints", .group = kFiles,
         .help = "save a checkpoint every N updates", .kind = K::integer,
         .range = at_least(0, "0 writes no checkpoints"), .train_only = true,
         .access = RUN_CONFIG_MEMBER(checkpoint_every)},
        {.key = "checkpoint_dir", .flag = "--checkpoint-dir", .label = "Checkpoint folder", .group = kFiles,
         .help = "folder for checkpoints", .kind = K::text, .train_only = true,
         .access = RUN_CONFIG_MEMBER(checkpoint_dir)},
        {.key = "resume_dir", .flag = "--resume", .label = "Resume from", .group = kFiles,
         .help = "continue from the latest checkpoint in DIR", .kind = K::text, .train_only = true,
         .access = RUN_CONFIG_MEMBER(resume_dir)},
    };
}

#undef RUN_CONFIG_MEMBER
#undef RUN_CONFIG_CHOICE

}  // namespace

const std::vector<std::string>& ConfigField::choices() const {
    static const std::vector<std::string> none;
    const auto* choice = std::get_if<ChoiceAccess>(&access);
    return choice ? choice->names : none;
}

std::span<const ConfigField> config_fields() {
    static const std::vector<ConfigField> fields = make_fields();
    return fields;
}

const ConfigField* find_config_field(std::string_view key) {
    const auto fields = config_fields();
    const auto found = std::find_if(fields.begin(), fields.end(),
                                    [&](const ConfigField& field) { return field.key == key; });
    return found == fields.end() ? nullptr : &*found;
}

}  // namespace trainbench
