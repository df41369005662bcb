#include "trainbench/technique_comparison.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "backend/backend_support.hpp"
#include "model/pipeline_stages.hpp"
#include "trainbench/error.hpp"
#include "trainbench/process_runs.hpp"
#include "trainbench/processes.hpp"
#include "trainbench/trainer.hpp"

namespace trainbench {

std::string add_process_rows(ComparisonOptions& options, const std::string& cli_program, const RunConfig& base) {
    std::string why = unsupported_feature(backend_for_device(base.device), TrainingFeature::several_processes).empty()
                          ? several_processes_unavailable(2)
                          : "the CUDA engine trains in one process only for now (compare with --device cpu to measure them)";
    if (!why.empty()) return "the rows of several processes are left out: " + why;
    for (Technique technique : multi_process_techniques()) options.techniques.push_back(technique);
    options.run_processes = [cli_program](const RunConfig& config, const Dataset& data, const Observer& observer,
                                          const std::atomic<bool>* stop) {
        return run_in_processes(cli_program, config, data, observer, stop);
    };
    return {};
}

// Sized on the 2-core reference machine: a default update (Fashion-MNIST, 784-256x4-10, batch
// 128, Adam, fp32) takes about 4 ms there when idle and the slowest variants (batch x2,
// step_size x4) about twice that; the whole default comparison took 10 s at 60 updates, so 120
// updates leave room for cores shared with other jobs (3-5x slower) inside 2 minutes while
// giving the medians enough samples.
int64_t default_comparison_steps() { return 120; }

// Four hidden layers rather than two: with two, checkpointing has no layer input it can drop,
// and the default table would show a technique that cannot act.
RunConfig default_comparison_config() {
    RunConfig config;
    config.dataset = "fashion-mnist";
    config.hidden = {256, 256, 256, 256};
    config.batch_size = 128;
    config.step_size = 2;
    config.max_steps = default_comparison_steps();
    return config;
}

namespace {

std::string arrow(const std::string& what, const std::string& from, const std::string& to) {
    return what + " " + from + " -> " + to;
}

std::string on_off(bool on) { return on ? "on" : "off"; }

double percent_change(double value, double reference) {
    if (!(reference > 0.0) || !std::isfinite(value)) return std::numeric_limits<double>::quiet_NaN();
    return 100.0 * (value - reference) / reference;
}

// The configuration a comparison run uses: no files written, and enough epochs that every run
// stops at exactly `steps` updates whatever its batch size.
RunConfig comparison_base(const RunConfig& base, int64_t steps) {
    RunConfig config = base;
    config.metrics_out.clear();
    config.save_weights.clear();
    config.save_adapters.clear();
    config.checkpoint_every = 0;
    config.checkpoint_dir.clear();
    config.resume_dir.clear();
    config.max_steps = steps;
    config.epochs = std::max<int64_t>(config.epochs, steps);
    return config;
}

struct RunMeasurements {
    std::vector<double> update_ms;
    std::vector<double> losses;
    int64_t peak_memory = 0;
    int64_t peak_activations = 0;
    int64_t peak_rss = 0;
    int64_t batch_samples = 0;
    int64_t tokens_per_sample = 0;
    std::string model_summary;
    double pipeline_bubble = std::numeric_limits<double>::quiet_NaN();  // the last update's, a fraction
};

double median_after(std::vector<double> values, int64_t skip) {
    if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
    if (static_cast<int64_t>(values.size()) > skip) values.erase(values.begin(), values.begin() + skip);
    auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
    std::nth_element(values.begin(), middle, values.end());
    double upper = *middle;
    if (values.size() % 2 == 1) return upper;
    double lower = *std::max_element(values.begin(), middle);
    return 0.5 * (lower + upper);
}

double mean_of_last(const std::vector<double>& values, size_t count) {
    if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
    size_t n = std::min(count, values.size());
    double sum = 0.0;
    for (size_t i = values.size() - n; i < values.size(); ++i) sum += values[i];
    return sum / static_cast<double>(n);
}

RunResult run_measured(const RunConfig& config, const std::atomic<bool>* stop,
                       const std::shared_ptr<const Dataset>& data, RunMeasurements& out,
                       const ComparisonOptions& options) {
    out = {};
    out.update_ms.reserve(static_cast<size_t>(std::max<int64_t>(config.max_steps, 1)));
    out.losses.reserve(out.update_ms.capacity());
    Observer observer;
    observer.on_start = [&out](const RunPlan& plan) {
        out.model_summary = plan.model_summary;
        out.batch_samples = plan.global_batch;
        out.tokens_per_sample = plan.tokens_per_sample;
    };
    observer.on_update = [&out](const StepMetrics& m) {
        out.update_ms.push_back(m.update_ms);
        out.losses.push_back(m.loss);
        out.peak_memory = std::max(out.peak_memory, m.memory.reserved_peak);
        out.peak_activations =
            std::max(out.peak_activations, m.memory.peak_bytes(MemoryCategory::activations));
        out.peak_rss = std::max(out.peak_rss, m.rss_bytes);
        if (!m.pipeline_stages.empty()) {
            double idle = 0.0;
            for (const PipelineStageMetrics& stage : m.pipeline_stages) idle += stage.idle_fraction();
            out.pipeline_bubble = idle / static_cast<double>(m.pipeline_stages.size());
        }
    };
    if (config.processes == 1) return train(config, observer, stop, data);
    if (!options.run_processes)
        throw Error("runs " + std::to_string(config.processes) +
                    " processes, which only trainbench-cli compare starts (with mpirun)");
    return options.run_processes(config, *data, observer, stop);
}

std::string csv_field(const std::string& text) {
    if (text.find_first_of(",\"\n") == std::string::npos) return text;
    std::string quoted = "\"";
    for (char c : text) {
        if (c == '"') quoted += '"';
        quoted += c;
    }
    return quoted + "\"";
}

std::string number(double value, const char* format = "%.9g") {
    if (std::isnan(value)) return "";
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, format, value);
    return buffer;
}

std::string signed_percent(double value) {
    if (std::isnan(value)) return "";
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%+.1f%%", value);
    return buffer;
}

// How a row changes the baseline: writes the variant and returns the change in words.
using ApplyTechnique = std::string (*)(const RunConfig& base, RunConfig& variant, const ComparisonOptions& options);

// One row of the technique table: what it is called, what the guides claim it buys, whether it
// runs in several processes or adapts a GPT only, and how it changes the baseline.
struct TechniqueEntry {
    Technique technique;
    const char* name;
    TechniqueClaim claim;
    bool several_processes = false;
    bool gpt_only = false;  // the PEFT rows: adapters on a GPT's attention and MLP layers
    ApplyTechnique apply;
};

// The rows of several processes: the one-process baseline on 2, the baseline's threads shared
// among them (0 already divides the cores).
std::string on_two_processes(const RunConfig& base, RunConfig& variant, const std::string& name) {
    if (base.processes != 1)
        throw Error(name + ": the baseline already runs " + std::to_string(base.processes) +
                    " processes; compare from --processes 1");
    variant.processes = 2;
    if (base.threads > 1) variant.threads = static_cast<int>(base.threads / variant.processes);
    return arrow("processes", "1", "2");
}

std::string data_parallel_rows(const RunConfig& base, RunConfig& variant, int zero, const char* name) {
    const std::string processes = on_two_processes(base, variant, name);
    variant.zero = zero;
    validate(variant);
    return processes + (zero > 0 ? " + zero 0 -> " + std::to_string(zero) : std::string()) +
           " (same global batch; memory per process)";
}

std::string mixed_precision_row(const RunConfig& base, RunConfig& variant, Precision sixteen) {
    variant.precision = base.precision == sixteen ? Precision::fp32 : sixteen;
    return arrow("precision", to_string(base.precision), to_string(variant.precision));
}

// In table order: `compare` and the app's "Measure techniques" list the rows so. The claims are
// the guide's (issue 4's table); the rows it does not list say where theirs come from.
const std::vector<TechniqueEntry>& technique_table() {
    using Options = ComparisonOptions;
    static const std::vector<TechniqueEntry> table{
        {Technique::baseline, "baseline", {"", ""}, false, false,
         [](const RunConfig&, RunConfig&, const Options&) { return std::string("as configured"); }},
        {Technique::batch_size, "batch size", {"yes", "yes"}, false, false,
         [](const RunConfig& base, RunConfig& variant, const Options&) {
             variant.batch_size = base.batch_size * 2;
             return arrow("batch_size", std::to_string(base.batch_size), std::to_string(variant.batch_size));
         }},
        {Technique::gradient_accumulation, "gradient accumulation", {"no", "yes"}, false, false,
         [](const RunConfig& base, RunConfig& variant, const Options&) {
             variant.step_size = std::min(base.step_size * 4, base.batch_size);
             if (variant.step_size == base.step_size)
                 throw Error("gradient accumulation: step_size " + std::to_string(base.step_size) +
                             " already equals batch_size; use a larger --batch-size to compare");
             return arrow("step_size", std::to_string(base.step_size), std::to_string(variant.step_size)) +
                    " (same global batch " + std::to_string(base.batch_size) + ")";
         }},
        {Technique::gradient_checkpointing, "gradient checkpointing", {"no", "yes"}, false, false,
         [](const RunConfig& base, RunConfig& variant, const Options&) {
             variant.gradient_checkpointing = !base.gradient_checkpointing;
             return arrow("gradient_checkpointing", on_off(base.gradient_checkpointing),
                          on_off(variant.gradient_checkpointing));
         }},
        {Technique::mixed_precision, "mixed precision (bf16)", {"yes", "maybe"}, false, false,
         [](const RunConfig& base, RunConfig& variant, const Options&) {
             return mixed_precision_row(base, variant, Precision::bf16);
         }},
        {Technique::mixed_precision_fp16, "mixed precision (fp16)", {"yes", "maybe"}, false, false,
         [](const RunConfig& base, RunConfig& variant, const Options&) {
             return mixed_precision_row(base, variant, Precision::fp16);
         }},
        {Technique::empty_cache, "empty cache every N steps", {"no (~10% slower)", "yes"}, false, false,
         [](const RunConfig& base, RunConfig& variant, const Options& options) {
             variant.empty_cache_steps = base.empty_cache_steps == 0 ? options.empty_cache_steps : 0;
             return variant.empty_cache_steps > 0
                        ? "empty cache every " + std::to_string(variant.empty_cache_steps) +
                              (variant.empty_cache_steps == 1 ? " update" : " updates")
                        : "empty cache never (baseline every " + std::to_string(base.empty_cache_steps) + ")";
         }},
        {Technique::optimizer_choice, "optimizer choice", {"yes", "yes"}, false, false,
         [](const RunConfig& base, RunConfig& variant, const Options&) {
             variant.optimizer.kind = base.optimizer.kind == OptimizerKind::adam ? OptimizerKind::sgd : OptimizerKind::adam;
             return arrow("optimizer", to_string(base.optimizer.kind), to_string(variant.optimizer.kind));
         }},
        {Technique::data_preloading, "data preloading", {"yes", "no"}, false, false,
         [](const RunConfig& base, RunConfig& variant, const Options&) {
             variant.prefetch = base.prefetch == 0 ? 2 : 0;
             return arrow("prefetch", std::to_string(base.prefetch), std::to_string(variant.prefetch));
         }},
        // torch.compile and PEFT as Hugging Face's single-GPU training guide lists them.
        {Technique::fused_kernels, "fused kernels (torch.compile)", {"yes", "no"}, false, false,
         [](const RunConfig& base, RunConfig& variant, const Options&) {
             variant.fused = base.fused == FusedKernels::on ? FusedKernels::off : FusedKernels::on;
             validate(variant);
             return arrow("fused", to_string(base.fused), to_string(variant.fused));
         }},
        {Technique::peft_lora, "PEFT (LoRA)", {"no", "yes"}, false, true,
         [](const RunConfig& base, RunConfig& variant, const Options&) {
             variant.lora_rank = base.lora_rank == 0 ? 8 : 0;
             validate(variant);
             return arrow("lora_rank", std::to_string(base.lora_rank), std::to_string(variant.lora_rank)) +
                    (variant.lora_rank > 0 ? " (base frozen, adapters on " + variant.lora_targets + ")" : "");
         }},
        // The QLoRA paper: the 4-bit base saves memory; each product dequantizes it first.
        {Technique::peft_qlora, "PEFT (QLoRA, 4-bit base)", {"no (slower)", "yes"}, false, true,
         [](const RunConfig& base, RunConfig& variant, const Options&) {
             // LoRA at the baseline's rank (8 without one) with the base in 4 bits, or back in
             // full where the baseline already quantizes it.
             const bool quantized = base.lora_rank > 0 && base.lora_base == LoraBase::nf4;
             variant.lora_rank = base.lora_rank > 0 ? base.lora_rank : 8;
             variant.lora_base = quantized ? LoraBase::full : LoraBase::nf4;
             validate(variant);
             return (base.lora_rank == 0 ? arrow("lora_rank", "0", std::to_string(variant.lora_rank)) + ", " : "") +
                    arrow("lora_base", to_string(base.lora_base), to_string(variant.lora_base)) +
                    (quantized ? "" : " (base frozen in NF4, adapters on " + variant.lora_targets + ")");
         }},
        // The DoRA paper: better accuracy at low rank, slower and more memory than LoRA.
        {Technique::peft_dora, "PEFT (DoRA)", {"no (slower)", "yes"}, false, true,
         [](const RunConfig& base, RunConfig& variant, const Options&) {
             // LoRA at the baseline's rank (8 without one) as DoRA, or plain LoRA where the
             // baseline already is DoRA; a 4-bit base is left in full (no QDoRA).
             variant.lora_rank = base.lora_rank > 0 ? base.lora_rank : 8;
             variant.dora = !(base.lora_rank > 0 && base.dora);
             if (variant.dora) variant.lora_base = LoraBase::full;
             validate(variant);
             return (base.lora_rank == 0 ? arrow("lora_rank", "0", std::to_string(variant.lora_rank)) + ", " : "") +
                    arrow("dora", on_off(base.dora && base.lora_rank > 0), on_off(variant.dora)) +
                    (base.lora_base != variant.lora_base ? ", lora_base nf4 -> full" : "");
         }},
        // Not in the guide's table: more workers on the same global batch.
        {Technique::data_parallel, "data parallelism", {"yes", "no"}, true, false,
         [](const RunConfig& base, RunConfig& variant, const Options&) {
             return data_parallel_rows(base, variant, 0, "data parallelism");
         }},
        {Technique::zero_1, "DeepSpeed ZeRO-1", {"no", "yes"}, true, false,
         [](const RunConfig& base, RunConfig& variant, const Options&) {
             return data_parallel_rows(base, variant, 1, "DeepSpeed ZeRO-1");
         }},
        {Technique::zero_2, "DeepSpeed ZeRO-2", {"no", "yes"}, true, false,
         [](const RunConfig& base, RunConfig& variant, const Options&) {
             return data_parallel_rows(base, variant, 2, "DeepSpeed ZeRO-2");
         }},
        // The guide: for models too large for one device; its stages wait for each other.
        {Technique::pipeline, "model parallelism (pipeline)", {"no (bubble)", "yes (per process)"}, true, false,
         [](const RunConfig& base, RunConfig& variant, const Options&) {
             on_two_processes(base, variant, "model parallelism (pipeline)");
             variant.pipeline_stages = 2;
             validate(variant);
             return arrow("pipeline_stages", "1", "2") + " (" + to_string(variant.pipeline_schedule) +
                    ", a process each; same global batch; memory of process 0's stage)";
         }},
    };
    return table;
}

const TechniqueEntry& entry(Technique technique) {
    for (const TechniqueEntry& e : technique_table())
        if (e.technique == technique) return e;
    throw Error("internal: technique " + std::to_string(static_cast<int>(technique)) + " is not in the table");
}

std::vector<Technique> techniques_where(bool several_processes) {
    std::vector<Technique> out;
    for (const TechniqueEntry& e : technique_table())
        if (e.several_processes == several_processes) out.push_back(e.technique);
    return out;
}

bool is_gpt_only(Technique technique) { return entry(technique).gpt_only; }

}  // namespace

