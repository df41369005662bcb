#include "trainbench/config_fields.hpp"

#include <algorithm>
#include <limits>
#include <charconv>
#include <type_traits>

namespace trainbench {

namespace {

// The shortest decimal that reads back as the same double: exact, and "0.001" rather than
// "0.0010000000000000000208".
std::string shortest_text(double value) {
    char buffer[32];
    const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
    return std::string(buffer, result.ptr);
}

// `of` is a generic lambda returning a reference to a member, e.g.
// [](auto& c) -> auto& { return c.optimizer.lr; }; instantiating it for a const and a mutable
// RunConfig gives both accessors from one expression of the member's path.
template <class Of>
auto member_access(Of of) {
    using T = std::remove_reference_t<decltype(of(std::declval<RunConfig&>()))>;
    // Through plain lambdas (a captureless lambda is default-constructible): clang 14 cannot
    // convert a generic lambda with a deduced reference return to these function pointers.
    (void)of;
    return MemberAccess<T>{[](const RunConfig& c) -> const T& { return Of{}(c); },
                           [](RunConfig& c) -> T& { return Of{}(c); }};
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
const char* const kBatching = "Batching";
const char* const kOptimizer = "Optimizer";
const char* const kEvaluation = "Evaluation";
const char* const kDevice = "Device and efficiency techniques";
const char* const kFiles = "Files";

std::vector<ConfigField> make_fields() {
    using K = FieldKind;
    const ModelFamily mlp = ModelFamily::mlp;
    const ModelFamily gpt = ModelFamily::gpt;
    const ModelFamily cnn = ModelFamily::cnn;
    // The help texts are the CLI's (docs/CLI.md repeats them); see RunFlags for how the family
    // and the choice names are added in front.
    return {
        // Data
        {.key = "dataset", .flag = "--dataset", .label = "Dataset", .group = kData,
         .help = "spirals|moons|blobs|sine|fashion-mnist|csv:PATH|idx:DIR (MLP); kjv|text:PATH (GPT)",
         .kind = K::text, .details = "Which data to train on. The synthetic sets are tiny and fast; Fashion-MNIST (60,000 images, decoded per batch) makes loading cost and memory realistic; kjv (the King James Bible, 4.3 MB of text) trains a character-level language model.",
         .access = RUN_CONFIG_MEMBER(dataset)},
        {.key = "synthetic_samples", .flag = "--samples", .label = "Samples", .group = kData,
         .help = "rows generated for the synthetic sets", .kind = K::integer, .range = at_least(1),
         .details = "Rows generated for a synthetic set. More rows mean more updates per epoch (longer epochs); memory per update stays the same.", .only_when = FieldCondition{"dataset", {"spirals", "moons", "blobs", "sine"}},
         .access = RUN_CONFIG_MEMBER(synthetic_samples)},
        {.key = "val_fraction", .flag = "--val-fraction", .label = "Validation share", .group = kData,
         .help = "share of rows held out for validation where the data has no test set (0 allowed)",
         .kind = K::real, .range = between(0.0, 1.0, false), .families = {mlp, cnn},
         .details = "Share of rows held out for validation (Fashion-MNIST uses its test set). Validation adds a little time at each evaluation and no training memory.",
         .access = RUN_CONFIG_MEMBER(val_fraction)},
        {.key = "shuffle", .flag = "--no-shuffle", .label = "Shuffle", .group = kData,
         .help = "keep the file's order (no shuffling)", .kind = K::boolean, .switch_sets = false,
         .access = RUN_CONFIG_MEMBER(shuffle)},
        {.key = "seed", .flag = "--seed", .label = "Seed", .group = kData,
         .help = "seed for data, shuffling and initial weights", .kind = K::unsigned_integer,
         .details = "Seeds the data order and the weight initialisation: the same seed repeats a run exactly. No effect on speed or memory.",
         .access = RUN_CONFIG_MEMBER(seed)},

        // Model
        {.key = "model", .flag = "--model", .label = "Model", .group = kModel,
         .help = "gpt and cnn also switch to their defaults (gpt: --dataset kjv, AdamW, ...; cnn: --dataset fashion-mnist)", .kind = K::choice,
         .details = "The network: an MLP (a chain of Linear layers) for tables and images, a CNN (convolution blocks, then Linear layers) for images, or a GPT (a decoder-only transformer, as nanoGPT) for text. Choosing one loads that family's defaults, keeping the device and technique settings.",
         .access = RUN_CONFIG_CHOICE(model, &parse_model_family)},
        {.key = "hidden", .flag = "--hidden", .label = "Hidden layers", .group = kModel,
         .help = "hidden layer widths, e.g. 128,128 (cnn: the Linear layers after the convolutions)", .kind = K::layer_widths,
         .range = at_least(1, "e.g. --hidden 128,128"), .families = {mlp, cnn}, .details = "Widths of the hidden layers, comma separated. Parameters, gradients and optimizer state grow with the product of neighbouring widths; activations with width × micro-batch.",
         .access = RUN_CONFIG_MEMBER(hidden)},
        {.key = "activation", .flag = "--activation", .label = "Activation", .group = kModel, .kind = K::choice,
         .families = {mlp, cnn}, .details = "Non-linearity between layers. ReLU is the cheapest; GELU, tanh and sigmoid cost a little more compute. Memory is the same.",
         .access = RUN_CONFIG_CHOICE(activation, &parse_activation)},
        {.key = "n_layer", .flag = "--n-layer", .label = "Layers", .group = kModel, .help = "transformer blocks",
         .kind = K::integer, .range = at_least(1), .families = {gpt}, .details = "Transformer blocks. Parameters and compute grow in proportion; so do the saved activations, which gradient checkpointing cuts to one block's worth.",
         .access = RUN_CONFIG_MEMBER(n_layer)},
        {.key = "n_head", .flag = "--n-head", .label = "Heads", .group = kModel,
         .help = "attention heads (must divide --n-embd)", .kind = K::integer, .range = at_least(1),
         .families = {gpt}, .details = "Attention heads per block; each gets n_embd / n_head channels. The attention matrices (micro-batch × heads × context²) are a large share of the activation memory.",
         .access = RUN_CONFIG_MEMBER(n_head)},
        {.key = "n_embd", .flag = "--n-embd", .label = "Embedding width", .group = kModel,
         .help = "embedding width", .kind = K::integer, .range = at_least(1), .families = {gpt},
         .details = "Width of the residual stream. Parameters grow with its square, activations in proportion.",
         .access = RUN_CONFIG_MEMBER(n_embd)},
        {.key = "block_size", .flag = "--block-size", .label = "Context length", .group = kModel,
         .help = "context length in tokens (tokens per sample)", .kind = K::integer, .range = at_least(1),
         .families = {gpt}, .details = "Tokens per training sample (the context the model sees). Activations grow in proportion, attention with its square.",
         .access = RUN_CONFIG_MEMBER(block_size)},
        // PEFT's LoRA.
        {.key = "lora_rank", .flag = "--lora-rank", .label = "LoRA rank", .group = kModel,
         .help = "fine-tune with LoRA adapters of this rank (0 trains every weight)", .kind = K::integer,
         .range = at_least(0, "0 trains every weight"), .families = {gpt},
         .details = "Freezes every weight of the model and trains low-rank adapters (A: rank × in, B: out × rank) beside the target layers instead, as PEFT's LoRA. Gradients and optimizer state exist only for the adapters; the frozen weights keep no fp32 master copy in mixed precision. Start from a trained model with --init-weights.",
         .zero_label = "off (train every weight)", .access = RUN_CONFIG_MEMBER(lora_rank)},
        {.key = "lora_alpha", .flag = "--lora-alpha", .label = "LoRA alpha", .group = kModel,
         .help = "LoRA scaling: the adapters' output is multiplied by alpha / rank", .kind = K::real,
         .range = finite_above(0.0), .families = {gpt},
         .details = "The adapters' product is scaled by alpha / rank (PEFT's lora_alpha, default 8).",
         .access = RUN_CONFIG_MEMBER(lora_alpha)},
        {.key = "lora_targets", .flag = "--lora-targets", .label = "LoRA targets", .group = kModel,
         .help = "layers that get adapters: c_attn, c_proj, c_fc, or the groups attn and mlp, comma-separated",
         .kind = K::text, .families = {gpt},
         .details = "The Linear layers of each block that get adapters, by PEFT's module names: c_attn (query, key, value), c_proj (both output projections), c_fc (the MLP's widening layer); attn is c_attn and attn.c_proj, mlp is c_fc and mlp.c_proj.",
         .access = RUN_CONFIG_MEMBER(lora_targets)},
        {.key = "lora_base", .flag = "--lora-base", .label = "LoRA base", .group = kModel,
         .help = "full|nf4: the frozen base of the adapted layers in the run's precision, or 4-bit (QLoRA)",
         .kind = K::choice, .families = {gpt},
         .details = "QLoRA (Dettmers et al. 2023) with nf4: the frozen weights of the layers that get adapters are stored as 4-bit NormalFloat in blocks of 64, each block's scale quantized again to 8 bits (double quantization), about 4.13 bits a weight instead of 32 (or 16 in mixed precision), laid out as bitsandbytes stores them. Each product dequantizes its weight into a workspace the size of one weight, in the run's precision, right before it multiplies, as bitsandbytes does, so every product pays for a dequantization. The adapters, their gradients and optimizer state stay in full precision; layers without adapters, the embeddings and LayerNorms keep the run's precision.",
         .access = RUN_CONFIG_CHOICE(lora_base, &parse_lora_base)},
        {.key = "dora", .flag = "--dora", .label = "DoRA", .group = kModel,
         .help = "weight-decomposed LoRA: a trainable magnitude per output row of each adapted layer",
         .kind = K::boolean, .families = {gpt},
         .details = "DoRA (Liu et al. 2024), as PEFT's use_dora: each adapted layer computes m / ||W + (alpha/rank) B A|| times (x W^T + (alpha/rank) x A^T B^T), plus the bias, with the norm over each output row, recomputed every forward pass and held constant in the backward. The magnitude m (one value per output row, named lora_magnitude_vector as PEFT names it) trains with the adapters and starts as the norms of W's rows, so a fresh adapter computes the base model exactly. Costs over LoRA: the norms (a product of B and A per layer and micro-batch) and one saved activation of the layer's output size.",
         .access = RUN_CONFIG_MEMBER(dora)},

        {.key = "channels", .flag = "--channels", .label = "Conv channels", .group = kModel,
         .help = "channels of the convolution blocks (3x3 conv, activation, 2x2 max-pool), e.g. 32,64", .kind = K::layer_widths,
         .range = at_least(1, "e.g. --channels 32,64"), .families = {cnn}, .details = "One 3x3 convolution block (convolution, activation, 2x2 max-pooling) per entry, with that many output channels. Each block halves the image's height and width; activations (channels × pixels × micro-batch) dominate a CNN's memory, which gradient checkpointing cuts to one block's worth.",
         .access = RUN_CONFIG_MEMBER(channels)},
        // Batching, optimizer and evaluation
        {.key = "batch_size", .flag = "--batch-size", .label = "Batch size", .group = kBatching,
         .help = "samples per optimizer update (the global batch)", .kind = K::integer, .range = at_least(1),
         .details = "Samples per optimizer update (the global batch); the slider moves in powers of two. Larger batches keep the cores busier (more samples/s) and make fewer updates; activation memory grows with the micro-batch.",
         .access = RUN_CONFIG_MEMBER(batch_size)},
        {.key = "step_size", .flag = "--step-size", .label = "step_size", .group = kBatching,
         .help = "micro-batches accumulated per update (default 2)", .kind = K::integer,
         .range = at_least(1, "it is the number of micro-batches accumulated per update"),
         .details = "Gradient accumulation: the global batch is split into this many micro-batches whose gradients add up before one update. Activation memory shrinks with the micro-batch; each update takes somewhat longer, and the update itself is the same.",
         .access = RUN_CONFIG_MEMBER(step_size)},

        {.key = "optimizer.kind", .flag = "--optimizer", .label = "Optimizer", .group = kOptimizer,
         .kind = K::choice, .details = "Update rule, as torch.optim defines it. Optimizer state: SGD none (1× parameters with momentum), RMSprop and Adagrad 1×, Adam and AdamW 2× the parameters. Choosing one sets its default learning rate.",
         .access = RUN_CONFIG_CHOICE(optimizer.kind, &parse_optimizer)},
        {.key = "optimizer.lr", .flag = "--lr", .label = "Learning rate", .group = kOptimizer,
         .help = "learning rate (default: the optimizer's PyTorch default)", .kind = K::optional_real,
         .range = finite_above(0.0),
         .details = "Step size of each update; the slider is logarithmic (1e-6 to 1). No effect on speed or memory, but too high a rate diverges and the run stops with a message.",
         .access = OptionalRealAccess{RUN_CONFIG_MEMBER(optimizer.lr),
                                      [](const RunConfig& c) { return c.optimizer.resolved_lr(); }}},
        {.key = "optimizer.momentum", .flag = "--momentum", .label = "Momentum", .group = kOptimizer,
         .help = "momentum (sgd, rmsprop)", .kind = K::real, .range = between(0.0, 1.0, false),
         .only_when = FieldCondition{"optimizer.kind", {"sgd", "rmsprop"}},
         .access = RUN_CONFIG_MEMBER(optimizer.momentum)},
        {.key = "optimizer.dampening", .label = "Dampening", .group = kOptimizer,
         .help = "dampening of the momentum (sgd)", .kind = K::real, .range = between(0.0, 1.0, true),
         .only_when = FieldCondition{"optimizer.kind", {"sgd"}},
         .access = RUN_CONFIG_MEMBER(optimizer.dampening)},
        {.key = "optimizer.nesterov", .label = "Nesterov", .group = kOptimizer,
         .help = "Nesterov momentum (sgd; needs momentum > 0 and dampening 0)", .kind = K::boolean,
         .only_when = FieldCondition{"optimizer.kind", {"sgd"}},
         .access = RUN_CONFIG_MEMBER(optimizer.nesterov)},
        {.key = "optimizer.weight_decay", .flag = "--weight-decay", .label = "Weight decay", .group = kOptimizer,
         .help = "weight decay (default 0, adamw 0.01)", .kind = K::optional_real, .range = finite_at_least(0.0),
         .access = OptionalRealAccess{RUN_CONFIG_MEMBER(optimizer.weight_decay),
                                      [](const RunConfig& c) { return c.optimizer.resolved_weight_decay(); }}},
        {.key = "optimizer.beta1", .label = "Beta 1", .group = kOptimizer,
         .help = "decay of the gradient's running average (adam, adamw)", .kind = K::real,
         .range = between(0.0, 1.0, false), .only_when = FieldCondition{"optimizer.kind", {"adam", "adamw"}},
         .access = RUN_CONFIG_MEMBER(optimizer.beta1)},
        {.key = "optimizer.beta2", .label = "Beta 2", .group = kOptimizer,
         .help = "decay of the squared gradient's running average (adam, adamw)", .kind = K::real,
         .range = between(0.0, 1.0, false), .only_when = FieldCondition{"optimizer.kind", {"adam", "adamw"}},
         .access = RUN_CONFIG_MEMBER(optimizer.beta2)},
        {.key = "optimizer.eps", .label = "Epsilon", .group = kOptimizer,
         .help = "added to the denominator for numerical stability (default 1e-8, adagrad 1e-10)",
         .kind = K::optional_real, .range = finite_at_least(0.0),
         .access = OptionalRealAccess{RUN_CONFIG_MEMBER(optimizer.eps),
                                      [](const RunConfig& c) { return c.optimizer.resolved_eps(); }}},
        {.key = "optimizer.alpha", .label = "Alpha", .group = kOptimizer,
         .help = "smoothing of the squared gradient's running average (rmsprop)", .kind = K::real,
         .range = between(0.0, 1.0, true), .only_when = FieldCondition{"optimizer.kind", {"rmsprop"}},
         .access = RUN_CONFIG_MEMBER(optimizer.alpha)},
        {.key = "optimizer.centered", .label = "Centered", .group = kOptimizer,
         .help = "normalise by the gradient's estimated variance (rmsprop)", .kind = K::boolean,
         .only_when = FieldCondition{"optimizer.kind", {"rmsprop"}},
         .access = RUN_CONFIG_MEMBER(optimizer.centered)},
        {.key = "optimizer.lr_decay", .label = "LR decay", .group = kOptimizer,
         .help = "learning rate decay per update (adagrad)", .kind = K::real, .range = finite_at_least(0.0),
         .only_when = FieldCondition{"optimizer.kind", {"adagrad"}},
         .access = RUN_CONFIG_MEMBER(optimizer.lr_decay)},
        {.key = "optimizer.initial_accumulator_value", .label = "Initial accumulator", .group = kOptimizer,
         .help = "starting value of the sum of squared gradients (adagrad)", .kind = K::real,
         .range = finite_at_least(0.0), .only_when = FieldCondition{"optimizer.kind", {"adagrad"}},
         .access = RUN_CONFIG_MEMBER(optimizer.initial_accumulator_value)},

        {.key = "schedule.kind", .flag = "--schedule", .label = "Schedule", .group = kOptimizer,
         .kind = K::choice, .details = "How the learning rate changes over the run after warmup; applied once per update. Free in speed and memory.",
         .access = RUN_CONFIG_CHOICE(schedule.kind, &parse_schedule)},
        {.key = "schedule.warmup_steps", .flag = "--warmup-steps", .label = "Warmup updates", .group = kOptimizer,
         .help = "linear warmup over this many updates", .kind = K::integer, .range = at_least(0),
         .details = "Updates over which the learning rate ramps up linearly. Helps large batches and transformers start stably; free in speed and memory.", .zero_label = "none",
         .access = RUN_CONFIG_MEMBER(schedule.warmup_steps)},
        {.key = "schedule.decay_every", .flag = "--decay-every", .label = "Decay every", .group = kOptimizer,
         .help = "step schedule: decay every N updates", .kind = K::integer, .range = at_least(1),
         .only_when = FieldCondition{"schedule.kind", {"step"}},
         .access = RUN_CONFIG_MEMBER(schedule.decay_every)},
        {.key = "schedule.decay_gamma", .flag = "--decay-gamma", .label = "Decay factor", .group = kOptimizer,
         .help = "step schedule: multiply the lr by this", .kind = K::real, .range = finite_above(0.0),
         .only_when = FieldCondition{"schedule.kind", {"step"}},
         .access = RUN_CONFIG_MEMBER(schedule.decay_gamma)},
        {.key = "schedule.min_lr", .label = "Final learning rate", .group = kOptimizer,
         .help = "cosine and linear schedules end at this learning rate", .kind = K::real,
         .range = finite_at_least(0.0), .only_when = FieldCondition{"schedule.kind", {"linear", "cosine"}},
         .access = RUN_CONFIG_MEMBER(schedule.min_lr)},

        {.key = "clip_grad_norm", .flag = "--clip-grad-norm", .label = "Clip grad norm", .group = kOptimizer,
         .help = "clip gradients to this global L2 norm (0 = off)", .kind = K::real,
         .range = at_least(0.0, "0 turns clipping off"), .details = "Scales the gradients down when their global L2 norm exceeds this value. Costs one extra pass over the gradients per update; no extra memory.", .zero_label = "off",
         .access = RUN_CONFIG_MEMBER(clip_grad_norm)},
        {.key = "epochs", .flag = "--epochs", .label = "Epochs", .group = kBatching,
         .help = "passes over the training set", .kind = K::integer, .range = at_least(1),
         .details = "Passes over the training set. Time grows in proportion; memory does not.",
         .access = RUN_CONFIG_MEMBER(epochs)},
        {.key = "max_steps", .flag = "--max-steps", .label = "Max updates", .group = kBatching,
         .help = "stop after this many updates (0 = no limit)", .kind = K::integer,
         .range = at_least(0, "0 means no limit"), .details = "Stop after this many updates even before the last epoch ends. Handy for quick timing runs; no effect on memory.", .zero_label = "no limit",
         .access = RUN_CONFIG_MEMBER(max_steps)},
        {.key = "eval_every", .flag = "--eval-every", .label = "Evaluate every", .group = kEvaluation,
         .help = "also validate every N updates within an epoch (0 = epoch ends only)", .kind = K::integer,
         .range = at_least(0, "0 evaluates at the end of each epoch only"), .details = "Validation (and, for a GPT, a text sample) every N updates, besides each epoch's end. Each evaluation takes a little time; no training memory.", .zero_label = "epoch ends only",
         .access = RUN_CONFIG_MEMBER(eval_every)},
        {.key = "eval_samples", .flag = "--eval-samples", .label = "Evaluation samples", .group = kEvaluation,
         .help = "validation samples per evaluation, evenly spaced (0 = the whole split)", .kind = K::integer,
         .range = at_least(0, "0 evaluates the whole validation split"), .zero_label = "whole split",
         .access = RUN_CONFIG_MEMBER(eval_samples)},
        {.key = "sample_chars", .flag = "--sample-chars", .label = "Sample length", .group = kEvaluation,
         .help = "characters of text generated at each evaluation (0 = none)", .kind = K::integer,
         .range = at_least(0, "0 generates no text"), .families = {gpt}, .details = "Characters a GPT generates at each evaluation, from a newline prompt, so you can watch the model go from noise to words.", .zero_label = "none",
         .access = RUN_CONFIG_MEMBER(sample_chars)},
        {.key = "sample_temperature", .flag = "--sample-temperature", .label = "Sample temperature",
         .group = kEvaluation, .help = "sampling temperature (lower = more likely characters)", .kind = K::real,
         .range = finite_above(0.0), .families = {gpt}, .access = RUN_CONFIG_MEMBER(sample_temperature)},
        {.key = "sample_seed", .flag = "--sample-seed", .label = "Sample seed", .group = kEvaluation,
         .help = "seed of the sampling (the same at every evaluation)", .kind = K::unsigned_integer,
         .families = {gpt}, .access = RUN_CONFIG_MEMBER(sample_seed)},

        // Device and efficiency techniques
        {.key = "device", .flag = "--device", .label = "Device", .group = kDevice, .help = "cpu|cuda|cuda:N",
         .kind = K::text, .details = "Where the run computes. CUDA trains on the GPU and reports the driver's memory figures next to the engine's own counters.",
         .access = RUN_CONFIG_MEMBER(device)},
        {.key = "precision", .flag = "--precision", .label = "Precision", .group = kDevice,
         .help = "16-bit = mixed precision", .kind = K::choice,
         .details = "Mixed precision keeps fp32 master weights but feeds 16-bit copies to the matrix products and stores saved activations in 16 bits (about half the activation memory); fp16 adds a dynamic loss scale. On a CPU without bf16 instructions the 16-bit math is emulated (rounded to 16 bits, multiplied in fp32), so expect no speed-up there.",
         .access = RUN_CONFIG_CHOICE(precision, &parse_precision)},
        {.key = "threads", .flag = "--threads", .label = "CPU threads", .group = kDevice,
         .help = "CPU threads (0 = all cores)", .kind = K::integer, .range = at_least(0, "0 uses all cores"),
         .details = "Threads for the CPU matrix products. More threads speed up wide layers; tiny layers gain little and can even slow down. No effect on memory.", .zero_label = "all cores",
         .access = RUN_CONFIG_MEMBER(threads)},
        {.key = "processes", .flag = "--processes", .label = "Processes", .group = kDevice,
         .help = "data-parallel processes (MPI): global batch = micro-batch x step_size x processes", .kind = K::integer,
         .range = at_least(1, "it is the number of processes that share every global batch"), .train_only = true,
         .details = "Data parallelism: this many processes (started with mpirun) each train on their share of every global batch and sum their gradients before the update, which stays the same as with one process. Each process holds a whole copy of the model, gradients and optimizer state; the CPU threads are divided among the processes. The app runs such a run as trainbench-cli under mpirun and plots process 0's figures.",
         .access = RUN_CONFIG_MEMBER(processes)},
        {.key = "zero", .flag = "--zero", .label = "ZeRO stage", .group = kDevice,
         .help = "0|1|2: shard optimizer state (1) and reduced gradients (2) over the processes", .kind = K::integer,
         .range = between(0.0, 2.0, true), .train_only = true,
         .details = "DeepSpeed's ZeRO over the data-parallel processes. Stage 1 gives each process 1/processes of the optimizer state to keep and update, then gathers the updated parameters (optimizer-state memory / processes, one all-gather more per update). Stage 2 also shards the gradients: the backward pass sums each layer's gradients over the processes as soon as they are complete (a reduce-scatter per op) and keeps only this process's slice, so gradient memory is that slice plus the layers in flight (less on a GPT; more on an MLP whose one layer holds most of the parameters), at the cost of a reduce-scatter per op and micro-batch. The update is the same as stage 0 up to float rounding. With one process there is nothing to shard.",
         .zero_label = "off", .access = RUN_CONFIG_MEMBER(zero)},
        {.key = "pipeline_stages", .flag = "--pipeline-stages", .label = "Pipeline stages", .group = kDevice,
         .help = "model parallelism: the model cut into this many stages, a process each (--processes a multiple of it)",
         .kind = K::integer, .range = at_least(1, "1 keeps the whole model in every process"), .train_only = true,
         .details = "Model parallelism by pipeline stages (GPipe, PipeDream): the model is cut into this many contiguous stages of about equal FLOPs (a GPT between its blocks, an MLP or CNN between its layers), each held and run by its own process, which keeps only its stage's parameters, gradients, optimizer state and activations. The update's step_size micro-batches flow through the stages: each stage sends its output forward and the gradient of its input back. Stages wait on one another at the start and the end of every update (the bubble, (stages - 1) / (step_size + stages - 1) of the time for GPipe), so more micro-batches keep the pipeline busier. --processes stages x D runs D data-parallel copies of the pipeline, each on its share of every batch, each stage summing its gradients over its copies (and sharding its optimizer state over them with --zero 1; its gradients too with --zero 2). The update is the same as one process's up to float rounding.",
         .access = RUN_CONFIG_MEMBER(pipeline_stages)},
        {.key = "pipeline_schedule", .flag = "--pipeline-schedule", .label = "Pipeline schedule", .group = kDevice,
         .help = "all forwards, then all backwards; or a backward after each forward once the pipeline is full",
         .kind = K::choice, .train_only = true,
         .details = "gpipe runs every micro-batch's forward, then every backward, so each stage holds all step_size micro-batches' activations. 1f1b (PipeDream-flush, Megatron's default) starts a micro-batch's backward as soon as the pipeline is full, so stage s holds at most stages - s micro-batches' activations; the bubble is the same.",
         .access = RUN_CONFIG_CHOICE(pipeline_schedule, &parse_pipeline_schedule)},
        {.key = "memory_limit_bytes", .flag = "--memory-limit", .label = "Memory budget", .group = kDevice,
         .help = "memory budget, e.g. 512MiB (0 = none)", .kind = K::byte_size,
         .range = at_least(0, "0 means no budget"), .details = "Makes the engine behave like a device with this much memory. A run whose plan exceeds it cannot start, and the plan says how much it needs and which knob would make it fit.", .zero_label = "no limit",
         .access = RUN_CONFIG_MEMBER(memory_limit_bytes)},
        {.key = "auto_fit", .flag = "--auto-fit", .label = "Auto-fit", .group = kDevice,
         .help = "raise step_size (same global batch) until the run fits --memory-limit", .kind = K::boolean,
         .details = "Keeps the global batch but doubles step_size (halving the micro-batch) until the run fits the memory budget: same training dynamics, a little slower per update. Needs a budget.",
         .access = RUN_CONFIG_MEMBER(auto_fit)},
        {.key = "gradient_checkpointing", .flag = "--gradient-checkpointing", .label = "Grad checkpointing",
         .group = kDevice, .help = "recompute activations in backward to save memory", .kind = K::boolean,
         .details = "Keeps only some layers' inputs (a GPT: each block's input) and recomputes the rest during backward. Activation memory drops; each update takes longer for the extra forward work.",
         .access = RUN_CONFIG_MEMBER(gradient_checkpointing)},
        {.key = "fused", .flag = "--fused", .label = "Fused kernels", .group = kDevice,
         .help = "on|off: fold element-wise ops into their neighbours' kernels (torch.compile) or run each alone (eager)",
         .kind = K::choice,
         .details = "What torch.compile does to a model. On: bias and activation are applied in the matrix product's epilogue, a residual add and the LayerNorm after it are one pass, attention's scale, mask and softmax are one pass, cross-entropy is computed with its softmax, and the optimizer updates each block of parameters in one pass. Off runs each of those as its own pass over memory, as eager PyTorch does (the loss as log_softmax then nll_loss; attention's backward then holds the whole gradient of the probabilities). Same results up to float rounding; the plan counts the bytes each way moves (on the CPU). On CUDA, on also replays each micro-batch of a GPT as one CUDA graph; off launches every kernel and runs attention's scale, mask and softmax, the loss and the optimizer one op at a time.",
         .access = RUN_CONFIG_CHOICE(fused, &parse_fused_kernels)},
        {.key = "cpu_products", .flag = "--cpu-products", .label = "CPU products", .group = kDevice,
         .help = "auto|eigen|onednn: the library the CPU engine's matrix products run in",
         .kind = K::choice,
         .details = "Which library multiplies the matrices of the CPU engine (Linear layers). oneDNN (Intel's, what PyTorch uses) runs bf16 products on 16-bit operands with fp32 accumulation on AMX or AVX512_BF16, several times faster than fp32 where the CPU has them, and its AVX-512 fp32 products faster than Eigen's. eigen is the engine's own Eigen product, in fp32 for every precision (16-bit values widened first), and the reference the tests compare with. auto takes oneDNN's bf16 kernels for bf16 runs where the CPU multiplies bf16 natively, oneDNN's fp32 kernels where it has AVX-512, and Eigen elsewhere; the plan shows what it chose. Same results up to float rounding.",
         .only_when = FieldCondition{"device", {"cpu"}},
         .access = RUN_CONFIG_CHOICE(cpu_products, &parse_cpu_products)},
        // `compare` has its own --empty-cache-steps: the N of its "empty cache" run.
        {.key = "empty_cache_steps", .flag = "--empty-cache-steps", .label = "Empty cache every", .group = kDevice,
         .help = "release the allocator cache every N updates", .kind = K::integer,
         .range = at_least(0, "0 never releases the cache"), .train_only = true,
         .details = "Releases the allocator's cached free blocks every N updates. Lowers peak reserved memory; re-allocating afterwards makes updates slower (often ~10%).", .zero_label = "never",
         .access = RUN_CONFIG_MEMBER(empty_cache_steps)},
        {.key = "prefetch", .flag = "--prefetch", .label = "Prefetch", .group = kDevice,
         .help = "micro-batches prepared ahead on a loader thread (0 = inline)", .kind = K::integer,
         .range = at_least(0, "0 loads batches inline"), .details = "A loader thread prepares this many micro-batches ahead, hiding data loading behind compute. Costs memory for the prepared batches.", .zero_label = "off (load inline)",
         .access = RUN_CONFIG_MEMBER(prefetch)},
        {.key = "preload_device", .flag = "--preload-device", .label = "Preload to device", .group = kDevice,
         .help = "cuda: keep the whole training set on the device", .kind = K::boolean,
         .details = "CUDA only: copies the whole training set to the GPU once instead of once per micro-batch. Faster when it fits; uses device memory for the data.", .only_when = FieldCondition{"device", {"cuda"}},
         .access = RUN_CONFIG_MEMBER(preload_device)},

        // Files; per-run outputs are not flags of `compare`, which runs many.
        {.key = "init_weights", .flag = "--init-weights", .label = "Initial weights", .group = kFiles,
         .help = "safetensors file to start from", .kind = K::text, .details = "Starts from the weights of an earlier run (a safetensors file with the same layout) instead of a random initialisation. A GPT's file also brings the vocabulary it learnt, which its text is then read with (symbols it lacks are left out), so it can continue or fine-tune (--lora-rank) on another text.",
         .access = RUN_CONFIG_MEMBER(init_weights)},
        {.key = "save_weights", .flag = "--save-weights", .label = "Save weights", .group = kFiles,
         .help = "write the final weights (safetensors; LoRA: merged into the base)", .kind = K::text, .train_only = true,
         .in_app = false,
         .access = RUN_CONFIG_MEMBER(save_weights)},
        {.key = "save_adapters", .flag = "--save-adapters", .label = "Save adapters", .group = kFiles,
         .help = "LoRA: write the adapters alone (safetensors, PEFT's names)", .kind = K::text, .families = {gpt},
         .train_only = true, .in_app = false, .access = RUN_CONFIG_MEMBER(save_adapters)},
        {.key = "metrics_out", .flag = "--metrics-out", .label = "Metrics CSV", .group = kFiles,
         .help = "write one CSV row per update", .kind = K::text, .train_only = true,
         .in_app = false,
         .access = RUN_CONFIG_MEMBER(metrics_out)},
        {.key = "checkpoint_every", .flag = "--checkpoint-every", .label = "Checkpoints", .group = kFiles,
         .help = "save a checkpoint every N updates", .kind = K::integer,
         .range = at_least(0, "0 writes no checkpoints"), .train_only = true,
         .details = "Saves model, optimizer, loss scale and data position so a stopped run can be resumed. Each save takes time; no extra training memory.", .zero_label = "never",
         .access = RUN_CONFIG_MEMBER(checkpoint_every)},
        {.key = "checkpoint_dir", .flag = "--checkpoint-dir", .label = "Checkpoint folder", .group = kFiles,
         .help = "folder for checkpoints", .kind = K::text, .train_only = true,
         .in_app = false,
         .access = RUN_CONFIG_MEMBER(checkpoint_dir)},
        {.key = "resume_dir", .flag = "--resume", .label = "Resume from", .group = kFiles,
         .help = "continue from the latest checkpoint in DIR", .kind = K::text, .train_only = true,
         .in_app = false,
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

bool ConfigField::condition_holds(const RunConfig& config) const {
    if (!only_when) return true;
    const ConfigField* subject = find_config_field(only_when->key);
    if (!subject) return true;
    const std::string value = field_value_text(*subject, config);
    // "cuda:1" is a "cuda" device: a value also matches a name followed by ':'.
    return std::any_of(only_when->values.begin(), only_when->values.end(), [&](const std::string& name) {
        return value == name || (value.size() > name.size() && value.compare(0, name.size(), name) == 0 &&
                                 value[name.size()] == ':');
    });
}

void copy_field_value(const ConfigField& field, const RunConfig& from, RunConfig& to) {
    std::visit(
        [&](const auto& access) {
            using Access = std::decay_t<decltype(access)>;
            if constexpr (std::is_same_v<Access, OptionalRealAccess>) {
                access.member.write(to) = access.member.read(from);
            } else if constexpr (std::is_same_v<Access, ChoiceAccess>) {
                access.write(to, access.read(from));
            } else {
                access.write(to) = access.read(from);
            }
        },
        field.access);
}

std::string field_value_text(const ConfigField& field, const RunConfig& config) {
    return std::visit(
        [&](const auto& access) -> std::string {
            using Access = std::decay_t<decltype(access)>;
            if constexpr (std::is_same_v<Access, OptionalRealAccess>) {
                return shortest_text(access.resolved(config));
            } else if constexpr (std::is_same_v<Access, MemberAccess<double>>) {
                return shortest_text(access.read(config));
            } else if constexpr (std::is_same_v<Access, ChoiceAccess>) {
                return access.read(config);
            } else if constexpr (std::is_same_v<Access, MemberAccess<std::string>>) {
                return access.read(config);
            } else if constexpr (std::is_same_v<Access, MemberAccess<bool>>) {
                return access.read(config) ? "true" : "false";
            } else if constexpr (std::is_same_v<Access, MemberAccess<std::vector<int64_t>>>) {
                std::string text;
                for (const int64_t width : access.read(config)) {
                    if (!text.empty()) text += ',';
                    text += std::to_string(width);
                }
                return text;
            } else {
                return std::to_string(access.read(config));
            }
        },
        field.access);
}

std::vector<std::string> cli_arguments_for(const RunConfig& config) {
    std::vector<std::string> arguments{"--model", to_string(config.model)};
    const RunConfig defaults = default_config(config.model);
    for (const ConfigField& field : config_fields()) {
        if (field.flag.empty() || field.key == "model" || !field.applies_to(config.model)) continue;
        const std::string value = field_value_text(field, config);
        if (value == field_value_text(field, defaults)) continue;
        if (field.kind == FieldKind::boolean) {
            if (std::get<MemberAccess<bool>>(field.access).read(config) == field.switch_sets)
                arguments.push_back(field.flag);
            continue;
        }
        arguments.push_back(field.flag);
        arguments.push_back(value);
    }
    return arguments;
}

const ConfigField* find_config_field(std::string_view key) {
    const auto fields = config_fields();
    const auto found = std::find_if(fields.begin(), fields.end(),
                                    [&](const ConfigField& field) { return field.key == key; });
    return found == fields.end() ? nullptr : &*found;
}

}  // namespace trainbench
