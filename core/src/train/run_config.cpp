#include "trainbench/run_config.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include "backend/backend_support.hpp"
#include "data/text_corpus.hpp"
#include "model/build_model.hpp"
#include "trainbench/config_fields.hpp"
#include "trainbench/error.hpp"

namespace trainbench {

double OptimizerConfig::resolved_lr() const {
    if (lr) return *lr;
    switch (kind) {
        case OptimizerKind::rmsprop:
        case OptimizerKind::adagrad: return 1e-2;
        case OptimizerKind::sgd:
        case OptimizerKind::adam:
        case OptimizerKind::adamw: return 1e-3;
    }
    return 1e-3;
}

double OptimizerConfig::resolved_weight_decay() const {
    if (weight_decay) return *weight_decay;
    return kind == OptimizerKind::adamw ? 1e-2 : 0.0;
}

double OptimizerConfig::resolved_eps() const {
    if (eps) return *eps;
    return kind == OptimizerKind::adagrad ? 1e-10 : 1e-8;
}

namespace {

template <typename Enum, size_t N>
using NameTable = std::array<std::pair<Enum, std::string_view>, N>;

constexpr NameTable<Activation, 4> kActivationNames{{{Activation::relu, "relu"},
                                                     {Activation::gelu, "gelu"},
                                                     {Activation::tanh, "tanh"},
                                                     {Activation::sigmoid, "sigmoid"}}};
constexpr NameTable<OptimizerKind, 5> kOptimizerNames{{{OptimizerKind::sgd, "sgd"},
                                                       {OptimizerKind::adam, "adam"},
                                                       {OptimizerKind::adamw, "adamw"},
                                                       {OptimizerKind::rmsprop, "rmsprop"},
                                                       {OptimizerKind::adagrad, "adagrad"}}};
constexpr NameTable<ScheduleKind, 4> kScheduleNames{{{ScheduleKind::constant, "constant"},
                                                     {ScheduleKind::linear, "linear"},
                                                     {ScheduleKind::cosine, "cosine"},
                                                     {ScheduleKind::step, "step"}}};
constexpr NameTable<ModelFamily, 3> kModelFamilyNames{
    {{ModelFamily::mlp, "mlp"}, {ModelFamily::gpt, "gpt"}, {ModelFamily::cnn, "cnn"}}};
constexpr NameTable<Precision, 3> kPrecisionNames{{{Precision::fp32, "fp32"},
                                                   {Precision::fp16, "fp16"},
                                                   {Precision::bf16, "bf16"}}};
constexpr NameTable<FusedKernels, 2> kFusedKernelsNames{{{FusedKernels::on, "on"}, {FusedKernels::off, "off"}}};
constexpr NameTable<CpuProducts, 3> kCpuProductsNames{
    {{CpuProducts::automatic, "auto"}, {CpuProducts::eigen, "eigen"}, {CpuProducts::onednn, "onednn"}}};
constexpr NameTable<LoraBase, 2> kLoraBaseNames{{{LoraBase::full, "full"}, {LoraBase::nf4, "nf4"}}};
constexpr NameTable<PipelineSchedule, 2> kPipelineScheduleNames{
    {{PipelineSchedule::one_f_one_b, "1f1b"}, {PipelineSchedule::gpipe, "gpipe"}}};

template <typename Enum, size_t N>
std::string name_of(const NameTable<Enum, N>& table, Enum value) {
    for (const auto& [e, name] : table)
        if (e == value) return std::string(name);
    return "unknown";
}

std::string lowercase(std::string_view text) {
    std::string out(text);
    for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

// "sgd, adam, adamw, rmsprop or adagrad"
template <typename Enum, size_t N>
std::string accepted_names(const NameTable<Enum, N>& table) {
    std::string out;
    for (size_t i = 0; i < N; ++i) {
        if (i > 0) out += (i + 1 == N) ? " or " : ", ";
        out += table[i].second;
    }
    return out;
}

template <typename Enum, size_t N>
std::vector<std::string> all_names(const NameTable<Enum, N>& table) {
    std::vector<std::string> names;
    for (const auto& entry : table) names.emplace_back(entry.second);
    return names;
}

template <typename Enum, size_t N>
Enum parse_name(const NameTable<Enum, N>& table, const std::string& text, const char* what) {
    const std::string wanted = lowercase(text);
    for (const auto& [e, name] : table)
        if (name == wanted) return e;
    throw Error("unknown " + std::string(what) + " '" + text + "': expected " +
                accepted_names(table));
}

}  // namespace

std::string to_string(Activation a) { return name_of(kActivationNames, a); }
std::string to_string(OptimizerKind k) { return name_of(kOptimizerNames, k); }
std::string to_string(ScheduleKind k) { return name_of(kScheduleNames, k); }
std::string to_string(Precision p) { return name_of(kPrecisionNames, p); }
std::string to_string(ModelFamily f) { return name_of(kModelFamilyNames, f); }
std::string to_string(FusedKernels f) { return name_of(kFusedKernelsNames, f); }
std::string to_string(CpuProducts p) { return name_of(kCpuProductsNames, p); }
std::string to_string(LoraBase b) { return name_of(kLoraBaseNames, b); }
std::string to_string(PipelineSchedule s) { return name_of(kPipelineScheduleNames, s); }

Activation parse_activation(const std::string& s) {
    return parse_name(kActivationNames, s, "activation");
}
OptimizerKind parse_optimizer(const std::string& s) {
    return parse_name(kOptimizerNames, s, "optimizer");
}
ScheduleKind parse_schedule(const std::string& s) {
    return parse_name(kScheduleNames, s, "schedule");
}
Precision parse_precision(const std::string& s) {
    return parse_name(kPrecisionNames, s, "precision");
}
ModelFamily parse_model_family(const std::string& s) {
    return parse_name(kModelFamilyNames, s, "model");
}
FusedKernels parse_fused_kernels(const std::string& s) { return parse_name(kFusedKernelsNames, s, "fused"); }
CpuProducts parse_cpu_products(const std::string& s) { return parse_name(kCpuProductsNames, s, "cpu_products"); }
LoraBase parse_lora_base(const std::string& s) { return parse_name(kLoraBaseNames, s, "lora_base"); }
PipelineSchedule parse_pipeline_schedule(const std::string& s) {
    return parse_name(kPipelineScheduleNames, s, "pipeline_schedule");
}

template <> std::vector<std::string> names_of<Activation>() { return all_names(kActivationNames); }
template <> std::vector<std::string> names_of<OptimizerKind>() { return all_names(kOptimizerNames); }
template <> std::vector<std::string> names_of<ScheduleKind>() { return all_names(kScheduleNames); }
template <> std::vector<std::string> names_of<Precision>() { return all_names(kPrecisionNames); }
template <> std::vector<std::string> names_of<ModelFamily>() { return all_names(kModelFamilyNames); }
template <> std::vector<std::string> names_of<FusedKernels>() { return all_names(kFusedKernelsNames); }
template <> std::vector<std::string> names_of<CpuProducts>() { return all_names(kCpuProductsNames); }
template <> std::vector<std::string> names_of<LoraBase>() { return all_names(kLoraBaseNames); }
template <> std::vector<std::string> names_of<PipelineSchedule>() { return all_names(kPipelineScheduleNames); }

RunConfig default_config(ModelFamily family) {
    RunConfig c;
    if (family == ModelFamily::mlp) return c;
    if (family == ModelFamily::cnn) {
        // The classic small image classifier: two 3x3 convolution blocks (32, 64 channels) and
        // a 128-wide Linear layer, Adam at PyTorch's defaults, on Fashion-MNIST.
        c.model = family;
        c.dataset = "fashion-mnist";
        c.hidden = {128};
        c.batch_size = 64;
        c.step_size = 1;
        c.epochs = 5;  // ~90% on Fashion-MNIST's test set after 3, a little more after 5
        return c;
    }
    // nanoGPT's training recipe (train.py, configure_optimizers): AdamW with betas (0.9, 0.95)
    // and weight decay 0.1 on the weights and embeddings, gradients clipped at 1.0, a linear
    // warmup then cosine decay to a tenth of the learning rate.
    c.model = family;
    c.dataset = "kjv";
    c.batch_size = 32;
    c.epochs = 1;
    c.optimizer.kind = OptimizerKind::adamw;
    c.optimizer.lr = 1e-3;
    c.optimizer.beta2 = 0.95;
    c.optimizer.weight_decay = 0.1;
    c.clip_grad_norm = 1.0;
    c.schedule.kind = ScheduleKind::cosine;
    c.schedule.warmup_steps = 100;
    c.schedule.min_lr = 1e-4;
    // A language model's validation split is large: evaluate a fixed sample of it regularly.
    c.eval_every = 100;
    c.eval_samples = 256;
    c.sample_chars = 200;
    c.sample_temperature = 0.8;
    return c;
}

RunConfig default_example_config() {
    RunConfig c = default_config(ModelFamily::gpt);
    c.n_layer = 2;
    c.n_head = 4;
    c.n_embd = 64;
    c.block_size = 64;
    c.max_steps = 1500;  // 3 M tokens: validation loss ~1.8 nats, well below the ~3 of the letters' frequencies
    c.eval_every = 150;  // ten samples over the run
    return c;
}

int64_t parse_byte_size(const std::string& text) {
    const auto fail = [&](const std::string& why) -> Error {
        return Error("invalid byte size '" + text + "': " + why +
                     " (examples: 512MiB, 2GiB, 1.5GB, 64KB, 1000000)");
    };
    std::string_view s(text);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    if (s.empty()) throw fail("it is empty");

    // Only plain decimals: from_chars alone would also take signs, exponents, "inf" and "nan".
    size_t number_end = 0;
    bool seen_digit = false, seen_point = false;
    for (; number_end < s.size(); ++number_end) {
        const char c = s[number_end];
        if (std::isdigit(static_cast<unsigned char>(c))) {
            seen_digit = true;
        } else if (c == '.' && !seen_point) {
            seen_point = true;
        } else {
            break;
        }
    }
    if (!seen_digit) {
        if (s.front() == '-') throw fail("a size cannot be negative");
        throw fail("it does not start with a number");
    }
    double number = 0.0;
    const auto parsed = std::from_chars(s.data(), s.data() + number_end, number);
    if (parsed.ec != std::errc() || parsed.ptr != s.data() + number_end)
        throw fail("it does not start with a number");

    std::string_view unit_text = s.substr(number_end);
    while (!unit_text.empty() && std::isspace(static_cast<unsigned char>(unit_text.front())))
        unit_text.remove_prefix(1);
    const std::string unit = lowercase(unit_text);

    struct Unit {
        std::string_view name;
        double bytes;
    };
    static constexpr std::array<Unit, 9> kUnits{{{"", 1.0},
                                                 {"b", 1.0},
                                                 {"kb", 1e3},
                                                 {"mb", 1e6},
                                                 {"gb", 1e9},
                                                 {"tb", 1e12},
                                                 {"kib", 1024.0},
                                                 {"mib", 1024.0 * 1024.0},
                                                 {"gib", 1024.0 * 1024.0 * 1024.0}}};
    const auto found = std::find_if(kUnits.begin(), kUnits.end(),
                                    [&](const Unit& u) { return u.name == unit; });
    if (found == kUnits.end())
        throw fail("unknown unit '" + std::string(unit_text) +
                   "', expected B, KB, MB, GB, TB, KiB, MiB or GiB");

    const double bytes = std::round(number * found->bytes);
    // 2^63 is exactly representable; anything at or above it does not fit in int64_t.
    if (!(bytes < 9223372036854775808.0)) throw fail("it is too large");
    return static_cast<int64_t>(bytes);
}

std::string format_bytes(int64_t bytes) {
    static constexpr std::array<const char*, 6> kUnits{"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    const bool negative = bytes < 0;
    double value = std::fabs(static_cast<double>(bytes));
    size_t unit = 0;
    while (value >= 1024.0 && unit + 1 < kUnits.size()) {
        value /= 1024.0;
        ++unit;
    }
    char number[32];
    if (unit == 0) {
        std::snprintf(number, sizeof number, "%.0f", value);
    } else {
        std::snprintf(number, sizeof number, "%.2f", value);
        // "1.50" -> "1.5", "128.00" -> "128": fewer digits read faster beside a slider.
        std::string_view trimmed(number);
        while (trimmed.back() == '0') trimmed.remove_suffix(1);
        if (trimmed.back() == '.') trimmed.remove_suffix(1);
        number[trimmed.size()] = '\0';
    }
    return std::string(negative ? "-" : "") + number + " " + kUnits[unit];
}

namespace {

std::string show(double value) {
    if (std::isnan(value)) return "nan";  // not "-nan": the sign of a NaN means nothing to users
    std::ostringstream out;
    out << value;
    return out.str();
}

const ConfigField& field_with_key(std::string_view key) {
    const ConfigField* field = find_config_field(key);
    if (!field) throw std::logic_error("no config field '" + std::string(key) + "'");
    return *field;
}

[[noreturn]] void reject(const ConfigField& field, const std::string& problem) {
    throw Error("invalid " + field.name_in_messages() + ": " + problem, field.key);
}

[[noreturn]] void reject(std::string_view key, const std::string& problem) {
    reject(field_with_key(key), problem);
}

// NaN fails every comparison, so it is outside every range with a bound.
bool in_range(const FieldRange& range, double value) {
    const bool above_min = !range.min || (range.min_inclusive ? value >= *range.min : value > *range.min);
    const bool below_max = !range.max || (range.max_inclusive ? value <= *range.max : value < *range.max);
    return above_min && below_max && (!range.finite || std::isfinite(value));
}

// "at least 1", "in [0, 1)", "a finite number > 0": what "must be" is followed by.
std::string describe(const FieldRange& range, bool integer) {
    if (range.min && range.max)
        return std::string("in ") + (range.min_inclusive ? "[" : "(") + show(*range.min) + ", " +
               show(*range.max) + (range.max_inclusive ? "]" : ")");
    const std::string number = range.finite ? "a finite number " : "";
    if (range.min) {
        if (integer && range.min_inclusive) return "at least " + show(*range.min);
        return number + (range.min_inclusive ? ">= " : "> ") + show(*range.min);
    }
    if (range.max) {
        if (integer && range.max_inclusive) return "at most " + show(*range.max);
        return number + (range.max_inclusive ? "<= " : "< ") + show(*range.max);
    }
    return "a finite number";
}

std::string hint_of(const FieldRange& range) {
    return range.hint.empty() ? "" : " (" + range.hint + ")";
}

template <class Number>
void check_number(const ConfigField& field, const FieldRange& range, Number value) {
    if (in_range(range, static_cast<double>(value))) return;
    constexpr bool integer = std::is_integral_v<Number>;
    const std::string shown = integer ? std::to_string(value) : show(static_cast<double>(value));
    reject(field, "must be " + describe(range, integer) + ", got " + shown + hint_of(range));
}

void check_layer_widths(const ConfigField& field, const FieldRange& range,
                        const std::vector<int64_t>& widths) {
    for (size_t i = 0; i < widths.size(); ++i)
        if (!in_range(range, static_cast<double>(widths[i])))
            reject(field, "hidden layer " + std::to_string(i) + " has width " + std::to_string(widths[i]) +
                              "; every layer needs " + describe(range, true) + " unit" + hint_of(range));
}

void check_range(const ConfigField& field, const FieldRange& range, const RunConfig& c) {
    std::visit(
        [&](const auto& access) {
            using Access = std::decay_t<decltype(access)>;
            if constexpr (std::is_same_v<Access, OptionalRealAccess>) {
                check_number(field, range, access.resolved(c));  // the value the run will use
            } else if constexpr (std::is_same_v<Access, MemberAccess<std::vector<int64_t>>>) {
                check_layer_widths(field, range, access.read(c));
            } else if constexpr (std::is_same_v<Access, MemberAccess<int64_t>> ||
                                 std::is_same_v<Access, MemberAccess<int>> ||
                                 std::is_same_v<Access, MemberAccess<uint64_t>> ||
                                 std::is_same_v<Access, MemberAccess<double>>) {
                check_number(field, range, access.read(c));
            }
            // Switches, text and choices have no range: their type is their domain.
        },
        field.access);
}

bool is_device_syntax(const std::string& device) {
    if (device == "cpu" || device == "cuda") return true;
    constexpr std::string_view prefix = "cuda:";
    if (device.size() <= prefix.size() || device.compare(0, prefix.size(), prefix) != 0)
        return false;
    return std::all_of(device.begin() + prefix.size(), device.end(),
                       [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

}  // namespace

void validate(const RunConfig& c) {
    // Ranges first: the rules below divide by and compare fields already known to be in range.
    for (const ConfigField& field : config_fields())
        if (field.range && field.applies_to(c.model)) check_range(field, *field.range, c);

    // What no single field's range says: formats, and rules between fields, and what the chosen
    // device's backend runs (backend/backend_support.hpp).
    const Backend backend = backend_for_device(c.device);
    if (c.dataset.empty())
        reject("dataset", "it is empty; choose spirals, moons, blobs, sine, fashion-mnist, "
                          "csv:PATH, idx:DIR, kjv or text:PATH");
    const bool text = data::is_text_corpus_spec(c.dataset);
    if (c.model == ModelFamily::gpt && !text)
        reject("dataset", "--model gpt is a language model and trains on text; use --dataset kjv or --dataset "
                          "text:PATH (or --model mlp for '" + c.dataset + "')");
    if (c.model != ModelFamily::gpt && text)
        reject("model", "'" + c.dataset + "' is a text corpus for a language model; use --model gpt");
    if (c.model == ModelFamily::cnn) {
        // Images are what a CNN reads; whether an idx:DIR holds images is known once it is read.
        if (c.dataset != "fashion-mnist" && c.dataset.rfind("idx:", 0) != 0)
            reject("dataset", "--model cnn reads images; use --dataset fashion-mnist or --dataset idx:DIR (or --model "
                              "mlp for '" + c.dataset + "')");
        if (std::string why = unsupported_op(backend, OpKind::conv2d); !why.empty()) reject("device", why);
    }
    // LoRA's fields belong to the GPT, but a rank or an adapters file asked for on another model
    // must not be ignored.
    if (c.model != ModelFamily::gpt && c.lora_rank > 0)
        reject("lora_rank", "LoRA adapts a GPT's attention and MLP layers; use --model gpt or leave out --lora-rank");
    if (c.lora_base == LoraBase::nf4 && !(c.model == ModelFamily::gpt && c.lora_rank > 0))
        reject("lora_base", "a 4-bit base (QLoRA) is LoRA's frozen base; add --model gpt --lora-rank R or leave out "
                            "--lora-base nf4");
    if (c.dora && !(c.model == ModelFamily::gpt && c.lora_rank > 0))
        reject("dora", "DoRA decomposes LoRA's adapted weights; add --model gpt --lora-rank R or leave out --dora");
    if (c.dora && c.lora_base == LoraBase::nf4)
        reject("dora", "DoRA on a 4-bit base (QDoRA) is not supported yet; leave out --dora or --lora-base nf4");
    if (!c.save_adapters.empty() && !(c.model == ModelFamily::gpt && c.lora_rank > 0))
        reject("save_adapters", "there are no adapters to save without LoRA; add --model gpt --lora-rank R or leave "
                                "out --save-adapters");
    if (c.model == ModelFamily::gpt) {
        if (c.preload_device)
            reject("preload_device", "it keeps feature data sets on the GPU; a text corpus is copied per "
                                     "micro-batch, leave it out with --model gpt");
        if (c.lora_rank > 0) {
            try {
                parse_lora_targets(c.lora_targets);
            } catch (const Error& e) {
                reject("lora_targets", e.what());
            }
            if (std::string why = unsupported_op(backend, OpKind::lora_linear); !why.empty()) reject("lora_rank", why);
            // Every target maps n_embd channels to 1, 3 or 4 times as many or back, so n_embd is
            // the largest rank its update B A can have: a higher rank only adds parameters.
            if (c.lora_rank > c.n_embd)
                reject("lora_rank", "rank " + std::to_string(c.lora_rank) + " is more than the adapted matrices can use: "
                                    "each has --n-embd " + std::to_string(c.n_embd) + " channels on one side, which bounds "
                                    "the rank of its update; use --lora-rank " + std::to_string(c.n_embd) + " or less");
        }
        if (c.n_embd % c.n_head != 0)
            reject("n_head", std::to_string(c.n_head) + " heads do not divide --n-embd " + std::to_string(c.n_embd) +
                                 " (each head gets n_embd / n_head channels); e.g. --n-embd " +
                                 std::to_string((c.n_embd / c.n_head + 1) * c.n_head) + " or --n-head " +
                                 std::to_string(std::max<int64_t>(1, c.n_head / 2)));
    }

    if (c.step_size > c.batch_size)
        throw Error("step_size (" + std::to_string(c.step_size) + ") is larger than batch_size (" +
                        std::to_string(c.batch_size) +
                        "): each micro-batch needs at least one sample; lower --step-size or raise "
                        "--batch-size",
                    "step_size");

    if (c.pipeline_stages > 1) {
        // A stage holds at least one unit the model can be cut between (model/pipeline_stages.hpp).
        const int64_t units = c.model == ModelFamily::gpt ? c.n_layer
                              : c.model == ModelFamily::cnn ? static_cast<int64_t>(c.channels.size() + c.hidden.size()) + 1
                                                            : static_cast<int64_t>(c.hidden.size()) + 1;
        const std::string unit = c.model == ModelFamily::gpt ? "blocks (--n-layer)" : "layers";
        if (c.pipeline_stages > units)
            reject("pipeline_stages", std::to_string(c.pipeline_stages) + " stages are more than the model's " +
                                          std::to_string(units) + " " + unit + ", and each stage holds at least one: use "
                                          "--pipeline-stages " + std::to_string(units) + " or less, or a deeper model");
        if (std::string why = unsupported_feature(backend, TrainingFeature::pipeline_stages); !why.empty())
            reject("pipeline_stages", why);
        if (c.processes % c.pipeline_stages != 0)
            reject("pipeline_stages", "each of the " + std::to_string(c.pipeline_stages) +
                                          " stages runs in a process of its own: --processes " +
                                          std::to_string(c.processes) + " must be a multiple of it (e.g. --processes " +
                                          std::to_string(c.pipeline_stages) + ")");
    }

    if (c.processes > 1) {
        if (std::string why = unsupported_feature(backend, TrainingFeature::several_processes); !why.empty())
            reject("processes", why);
        if (c.batch_size < data_parallel_processes(c) * c.step_size)
            throw Error("batch_size (" + std::to_string(c.batch_size) + ") is smaller than processes x step_size (" +
                            std::to_string(data_parallel_processes(c)) + " x " + std::to_string(c.step_size) +
                            "): every process needs at least one sample per micro-batch; raise --batch-size or "
                            "lower --step-size or --processes",
                        "processes");
    }

    if (c.zero > 0)
        if (std::string why = unsupported_feature(backend, TrainingFeature::zero); !why.empty()) reject("zero", why);

    // torch.optim.SGD's rule: Nesterov momentum needs momentum and no dampening.
    const OptimizerConfig& o = c.optimizer;
    if (o.kind == OptimizerKind::sgd && o.nesterov && (o.momentum <= 0.0 || o.dampening != 0.0))
        reject("optimizer.nesterov", "Nesterov momentum requires --momentum > 0 and optimizer.dampening 0, got "
                                     "momentum " + show(o.momentum) + " and dampening " + show(o.dampening));

    if (!is_device_syntax(c.device))
        reject("device", "unknown device '" + c.device + "', expected cpu, cuda or cuda:N");
    if (c.auto_fit && c.memory_limit_bytes == 0)
        reject("auto_fit", "it needs a memory budget to fit into; add --memory-limit (e.g. "
                           "--memory-limit 512MiB)");
    if (c.checkpoint_every > 0 && c.checkpoint_dir.empty())
        reject("checkpoint_every", "checkpoints need a folder; add --checkpoint-dir DIR");
}

}  // namespace trainbench