std::string to_string(Technique technique) { return entry(technique).name; }
TechniqueClaim claimed_effect(Technique technique) { return entry(technique).claim; }
std::vector<Technique> all_techniques() { return techniques_where(false); }
std::vector<Technique> multi_process_techniques() { return techniques_where(true); }

RunConfig technique_variant(const RunConfig& base, Technique technique, const ComparisonOptions& options,
                            std::string* change) {
    const TechniqueEntry& row = entry(technique);
    if (row.gpt_only && base.model != ModelFamily::gpt)
        throw Error(std::string(row.name) + " adapts a GPT's attention and MLP layers; compare with --model gpt");
    RunConfig variant = base;
    const std::string description = row.apply(base, variant, options);
    if (change) *change = description;
    return variant;
}

std::vector<ComparisonRow> compare_techniques(const RunConfig& base_config,
                                              const ComparisonOptions& options,
                                              const ComparisonObserver& observer,
                                              const std::atomic<bool>* stop,
                                              std::shared_ptr<const Dataset> data) {
    const int64_t steps = options.max_steps > 0 ? options.max_steps : default_comparison_steps();
    const RunConfig base = comparison_base(base_config, steps);
    validate(base);
    if (!data) data = std::make_shared<const Dataset>(load_dataset(base.dataset, data_options_for(base)));
    auto stopped = [stop] { return stop && stop->load(); };

    std::vector<Technique> techniques = options.techniques;
    // LoRA adapts a GPT's layers: other models have no rows for it.
    if (base.model != ModelFamily::gpt)
        std::erase_if(techniques, is_gpt_only);
    // Every change is measured against the baseline, so it always runs, and first.
    techniques.erase(std::remove(techniques.begin(), techniques.end(), Technique::baseline),
                     techniques.end());
    techniques.insert(techniques.begin(), Technique::baseline);
    const int total = static_cast<int>(techniques.size());

    RunMeasurements measured;
    if (options.warm_start) {
        RunConfig warm = base;
        warm.max_steps = std::min<int64_t>(steps, 3);
        run_measured(warm, stop, data, measured, options);
    }

    std::vector<ComparisonRow> rows;
    for (int index = 0; index < total && !stopped(); ++index) {
        ComparisonRow row;
        row.technique = techniques[index];
        row.claim = claimed_effect(row.technique);
        try {
            row.config = technique_variant(base, row.technique, options, &row.change);
        } catch (const Error& e) {
            row.config = base;
            row.error = e.what();
            rows.push_back(row);
            if (observer.on_run_end) observer.on_run_end(index, total, rows.back());
            continue;
        }
        if (observer.on_run_start) observer.on_run_start(index, total, row);
        try {
            RunResult result = run_measured(row.config, stop, data, measured, options);
            row.ok = result.reason == StopReason::completed || result.reason == StopReason::max_steps;
            if (result.reason == StopReason::stopped) row.error = "stopped before it finished";
            else if (!row.ok) row.error = result.message.empty() ? to_string(result.reason) : result.message;
        } catch (const Error& e) {
            if (row.technique == Technique::baseline) throw;
            row.error = e.what();
        }
        row.model_summary = measured.model_summary;
        row.updates = static_cast<int64_t>(measured.update_ms.size());
        row.samples_per_update = measured.batch_samples;
        row.tokens_per_sample = measured.tokens_per_sample;
        row.median_update_ms = median_after(measured.update_ms, options.warmup_updates);
        row.samples_per_second = row.median_update_ms > 0.0
                                     ? 1000.0 * static_cast<double>(row.samples_per_update) / row.median_update_ms
                                     : std::numeric_limits<double>::quiet_NaN();
        row.peak_memory_bytes = measured.peak_memory;
        row.peak_activation_bytes = measured.peak_activations;
        row.peak_rss_bytes = measured.peak_rss;
        row.final_loss = mean_of_last(measured.losses, 10);
        row.pipeline_bubble_pct = 100.0 * measured.pipeline_bubble;
        rows.push_back(row);
        if (observer.on_run_end) observer.on_run_end(index, total, rows.back());
    }

    const ComparisonRow* baseline = nullptr;
    for (const auto& row : rows)
        if (row.technique == Technique::baseline && row.ok) baseline = &row;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (auto& row : rows) {
        bool comparable = baseline && row.ok && row.technique != Technique::baseline;
        row.update_time_change_pct =
            comparable ? percent_change(row.median_update_ms, baseline->median_update_ms) : nan;
        row.throughput_change_pct =
            comparable ? percent_change(row.samples_per_second, baseline->samples_per_second) : nan;
        row.peak_memory_change_pct =
            comparable ? percent_change(static_cast<double>(row.peak_memory_bytes),
                                        static_cast<double>(baseline->peak_memory_bytes))
                       : nan;
    }
    return rows;
}

