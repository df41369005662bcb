// trainbench-cli plan: will this run fit? The planner's bytes by category for the chosen device,
// against a device memory (this machine's, or any size given), without training or touching a
// GPU; with --what-if, the same for each efficiency knob and their combinations.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_exit.hpp"
#include "commands.hpp"
#include "run_flags.hpp"
#include "trainbench/dataset.hpp"
#include "trainbench/error.hpp"
#include "trainbench/memory_fit.hpp"
#include "trainbench/trainer.hpp"

namespace trainbench::cli {

namespace {

struct PlanArguments {
    explicit PlanArguments(CLI::App& command) : flags(command, RunFlags::Scope::plan) {
        command.add_option("--device-memory", device_memory,
                           "memory to plan against, e.g. 24GiB (default: this machine's RAM for --device cpu, "
                           "the GPU's memory for --device cuda)")
            ->group("Plan");
        command.add_flag("--what-if", what_if,
                         "also plan each efficiency knob and their combinations, with the largest micro-batch that fits")
            ->group("Plan");
        command.add_flag("--json", json, "print the plan (and the what-if table) as JSON, bytes as integers")
            ->group("Plan");
        command.footer(
            "Nothing is trained and no GPU is touched: the figures are the bytes TrainBench's engine for the "
            "device would allocate at the peak of an update (its plan, which equals its allocation), per process. "
            "A CUDA plan adds the CUDA context's fixed cost as measured on an H200.");
    }
    RunFlags flags;
    std::string device_memory;
    bool what_if = false;
    bool json = false;
};

constexpr MemoryCategory kShownCategories[] = {MemoryCategory::parameters,      MemoryCategory::master_weights,
                                               MemoryCategory::gradients,       MemoryCategory::optimizer_state,
                                               MemoryCategory::activations,     MemoryCategory::workspace};

// 85.2M, 16.4K, 512
std::string format_count(int64_t n) {
    char text[32];
    if (n >= 1000000) std::snprintf(text, sizeof text, "%.1fM", static_cast<double>(n) / 1e6);
    else if (n >= 1000) std::snprintf(text, sizeof text, "%.1fK", static_cast<double>(n) / 1e3);
    else std::snprintf(text, sizeof text, "%lld", static_cast<long long>(n));
    return text;
}

// "batch 32 = 2 processes x step_size 2 x micro-batch 8"
std::string batch_shape(const RunConfig& config, int64_t micro_batch) {
    std::string text = "batch " + std::to_string(config.batch_size) + " = ";
    if (data_parallel_processes(config) > 1) text += std::to_string(data_parallel_processes(config)) + " processes x ";
    return text + "step_size " + std::to_string(config.step_size) + " x micro-batch " + std::to_string(micro_batch);
}

std::string knobs(const RunConfig& config) {
    std::string text = to_string(config.precision);
    if (config.gradient_checkpointing) text += ", checkpointing";
    if (config.zero > 0) text += ", ZeRO-" + std::to_string(config.zero);
    if (config.pipeline_stages > 1)
        text += ", " + std::to_string(config.pipeline_stages) + " pipeline stages (" + to_string(config.pipeline_schedule) + ")";
    if (config.lora_rank > 0)
        text += std::string(config.dora ? ", DoRA" : config.lora_base == LoraBase::nf4 ? ", QLoRA" : ", LoRA") + " rank " +
                std::to_string(config.lora_rank);
    return text;
}

std::string fitting_micro_batch(const WhatIfRow& row) {
    if (row.largest_fitting_micro_batch == 0) return "none";
    return std::to_string(row.largest_fitting_micro_batch) + " (step_size " + std::to_string(row.step_size_for_largest) + ")";
}

nlohmann::json bytes_json(const BytesByCategory& bytes) {
    nlohmann::json object = nlohmann::json::object();
    for (MemoryCategory c : kShownCategories) object[std::string(to_string(c))] = bytes[static_cast<size_t>(c)];
    return object;
}

nlohmann::json row_json(const WhatIfRow& row, bool judged) {
    nlohmann::json j{{"change", row.change}, {"same_update", row.same_update}};
    if (!row.error.empty()) {
        j["error"] = row.error;
        return j;
    }
    j["micro_batch"] = row.micro_batch;
    j["step_size"] = row.config.step_size;
    j["processes"] = row.config.processes;
    j["per_process_bytes"] = bytes_json(row.bytes);
    j["per_process_total_bytes"] = row.planned_bytes;
    j["needed_bytes"] = row.needed;
    j["fits"] = judged ? nlohmann::json(row.fits) : nlohmann::json();
    j["largest_fitting_micro_batch"] = row.largest_fitting_micro_batch;
    j["step_size_for_largest"] = row.step_size_for_largest;
    j["smallest_same_update"] = row.smallest;
    return j;
}

void print_what_if(const std::vector<WhatIfRow>& rows, bool judged) {
    std::printf("\n| what if | micro-batch | per process | needed | fits | largest micro-batch that fits |\n");
    std::printf("| --- | ---: | ---: | ---: | --- | ---: |\n");
    // Rows the engine cannot run are listed after the table, grouped by the reason.
    std::vector<std::pair<std::string, std::string>> refused;  // reason, changes
    for (const WhatIfRow& row : rows) {
        const std::string name = row.change + (row.smallest ? " (least memory)" : "");
        if (!row.error.empty()) {
            auto same = std::find_if(refused.begin(), refused.end(), [&](const auto& r) { return r.first == row.error; });
            if (same == refused.end()) refused.emplace_back(row.error, row.change);
            else same->second += "; " + row.change;
            continue;
        }
        std::printf("| %s | %lld | %s | %s | %s | %s |\n", name.c_str(), static_cast<long long>(row.micro_batch),
                    format_bytes(row.planned_bytes).c_str(), format_bytes(row.needed).c_str(),
                    judged ? (row.fits ? "yes" : "no") : "?", judged ? fitting_micro_batch(row).c_str() : "?");
    }
    std::printf("\n(least memory): the smallest plan of the rows that train the same update (LoRA trains adapters only).\n");
    for (const auto& [reason, changes] : refused) std::printf("not planned: %s: %s\n", changes.c_str(), reason.c_str());
}

int run_plan(const PlanArguments& arguments) {
    const RunConfig config = arguments.flags.resolve(RunConfig{});
    int64_t device_memory = 0;
    if (!arguments.device_memory.empty()) {
        try {
            device_memory = parse_byte_size(arguments.device_memory);
        } catch (const Error& e) {
            throw UsageError(std::string("--device-memory: ") + e.what());
        }
        if (device_memory <= 0) throw UsageError("--device-memory: the device needs some memory, e.g. 24GiB");
    }
    try {
        validate(config);
    } catch (const Error& e) {
        throw UsageError(e.what());
    }
    const Dataset data = load_dataset(config.dataset, data_options_for(config));
    const RunPlan plan = plan_run(config, data);
    const DeviceBudget budget = device_budget(config, device_memory);
    const bool judged = budget.known();
    const int64_t needed = needed_bytes(config, plan, budget);
    const bool fits = budget.fits(needed);
    const int64_t fitting_step = smallest_step_size_that_fits(config, data, budget);
    std::vector<WhatIfRow> rows;
    // The advice for a plan that does not fit names a row of the table, so it is made then too.
    if (arguments.what_if || (judged && !fits)) rows = what_if_table(config, data, budget);
    const std::string engine = budget.cuda ? "CUDA" : "CPU";

    if (arguments.json) {
        nlohmann::json j{{"model", plan.model_summary},
                         {"parameters", plan.parameter_count},
                         {"trainable_parameters", plan.trainable_parameter_count},
                         {"nf4_parameters", plan.nf4_parameter_count},
                         {"nf4_bytes", plan.nf4_bytes},
                         {"device", config.device},
                         {"engine", engine},
                         {"precision", to_string(config.precision)},
                         {"batch_size", config.batch_size},
                         {"step_size", plan.step_size},
                         {"processes", config.processes},
                         {"micro_batch", plan.micro_batch},
                         {"per_process_bytes", bytes_json(plan.planned_bytes)},
                         {"per_process_total_bytes", plan.planned_total()},
                         {"fixed_bytes", budget.fixed_bytes},
                         {"fixed_source", budget.fixed_bytes > 0 ? kCudaContextSource : ""},
                         {"needed_bytes", needed},
                         {"device_memory_bytes", budget.memory_bytes},
                         {"device_description", budget.description},
                         {"fits", judged ? nlohmann::json(fits) : nlohmann::json()},
                         {"largest_fitting_micro_batch",
                          fitting_step > 0 ? largest_micro_batch(config.batch_size, fitting_step, data_parallel_processes(config)) : 0},
                         {"step_size_for_largest", fitting_step}};
        if (!plan.auto_fit_note.empty()) j["auto_fit"] = plan.auto_fit_note;
        if (plan.activations_without_checkpointing >= 0) {
            j["activations_without_checkpointing_bytes"] = plan.activations_without_checkpointing;
            j["rebuilt_segments"] = plan.rebuilt_segments;
            j["checkpointing_note"] = checkpointing_note(plan);
        }
        if (plan.recomputed_attention_bytes > 0) {
            j["recomputed_attention_bytes"] = plan.recomputed_attention_bytes;
            j["recomputed_attention_note"] = recomputed_attention_note(plan);
        }
        if (!plan.stage_planned_bytes.empty()) {
            j["pipeline_stages"] = nlohmann::json::array();
            for (const BytesByCategory& stage : plan.stage_planned_bytes)
                j["pipeline_stages"].push_back({{"per_process_bytes", bytes_json(stage)}, {"per_process_total_bytes", sum_bytes(stage)}});
        }
        if (judged && !fits) j["advice"] = does_not_fit_advice(config, data, plan, budget, rows);
        if (arguments.what_if) {
            j["what_if"] = nlohmann::json::array();
            for (const WhatIfRow& row : rows) j["what_if"].push_back(row_json(row, judged));
        }
        std::printf("%s\n", j.dump(2).c_str());
        return kExitSuccess;
    }

    std::string parameters = format_count(plan.parameter_count) + " parameters";
    if (plan.trainable_parameter_count < plan.parameter_count)
        parameters += ", " + format_count(plan.trainable_parameter_count) + " trainable";
    parameters += nf4_parameters_note(plan);
    std::printf("plan: %s (%s), %s, %s, on %s\n", plan.model_summary.c_str(), parameters.c_str(),
                batch_shape(config, plan.micro_batch).c_str(), knobs(config).c_str(), config.device.c_str());
    if (!plan.auto_fit_note.empty()) std::printf("%s\n", plan.auto_fit_note.c_str());
    std::printf("nothing was run: the bytes TrainBench's %s engine allocates at the peak of an update%s\n",
                engine.c_str(), config.processes > 1 ? ", per process" : "");
    for (MemoryCategory c : kShownCategories) {
        const int64_t bytes = plan.planned_bytes[static_cast<size_t>(c)];
        if (bytes > 0) std::printf("  %-16s %12s\n", category_label(c).c_str(), format_bytes(bytes).c_str());
    }
    std::printf("  %-16s %12s\n",
                config.pipeline_stages > 1 ? "stage 1 process" : config.processes > 1 ? "per process" : "total",
                format_bytes(plan.planned_total()).c_str());
    // A pipeline's other stages, each in its processes.
    for (size_t s = 1; s < plan.stage_planned_bytes.size(); ++s)
        std::printf("  %-16s %12s\n", ("stage " + std::to_string(s + 1) + " process").c_str(),
                    format_bytes(sum_bytes(plan.stage_planned_bytes[s])).c_str());
    if (!budget.cuda && config.processes > 1)
        std::printf("  %-16s %12s  (all on this machine)\n", (std::to_string(config.processes) + " processes").c_str(),
                    format_bytes(plan.all_processes_total()).c_str());
    if (budget.fixed_bytes > 0)
        std::printf("  %-16s %12s  (%s)\n", "CUDA context", format_bytes(budget.fixed_bytes).c_str(), kCudaContextSource);
    if (budget.fixed_bytes > 0 || (!budget.cuda && config.processes > 1))
        std::printf("  %-16s %12s\n", "needed", format_bytes(needed).c_str());
    if (const std::string note = checkpointing_note(plan); !note.empty()) std::printf("%s\n", note.c_str());
    if (const std::string note = recomputed_attention_note(plan); !note.empty()) std::printf("%s\n", note.c_str());
    std::printf("device: %s%s\n", budget.description.c_str(), device_memory > 0 ? " (--device-memory)" : "");
    if (!judged) {
        std::printf("fits: unknown; give --device-memory (e.g. 24GiB) to check\n");
    } else if (fits) {
        std::printf("fits: %s to spare; the largest micro-batch that fits is %lld (step_size %lld)\n",
                    format_bytes(budget.memory_bytes - needed).c_str(),
                    static_cast<long long>(largest_micro_batch(config.batch_size, fitting_step, data_parallel_processes(config))),
                    static_cast<long long>(fitting_step));
    } else {
        std::printf("does not fit: %s\n", does_not_fit_advice(config, data, plan, budget, rows).c_str());
    }
    if (arguments.what_if) print_what_if(rows, judged);
    return kExitSuccess;
}

}  // namespace

Command add_plan_command(CLI::App& parent) {
    CLI::App* command =
        parent.add_subcommand("plan", "will it fit? the memory a run needs, by category, without running it");
    auto arguments = std::make_shared<PlanArguments>(*command);
    return {command, [arguments] { return run_plan(*arguments); }};
}

}  // namespace trainbench::cli
