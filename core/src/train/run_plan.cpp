#include "trainbench/run_plan.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

#include "model/build_model.hpp"
#include "model/param_layout.hpp"
#include "model/pipeline_stages.hpp"
#include "parallel/shard_range.hpp"
#include "plan/cuda_device_plan.hpp"
#include "plan/graph_plan.hpp"
#include "train/engine_factory.hpp"
#include "trainbench/error.hpp"
#include "trainbench/trainer.hpp"

namespace trainbench {

std::vector<int64_t> split_micro_batches(int64_t batch_samples, int64_t step_size) {
    std::vector<int64_t> sizes;
    const int64_t parts = std::min(step_size, batch_samples);  // a tiny last batch has fewer parts
    for (int64_t k = 0; k < parts; ++k) sizes.push_back(batch_samples / parts + (k < batch_samples % parts ? 1 : 0));
    return sizes;
}

int64_t updates_per_epoch(int64_t samples, int64_t global_batch) {
    return global_batch > 0 ? (samples + global_batch - 1) / global_batch : 0;
}

int64_t largest_micro_batch(int64_t batch, int64_t step_size, int64_t processes) {
    const int64_t share = shard_of(batch, 0, static_cast<int>(processes)).size();  // process 0's is the largest
    return (share + step_size - 1) / step_size;
}

namespace {

int64_t planned_total_for(const RunConfig& config, const Dataset& data) {
    const auto spec = make_engine_spec(config, data, largest_micro_batch(config.batch_size, config.step_size, data_parallel_processes(config)));
    return sum_bytes(plan_engine_memory(config, spec));
}

// Smallest step_size >= the configured one whose plan fits the budget; 0 if none does.
int64_t smallest_fitting_step_size(RunConfig config, const Dataset& data) {
    int64_t previous_micro = -1;
    for (int64_t step = config.step_size; step * data_parallel_processes(config) <= config.batch_size; ++step) {
        const int64_t micro = largest_micro_batch(config.batch_size, step, data_parallel_processes(config));
        if (micro == previous_micro) continue;  // same buffers, same memory
        previous_micro = micro;
        config.step_size = step;
        if (planned_total_for(config, data) <= config.memory_limit_bytes) return step;
    }
    return 0;
}

std::string over_budget_message(const RunConfig& config, const Dataset& data, int64_t needed) {
    std::string fixes;
    auto add_fix = [&fixes](const std::string& fix) { fixes += (fixes.empty() ? "" : ", or ") + fix; };
    if (const int64_t step = smallest_fitting_step_size(config, data)) add_fix("--step-size " + std::to_string(step));
    RunConfig variant = config;
    variant.gradient_checkpointing = true;
    if (!config.gradient_checkpointing && planned_total_for(variant, data) <= config.memory_limit_bytes)
        add_fix("--gradient-checkpointing");
    variant = config;
    variant.precision = Precision::bf16;
    if (config.precision == Precision::fp32 && planned_total_for(variant, data) <= config.memory_limit_bytes)
        add_fix("--precision bf16");
    std::string message = "the run needs " + format_bytes(needed) + " but --memory-limit is " +
                          format_bytes(config.memory_limit_bytes) + ": ";
    if (fixes.empty())
        message += "no step_size, checkpointing or 16-bit precision makes it fit; lower --batch-size or --hidden, or raise --memory-limit";
    else
        message += "it fits with " + fixes + " (or --auto-fit to pick the step_size)";
    return message;
}

}  // namespace

int64_t RunPlan::largest_process_total() const {
    int64_t largest = planned_total();
    for (const BytesByCategory& stage : stage_planned_bytes) largest = std::max(largest, sum_bytes(stage));
    return largest;
}

int64_t RunPlan::all_processes_total() const {
    if (stage_planned_bytes.empty()) return processes * planned_total();
    int64_t pipeline = 0;
    for (const BytesByCategory& stage : stage_planned_bytes) pipeline += sum_bytes(stage);
    return processes * pipeline;
}

std::string nf4_parameters_note(const RunPlan& plan) {
    if (plan.nf4_parameter_count == 0) return "";
    char bits[32];
    std::snprintf(bits, sizeof bits, "%.2f", 8.0 * static_cast<double>(plan.nf4_bytes) / static_cast<double>(plan.nf4_parameter_count));
    return ", " + std::to_string(plan.nf4_parameter_count) + " in 4-bit NF4 at " + bits + " bits each";
}

std::string checkpointing_note(const RunPlan& plan) {
    if (plan.activations_without_checkpointing < 0) return {};
    const int64_t with = plan.planned_bytes[static_cast<size_t>(MemoryCategory::activations)];
    const int64_t without = plan.activations_without_checkpointing;
    const std::string who = plan.pipeline_stages > 1 ? " (stage 1)" : "";
    const std::string rebuilt = std::to_string(plan.rebuilt_segments) +
                                (plan.rebuilt_segments == 1 ? " segment" : " segments");
    if (with < without) {
        char percent[16];
        std::snprintf(percent, sizeof percent, "%.0f%%",
                      100.0 * static_cast<double>(without - with) / static_cast<double>(without));
        return "gradient checkpointing" + who + ": activations " + format_bytes(with) + " instead of " +
               format_bytes(without) + " without it (" + percent + " less), for a second forward pass of " + rebuilt +
               " in every backward";
    }
    // A segment's inner tensors share recompute slots with the other segments' (plan/graph_plan.cpp):
    // a model whose segments leave nothing to share (a ReLU MLP of fewer than 4 hidden layers)
    // keeps as much as without.
    const std::string amounts = with == without ? format_bytes(with) + " with it and without"
                                                : format_bytes(with) + " with it, " + format_bytes(without) + " without";
    if (plan.rebuilt_segments == 0)
        return "gradient checkpointing" + who + " changes nothing on this model: activations " + amounts +
               ", and no segment is computed twice";
    return "gradient checkpointing" + who + " frees nothing on this model: activations " + amounts +
           ", while every backward reruns the forward of " + rebuilt + ": here it only costs time";
}

std::string recomputed_attention_note(const RunPlan& plan) {
    if (plan.recomputed_attention_bytes <= 0) return {};
    return "attention: the probabilities (" + format_bytes(plan.recomputed_attention_bytes) +
           ") are computed again in the backward instead of kept (the CPU engine keeps them)";
}

RunPlan plan_run(const RunConfig& requested, const Dataset& data) {
    validate(requested);
    RunConfig config = requested;
    RunPlan plan;
    if (config.memory_limit_bytes > 0) {
        const int64_t needed = planned_total_for(config, data);
        if (needed > config.memory_limit_bytes) {
            const int64_t step = config.auto_fit ? smallest_fitting_step_size(config, data) : 0;
            if (step == 0) throw Error(over_budget_message(config, data, needed), "memory_limit_bytes");
            RunConfig fitted = config;
            fitted.step_size = step;
            plan.auto_fit_note = "--auto-fit chose step_size " + std::to_string(step) + " (micro-batch " +
                                 std::to_string(largest_micro_batch(config.batch_size, step, data_parallel_processes(config))) + "): needs " +
                                 format_bytes(planned_total_for(fitted, data)) + " of " +
                                 format_bytes(config.memory_limit_bytes) + " instead of " + format_bytes(needed);
            config.step_size = step;
        } else if (config.auto_fit) {
            plan.auto_fit_note = "--auto-fit kept step_size " + std::to_string(config.step_size) + ": needs " +
                                 format_bytes(needed) + " of " + format_bytes(config.memory_limit_bytes);
        }
    }
    plan.global_batch = config.batch_size;
    plan.step_size = config.step_size;
    plan.processes = data_parallel_processes(config);
    plan.pipeline_stages = config.pipeline_stages;
    if (config.pipeline_stages > 1) {
        plan.pipeline_schedule = to_string(config.pipeline_schedule);
        plan.pipeline_bubble = gpipe_bubble_fraction(static_cast<int>(config.pipeline_stages), config.step_size);
    }
    plan.zero = config.zero;
    plan.micro_batch = largest_micro_batch(config.batch_size, config.step_size, data_parallel_processes(config));
    plan.train_samples = data.train.count;
    if (data.task == Task::language_model) plan.tokens_per_sample = data.features;
    plan.updates_per_epoch = updates_per_epoch(data.train.count, config.batch_size);
    plan.total_updates = plan.updates_per_epoch * config.epochs;
    if (config.max_steps > 0) plan.total_updates = std::min(plan.total_updates, config.max_steps);
    const auto spec = make_engine_spec(config, data, plan.micro_batch);
    plan.model_summary = spec.model.summary;
    plan.parameter_count = spec.model.parameter_count();
    plan.trainable_parameter_count = spec.model.trainable_parameter_count();
    const ParamLayout layout = make_param_layout(spec.model);
    for (size_t p = 0; p < spec.model.params.size(); ++p)
        if (layout.nf4_offset[p] >= 0) plan.nf4_parameter_count += spec.model.params[p].numel();
    plan.nf4_bytes = layout.nf4_bytes;
    // A pipeline stage's model is its part; MFU counts the whole model's FLOPs.
    plan.flops_per_sample = config.pipeline_stages > 1 ? build_model(config, data).training_flops_per_sample
                                                       : spec.model.training_flops_per_sample;
    const GraphPlan graph = plan_engine_graph(config, spec);
    plan.planned_bytes = plan_engine_memory(config, spec, graph);
    if (is_cuda_device(config.device)) plan.recomputed_attention_bytes = cuda::recomputed_probability_bytes(graph);
    if (config.gradient_checkpointing) {
        RunConfig without = config;
        without.gradient_checkpointing = false;
        plan.activations_without_checkpointing = plan_engine_memory(
            without, make_engine_spec(without, data, plan.micro_batch))[static_cast<size_t>(MemoryCategory::activations)];
        plan.rebuilt_segments = rebuilt_segments(graph);
    }
    for (int stage = 0; config.pipeline_stages > 1 && stage < config.pipeline_stages; ++stage)
        plan.stage_planned_bytes.push_back(plan_engine_memory(config, make_engine_spec(config, data, plan.micro_batch, stage)));
    if (!is_cuda_device(config.device)) {
        plan.threads = spec.threads;
        plan.products = describe(choose_product_kernel(spec.cpu_products, spec.precision));
        EngineSpec other = spec;
        other.fused = !spec.fused;
        const int64_t traffic = plan_cpu_engine_traffic(graph, spec.optimizer, config.step_size);
        const int64_t other_traffic = plan_cpu_engine_traffic(plan_cpu_graph(other), other.optimizer, config.step_size);
        plan.fused_traffic_bytes = spec.fused ? traffic : other_traffic;
        plan.eager_traffic_bytes = spec.fused ? other_traffic : traffic;
    }
    if (data.train.count == 0) throw Error("data set '" + data.name + "' has no training rows");
    return plan;
}

}  // namespace trainbench