std::string ComparisonRow::change_measured() const {
    if (std::isnan(pipeline_bubble_pct)) return change;
    char bubble[96];
    std::snprintf(bubble, sizeof bubble, "; bubble %.1f%% measured, (P-1)/(m+P-1) = %.1f%%", pipeline_bubble_pct,
                  100.0 * gpipe_bubble_fraction(static_cast<int>(config.pipeline_stages), config.step_size));
    return change + bubble;
}

std::string comparison_to_markdown(const std::vector<ComparisonRow>& rows) {
    std::ostringstream out;
    if (!rows.empty()) {
        const ComparisonRow& first = rows.front();
        out << "Measured on " << first.config.dataset << ", "
            << first.model_summary << ", device " << first.config.device << ", "
            << first.config.max_steps << " updates per run (median update time after the first "
            << "updates; peak memory = the engine allocator's largest total held, cache included)."
            << "\n\n";
    }
    // A language model's throughput reads in tokens (samples x context length).
    const bool tokens = !rows.empty() && rows.front().tokens_per_sample > 0;
    out << "| technique | change | claimed: faster? | claimed: less memory? | update time (ms) "
           "| update time change | "
        << (tokens ? "tokens/s" : "samples/s")
        << " | throughput change | peak memory | "
           "peak memory change | final loss |\n";
    out << "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
    for (const auto& row : rows) {
        out << "| " << to_string(row.technique) << " | " << row.change_measured() << " | " << row.claim.faster
            << " | " << row.claim.less_memory << " | ";
        if (!row.ok) {
            out << "failed: " << row.error << " | | | | | | |\n";
            continue;
        }
        out << number(row.median_update_ms, "%.3f") << " | " << signed_percent(row.update_time_change_pct)
            << " | " << number(tokens ? row.tokens_per_second() : row.samples_per_second, "%.0f") << " | "
            << signed_percent(row.throughput_change_pct) << " | " << format_bytes(row.peak_memory_bytes)
            << " | " << signed_percent(row.peak_memory_change_pct) << " | "
            << number(row.final_loss, "%.4f") << " |\n";
    }
    return out.str();
}

