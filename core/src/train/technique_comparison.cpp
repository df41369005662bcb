#include "trainbench/technique_comparison.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "model/pipeline_stages.hpp"
#include "trainbench/error.hpp"
#include "trainbench/process_runs.hpp"
#include "trainbench/processes.hpp"
#include "trainbench/trainer.hpp"

namespace trainbench {

std::string to_string(Technique technique) {
    switch (technique) {
        case Technique::baseline: return "baseline";
        case Technique::batch_size: return "batch size";
        case Technique::gradient_accumulation: return "gradient accumulation";
        case Technique::gradient_checkpointing: return "gradient checkpointing";
        case Technique::mixed_precision: return "mixed precision (bf16)";
        case Technique::mixed_precision_fp16: return "mixed precision (fp16)";
        case Technique::empty_cache: return "empty cache every N steps";
        case Technique::optimizer_choice: return "optimizer choice";
        case Technique::data_preloading: return "data preloading";
        case Technique::fused_kernels: return "fused kernels (torch.compile)";
        case Technique::peft_lora: return "PEFT (LoRA)";
        case Technique::peft_qlora: return "PEFT (QLoRA, 4-bit base)";
        case Technique::peft_dora: return "PEFT (DoRA)";
        case Technique::data_parallel: return "data parallelism";
        case Technique::zero_1: return "DeepSpeed ZeRO-1";
        case Technique::zero_2: return "DeepSpeed ZeRO-2";
        case Technique::pipeline: return "model parallelism (pipeline)";
    }
    return "unknown";
}

std::vector<Technique> all_techniques() {
    return {Technique::baseline,
            Technique::batch_size,
            Technique::gradient_accumulation,
            Technique::gradient_checkpointing,
            Technique::mixed_precision,
            Technique::mixed_precision_fp16,
            Technique::empty_cache,
            Technique::optimizer_choice,
            Technique::data_preloading,
            Technique::fused_kernels,
            Technique::peft_lora,
            Technique::peft_qlora,
            Technique::peft_dora};
}

std::vector<Technique> multi_process_techniques() {
    return {Technique::data_parallel, Technique::zero_1, Technique::zero_2, Technique::pipeline};
}

void add_process_rows(ComparisonOptions& options, const std::string& cli_program) {
    if (!several_processes_unavailable(2).empty()) return;
    for (Technique technique : multi_process_techniques()) options.techniques.push_back(technique);
    options.run_processes = [cli_program](const RunConfig& config, const Dataset& data, const Observer& observer,
                                          const std::atomic<bool>* stop) {
        return run_in_processes(cli_program, config, data, observer, stop);
    };
}

TechniqueClaim claimed_effect(Technique technique) {
    switch (technique) {
        case Technique::baseline: return {"", ""};
        case Technique::batch_size: return {"yes", "yes"};
        case Technique::gradient_accumulation: return {"no", "yes"};
        case Technique::gradient_checkpointing: return {"no", "yes"};
        case Technique::mixed_precision:
        case Technique::mixed_precision_fp16: return {"yes", "maybe"};
        case Technique::empty_cache: return {"no (~10% slower)", "yes"};
        case Technique::optimizer_choice: return {"yes", "yes"};
        case Technique::data_preloading: return {"yes", "no"};
        // torch.compile and PEFT as Hugging Face's single-GPU training guide lists them.
        case Technique::fused_kernels: return {"yes", "no"};
        case Technique::peft_lora: return {"no", "yes"};
        // The QLoRA paper: the 4-bit base saves memory; each product dequantizes it first.
        case Technique::peft_qlora: return {"no (slower)", "yes"};
        // The DoRA paper: better accuracy at low rank, slower and more memory than LoRA.
        case Technique::peft_dora: return {"no (slower)", "yes"};
        // Not in the guide's table: more workers on the same global batch.
        case Technique::data_parallel: return {"yes", "no"};
        case Technique::zero_1:
        case Technique::zero_2: return {"no", "yes"};
        // The guide: for models too large for one device; its stages wait for each other.
        case Technique::pipeline: return {"no (bubble)", "yes (per process)"};
    }
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

// The rows of several processes: the one-process baseline on 2, the baseline's threads shared
// among them (0 already divides the cores).
RunConfig on_two_processes(const RunConfig& base, Technique technique) {
    if (base.processes != 1)
        throw Error(to_string(technique) + ": the baseline already runs " + std::to_string(base.processes) +
                    " processes; compare from --processes 1");
    RunConfig variant = base;
    variant.processes = 2;
    if (base.threads > 1) variant.threads = static_cast<int>(base.threads / variant.processes);
    return variant;
}

// The rows that fine-tune a GPT with adapters: other models have none.
bool is_peft(Technique technique) {
    return technique == Technique::peft_lora || technique == Technique::peft_qlora || technique == Technique::peft_dora;
}

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

}  // namespace

RunConfig technique_variant(const RunConfig& base, Technique technique,
                            const ComparisonOptions& options, std::string* change) {
    if (is_peft(technique) && base.model != ModelFamily::gpt)
        throw Error(to_string(technique) + " adapts a GPT's attention and MLP layers; compare with --model gpt");
    RunConfig variant = base;
    std::string description;
    switch (technique) {
        case Technique::baseline:
            description = "as configured";
            break;
        case Technique::batch_size:
            variant.batch_size = base.batch_size * 2;
            description = arrow("batch_size", std::to_string(base.batch_size),
                                std::to_string(variant.batch_size));
            break;
        case Technique::gradient_accumulation: {
            variant.step_size = std::min(base.step_size * 4, base.batch_size);
            if (variant.step_size == base.step_size)
                throw Error("gradient accumulation: step_size " + std::to_string(base.step_size) +
                            " already equals batch_size; use a larger --batch-size to compare");
            description = arrow("step_size", std::to_string(base.step_size),
                                std::to_string(variant.step_size)) +
                          " (same global batch " + std::to_string(base.batch_size) + ")";
            break;
        }
        case Technique::gradient_checkpointing:
            variant.gradient_checkpointing = !base.gradient_checkpointing;
            description = arrow("gradient_checkpointing", on_off(base.gradient_checkpointing),
                                on_off(variant.gradient_checkpointing));
            break;
        case Technique::mixed_precision:
        case Technique::mixed_precision_fp16: {
            const Precision sixteen = technique == Technique::mixed_precision ? Precision::bf16 : Precision::fp16;
            variant.precision = base.precision == sixteen ? Precision::fp32 : sixteen;
            description = arrow("precision", to_string(base.precision), to_string(variant.precision));
            break;
        }
        case Technique::empty_cache:
            variant.empty_cache_steps = base.empty_cache_steps == 0 ? options.empty_cache_steps : 0;
            description = variant.empty_cache_steps > 0
                              ? "empty cache every " + std::to_string(variant.empty_cache_steps) +
                                    (variant.empty_cache_steps == 1 ? " update" : " updates")
                              : "empty cache never (baseline every " +
                                    std::to_string(base.empty_cache_steps) + ")";
            break;
        case Technique::optimizer_choice:
            variant.optimizer.kind = base.optimizer.kind == OptimizerKind::adam ? OptimizerKind::sgd
                                                                              : OptimizerKind::adam;
            description = arrow("optimizer", to_string(base.optimizer.kind),
                                to_string(variant.optimizer.kind));
            break;
        case Technique::data_preloading:
            variant.prefetch = base.prefetch == 0 ? 2 : 0;
            description = arrow("prefetch", std::to_string(base.prefetch), std::to_string(variant.prefetch));
            break;
        case Technique::fused_kernels:
            variant.fused = base.fused == FusedKernels::on ? FusedKernels::off : FusedKernels::on;
            description = arrow("fused", to_string(base.fused), to_string(variant.fused));
            validate(variant);
            break;
        case Technique::peft_lora:
            variant.lora_rank = base.lora_rank == 0 ? 8 : 0;
            description = arrow("lora_rank", std::to_string(base.lora_rank), std::to_string(variant.lora_rank)) +
                          (variant.lora_rank > 0 ? " (base frozen, adapters on " + variant.lora_targets + ")" : "");
            validate(variant);
            break;
        case Technique::peft_qlora: {
            // LoRA at the baseline's rank (8 without one) with the base in 4 bits, or back in full
            // where the baseline already quantizes it.
            const bool quantized = base.lora_rank > 0 && base.lora_base == LoraBase::nf4;
            variant.lora_rank = base.lora_rank > 0 ? base.lora_rank : 8;
            variant.lora_base = quantized ? LoraBase::full : LoraBase::nf4;
            description = (base.lora_rank == 0 ? arrow("lora_rank", "0", std::to_string(variant.lora_rank)) + ", " : "") +
                          arrow("lora_base", to_string(base.lora_base), to_string(variant.lora_base)) +
                          (quantized ? "" : " (base frozen in NF4, adapters on " + variant.lora_targets + ")");
            validate(variant);
            break;
        }
        case Technique::peft_dora: {
            // LoRA at the baseline's rank (8 without one) as DoRA, or plain LoRA where the
            // baseline already is DoRA; a 4-bit base is left in full (no QDoRA).
            variant.lora_rank = base.lora_rank > 0 ? base.lora_rank : 8;
            variant.dora = !(base.lora_rank > 0 && base.dora);
            if (variant.dora) variant.lora_base = LoraBase::full;
            description = (base.lora_rank == 0 ? arrow("lora_rank", "0", std::to_string(variant.lora_rank)) + ", " : "") +
                          arrow("dora", on_off(base.dora && base.lora_rank > 0), on_off(variant.dora)) +
                          (base.lora_base != variant.lora_base ? ", lora_base nf4 -> full" : "");
            validate(variant);
            break;
        }
        case Technique::data_parallel:
        case Technique::zero_1:
        case Technique::zero_2: {
            variant = on_two_processes(base, technique);
            variant.zero = technique == Technique::zero_1 ? 1 : technique == Technique::zero_2 ? 2 : 0;
            description = arrow("processes", "1", "2") +
                          (variant.zero > 0 ? " + zero 0 -> " + std::to_string(variant.zero) : std::string()) +
                          " (same global batch; memory per process)";
            validate(variant);
            break;
        }
        case Technique::pipeline: {
            variant = on_two_processes(base, technique);
            variant.pipeline_stages = 2;
            description = arrow("pipeline_stages", "1", "2") + " (" + to_string(variant.pipeline_schedule) +
                          ", a process each; same global batch; memory of process 0's stage)";
            validate(variant);
            break;
        }
    }
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
        std::erase_if(techniques, is_peft);
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
