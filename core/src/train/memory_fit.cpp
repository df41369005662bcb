#include "trainbench/memory_fit.hpp"

#include <unistd.h>

#include <algorithm>
#include <tuple>
#include <utility>

#include "train/engine_factory.hpp"
#include "trainbench/error.hpp"
#include "trainbench/trainer.hpp"

namespace trainbench {

namespace {

int64_t physical_memory_bytes() {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
}

// The plan's bytes per process, or the reason the configuration cannot run.
struct Planned {
    RunPlan plan;
    std::string error;
};
Planned plan_of(const RunConfig& config, const Dataset& data) {
    Planned planned;
    try {
        planned.plan = plan_run(config, data);
    } catch (const Error& e) {
        planned.error = e.what();
    }
    return planned;
}

// The largest step_size the batch allows (each process's every micro-batch at least one sample):
// the smallest micro-batch.
int64_t largest_step_size(const RunConfig& config) {
    return config.batch_size / std::max<int64_t>(1, data_parallel_processes(config));
}

// The category holding the most of a plan.
MemoryCategory largest_category(const BytesByCategory& bytes) {
    int largest = 0;
    for (int c = 0; c < kMemoryCategoryCount; ++c)
        if (bytes[static_cast<size_t>(c)] > bytes[static_cast<size_t>(largest)]) largest = c;
    return static_cast<MemoryCategory>(largest);
}

std::string category_share(const BytesByCategory& bytes) {
    const MemoryCategory c = largest_category(bytes);
    return "the largest category is " + category_label(c) + ", " + format_bytes(bytes[static_cast<size_t>(c)]) +
           " per process";
}

}  // namespace

DeviceBudget device_budget(const RunConfig& config, int64_t device_memory_bytes) {
    DeviceBudget budget;
    budget.cuda = is_cuda_device(config.device);
    if (budget.cuda) budget.fixed_bytes = kMeasuredCudaContextBytes;
    if (device_memory_bytes > 0) {
        budget.memory_bytes = device_memory_bytes;
        budget.description = std::string(budget.cuda ? "a CUDA GPU" : "a CPU machine") + " with " +
                             format_bytes(device_memory_bytes);
        return budget;
    }
    if (!budget.cuda) {
        budget.memory_bytes = physical_memory_bytes();
        budget.description = "this machine's " + format_bytes(budget.memory_bytes) + " of RAM";
        return budget;
    }
    const std::string wanted = config.device == "cuda" ? "cuda:0" : config.device;
    for (const DeviceInfo& device : available_devices())
        if (device.id == wanted) {
            budget.memory_bytes = device.memory_bytes;
            budget.description = device.id + ", " + device.name + ", " + format_bytes(device.memory_bytes);
            return budget;
        }
    budget.description = "a CUDA GPU of unknown size (this machine has none: give its memory size)";
    return budget;
}

int64_t needed_bytes(const RunConfig&, const RunPlan& plan, const DeviceBudget& budget) {
    return (budget.cuda ? plan.largest_process_total() : plan.all_processes_total()) + budget.fixed_bytes;
}

int64_t smallest_step_size_that_fits(RunConfig config, const Dataset& data, const DeviceBudget& budget) {
    if (!budget.known()) return 0;
    config.memory_limit_bytes = 0;
    config.auto_fit = false;
    auto fits_at = [&](int64_t step) {
        config.step_size = step;
        const Planned planned = plan_of(config, data);
        return planned.error.empty() && budget.fits(needed_bytes(config, planned.plan, budget));
    };
    // A larger step_size never plans more (its micro-batch is no larger), so the smallest that
    // fits is found by bisection between 1 and the largest step_size the batch allows.
    int64_t low = 1, high = largest_step_size(config);
    if (high < 1 || !fits_at(high)) return 0;
    while (low < high) {
        const int64_t middle = low + (high - low) / 2;
        if (fits_at(middle)) high = middle;
        else low = middle + 1;
    }
    return low;
}

std::vector<WhatIfRow> what_if_table(const RunConfig& configured, const Dataset& data, const DeviceBudget& budget) {
    RunConfig base = configured;
    base.memory_limit_bytes = 0;  // the table judges against the device, not a run's budget
    base.auto_fit = false;
    std::vector<std::pair<std::string, RunConfig>> variants{{"as configured", base}};
    auto add = [&](const std::string& change, RunConfig config) { variants.emplace_back(change, std::move(config)); };

    const int64_t data_parallel = std::max<int64_t>(2, base.processes);
    auto with_step = [&](RunConfig c, int64_t factor) {
        c.step_size = base.step_size * factor;
        return c;
    };
    auto with_checkpointing = [](RunConfig c) {
        c.gradient_checkpointing = true;
        return c;
    };
    auto with_bf16 = [](RunConfig c) {
        c.precision = Precision::bf16;
        return c;
    };
    auto with_processes = [&](RunConfig c, int64_t zero) {
        c.processes = data_parallel;
        c.zero = zero;
        return c;
    };
    const std::string dp = std::to_string(data_parallel) + " processes";
    add("step_size x2 (" + std::to_string(base.step_size * 2) + ")", with_step(base, 2));
    add("step_size x4 (" + std::to_string(base.step_size * 4) + ")", with_step(base, 4));
    if (!base.gradient_checkpointing) add("gradient checkpointing", with_checkpointing(base));
    if (base.precision == Precision::fp32) add("bf16 mixed precision", with_bf16(base));
    if (base.processes == 1 || base.zero > 0) add(dp + " (data parallel)", with_processes(base, 0));
    if (base.zero != 1) add(dp + ", ZeRO-1", with_processes(base, 1));
    if (base.zero != 2) add(dp + ", ZeRO-2", with_processes(base, 2));
    if (base.model == ModelFamily::gpt && base.lora_rank == 0) {
        RunConfig lora = base;
        lora.lora_rank = 8;
        add("LoRA rank 8 (adapters only)", lora);
    }
    if (base.model == ModelFamily::gpt && base.lora_base != LoraBase::nf4 && !base.dora) {
        RunConfig qlora = base;
        qlora.lora_rank = base.lora_rank > 0 ? base.lora_rank : 8;
        qlora.lora_base = LoraBase::nf4;
        add("QLoRA rank " + std::to_string(qlora.lora_rank) + " (adapters, 4-bit base)", qlora);
    }
    RunConfig light = with_checkpointing(with_bf16(base));
    add("bf16 + checkpointing", light);
    add("bf16 + checkpointing + step_size x4", with_step(light, 4));
    add("bf16 + checkpointing + " + dp + ", ZeRO-2", with_processes(light, 2));
    if (base.pipeline_stages == 1 && base.processes == 1) {
        RunConfig piped = base;
        piped.pipeline_stages = 2;
        piped.processes = 2;
        add("2 pipeline stages (" + to_string(piped.pipeline_schedule) + ", a process each)", piped);
    }

    // A combination the configuration already has (bf16 + checkpointing on a bf16 run with
    // checkpointing) is an earlier row again.
    auto knobs_of = [](const RunConfig& c) {
        return std::make_tuple(c.step_size, c.gradient_checkpointing, c.precision, c.processes, c.zero, c.lora_rank,
                               c.lora_base, c.pipeline_stages);
    };
    std::vector<WhatIfRow> rows;
    for (size_t v = 0; v < variants.size(); ++v) {
        const auto& [change, config] = variants[v];
        bool repeated = false;
        for (size_t earlier = 0; earlier < v; ++earlier)
            repeated = repeated || knobs_of(variants[earlier].second) == knobs_of(config);
        if (repeated) continue;
        WhatIfRow row;
        row.change = change;
        row.config = config;
        row.same_update = config.lora_rank == configured.lora_rank && config.lora_base == configured.lora_base;
        const Planned planned = plan_of(config, data);
        if (!planned.error.empty()) {
            row.error = planned.error;
            rows.push_back(std::move(row));
            continue;
        }
        // Per process: a pipeline's largest stage.
        row.bytes = planned.plan.planned_bytes;
        for (const BytesByCategory& stage : planned.plan.stage_planned_bytes)
            if (sum_bytes(stage) > sum_bytes(row.bytes)) row.bytes = stage;
        row.planned_bytes = sum_bytes(row.bytes);
        row.needed = needed_bytes(config, planned.plan, budget);
        row.micro_batch = planned.plan.micro_batch;
        row.fits = budget.fits(row.needed);
        row.step_size_for_largest = smallest_step_size_that_fits(config, data, budget);
        if (row.step_size_for_largest > 0)
            row.largest_fitting_micro_batch =
                largest_micro_batch(config.batch_size, row.step_size_for_largest, data_parallel_processes(config));
        rows.push_back(std::move(row));
    }
    WhatIfRow* smallest = nullptr;
    for (WhatIfRow& row : rows)
        if (row.error.empty() && row.same_update && (!smallest || row.needed < smallest->needed)) smallest = &row;
    if (smallest) smallest->smallest = true;
    return rows;
}

std::string does_not_fit_advice(const RunConfig& config, const Dataset& data, const RunPlan& plan,
                                const DeviceBudget& budget, const std::vector<WhatIfRow>& rows) {
    const int64_t needed = needed_bytes(config, plan, budget);
    const std::string line = "needs " + format_bytes(needed) + " of " + format_bytes(budget.memory_bytes) +
                             " (short by " + format_bytes(needed - budget.memory_bytes) + "); " +
                             category_share(plan.planned_bytes);
    for (const WhatIfRow& row : rows)
        if (row.error.empty() && row.fits) return line + "; it fits with " + row.change;
    for (const WhatIfRow& row : rows)
        if (row.error.empty() && row.largest_fitting_micro_batch > 0)
            return line + "; it fits" + (&row == &rows.front() ? std::string() : " with " + row.change) +
                   " at step_size " + std::to_string(row.step_size_for_largest) + " (micro-batch " +
                   std::to_string(row.largest_fitting_micro_batch) + ")";
    // Nothing fits at any micro-batch: what dominates at the smallest, and the least of the rows.
    RunConfig smallest = config;
    smallest.memory_limit_bytes = 0;
    smallest.auto_fit = false;
    smallest.step_size = std::max<int64_t>(1, largest_step_size(config));
    std::string at_smallest;
    const Planned planned_smallest = plan_of(smallest, data);
    if (planned_smallest.error.empty())
        at_smallest = " at micro-batch " + std::to_string(planned_smallest.plan.micro_batch) + " it needs " +
                      format_bytes(needed_bytes(smallest, planned_smallest.plan, budget)) + ", " +
                      category_share(planned_smallest.plan.planned_bytes) + ";";
    const WhatIfRow* least = nullptr;
    for (const WhatIfRow& row : rows)
        if (row.error.empty() && (!least || row.needed < least->needed)) least = &row;
    return line + "; it does not fit at any micro-batch:" + at_smallest +
           (least ? " the knobs that save most are " + least->change + " (" + format_bytes(least->needed) +
                        " at its configured micro-batch);"
                  : std::string()) +
           " a smaller model or a larger device is needed";
}

}  // namespace trainbench