std::string comparison_to_csv(const std::vector<ComparisonRow>& rows) {
    std::ostringstream out;
    out << "technique,change,claimed_faster,claimed_less_memory,ok,error,dataset,model,device,"
           "precision,batch_size,step_size,updates,median_update_ms,samples_per_second,"
           "peak_memory_bytes,peak_activation_bytes,peak_rss_bytes,final_loss,"
           "update_time_change_pct,throughput_change_pct,peak_memory_change_pct,tokens_per_second,"
           "pipeline_bubble_pct\n";
    for (const auto& row : rows) {
        out << csv_field(to_string(row.technique)) << ',' << csv_field(row.change) << ','
            << csv_field(row.claim.faster) << ',' << csv_field(row.claim.less_memory) << ','
            << (row.ok ? 1 : 0) << ',' << csv_field(row.error) << ',' << csv_field(row.config.dataset)
            << ',' << csv_field(row.model_summary) << ',' << csv_field(row.config.device) << ','
            << to_string(row.config.precision) << ',' << row.config.batch_size << ','
            << row.config.step_size << ',' << row.updates << ',' << number(row.median_update_ms) << ','
            << number(row.samples_per_second) << ',' << row.peak_memory_bytes << ','
            << row.peak_activation_bytes << ',' << row.peak_rss_bytes << ',' << number(row.final_loss)
            << ',' << number(row.update_time_change_pct) << ',' << number(row.throughput_change_pct)
            << ',' << number(row.peak_memory_change_pct) << ','
            << (row.tokens_per_sample > 0 ? number(row.tokens_per_second()) : std::string()) << ','
            << number(row.pipeline_bubble_pct) << '\n';
    }
    return out.str();
}

}  // namespace trainbench
