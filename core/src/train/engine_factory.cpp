#include "train/engine_factory.hpp"

#include <algorithm>
#include <string>
#include <thread>

#include "backend/backend_support.hpp"
#include "model/build_model.hpp"
#include "model/pipeline_stages.hpp"
#include "parallel/pipeline_schedule.hpp"
#include "parallel/shard_range.hpp"
#include "plan/cuda_device_plan.hpp"
#include "trainbench/error.hpp"
#include "trainbench/processes.hpp"
#include "trainbench/trainer.hpp"

namespace trainbench {

namespace {

// Every sample count a micro-batch of process `rank` of `ranks` can have in this run, as the
// micro-batch stream and the evaluation cut them: the global batch and the epoch's last one
// (this process's share, in step_size parts), the evaluation's chunks, and one window for text
// samples.
std::vector<int64_t> sample_counts(const RunConfig& config, const Dataset& data, int64_t micro_batch, int rank,
                                   int ranks) {
    std::vector<int64_t> sizes{1};
    const int64_t global = config.batch_size, samples = data.train.count;
    for (int64_t batch : {std::min(global, samples), global > 0 ? samples % global : 0}) {
        if (batch <= 0) continue;
        const int64_t share = shard_of(batch, rank, ranks).size();
        const int64_t parts = std::min(config.step_size, shard_of(batch, 0, ranks).size());
        if (parts > 0 && share > 0) {
            sizes.push_back(share / parts);
            if (share % parts != 0) sizes.push_back(share / parts + 1);
        }
    }
    const DataSplit& val = data.validation;
    const int64_t used = config.eval_samples > 0 ? std::min(config.eval_samples, val.count) : val.count;
    if (used > 0) {
        sizes.push_back(std::min(micro_batch, used));
        if (used % micro_batch != 0) sizes.push_back(used % micro_batch);
    }
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    return sizes;
}

}  // namespace

EngineSpec make_engine_spec(const RunConfig& config, const Dataset& data, int64_t micro_batch, int process) {
    EngineSpec spec;
    spec.model = build_model(config, data);
    spec.optimizer = config.optimizer;
    spec.precision = config.precision;
    spec.max_micro_batch = micro_batch;
    spec.max_eval_batch = micro_batch;
    spec.gradient_checkpointing = config.gradient_checkpointing;
    spec.fused = config.fused == FusedKernels::on;
    spec.cpu_products = config.cpu_products;
    // "All cores" is shared among the processes, so processes x threads never exceeds the cores
    // unless --threads asks for more.
    spec.threads = config.threads > 0 ? config.threads
                                      : std::max(1, static_cast<int>(std::thread::hardware_concurrency() /
                                                                     std::max<int64_t>(1, config.processes)));
    spec.memory_limit_bytes = config.memory_limit_bytes;
    // Each process plans its own slice; outside the MPI job (the app's plan, a single process)
    // that is process 0's, the largest.
    spec.zero_stage = static_cast<int>(config.zero);
    const ProcessWorld world = process_world();
    const int rank = process >= 0 ? process : world.size == config.processes ? world.rank : 0;
    // A pipeline's process holds its stage (process s runs stage s); its data-parallel rank
    // among the copies of that stage shards ZeRO and the batch.
    const auto stages = static_cast<int>(config.pipeline_stages);
    spec.shard_count = static_cast<int>(data_parallel_processes(config));
    spec.shard_rank = rank / stages;
    if (stages > 1) {
        const int stage = rank % stages;
        spec.model = stage_model(spec.model, split_into_stages(spec.model, stages), stage);
        spec.pipeline_in_flight = pipeline_in_flight(config.pipeline_schedule, stages, stage, config.step_size);
    }
    spec.sample_counts = sample_counts(config, data, micro_batch, spec.shard_rank, spec.shard_count);
    if (is_cuda_device(config.device)) {
        spec.device_index = cuda_device_index(config.device);
        if (config.preload_device) spec.preload = &data;
    }
    return spec;
}

bool is_cuda_device(const std::string& device) { return backend_for_device(device) == Backend::cuda; }

int cuda_device_index(const std::string& device) {
    const auto colon = device.find(':');
    return colon == std::string::npos ? 0 : std::stoi(device.substr(colon + 1));
}

namespace {
[[noreturn]] void no_cuda(const std::string& device) {
    throw Error("device '" + device + "' is not available: " + cuda_unavailable_reason() + "; use --device cpu");
}
}  // namespace

GraphPlan plan_engine_graph(const RunConfig& config, const EngineSpec& spec) {
    return is_cuda_device(config.device) ? cuda::plan_cuda_graph(spec) : plan_cpu_graph(spec);
}

BytesByCategory plan_engine_memory(const RunConfig& config, const EngineSpec& spec) {
    return plan_engine_memory(config, spec, plan_engine_graph(config, spec));
}

BytesByCategory plan_engine_memory(const RunConfig& config, const EngineSpec& spec, const GraphPlan& graph) {
    return is_cuda_device(config.device) ? plan_cuda_engine_memory(spec, graph) : plan_cpu_engine_memory(graph);
}

std::unique_ptr<ComputeEngine> make_engine(const RunConfig& config, const EngineSpec& spec) {
    if (!is_cuda_device(config.device)) return make_cpu_engine(spec);
#ifdef TRAINBENCH_WITH_CUDA
    bool found = false;
    for (const auto& d : available_devices()) found = found || d.id == "cuda:" + std::to_string(spec.device_index);
    if (!found) no_cuda(config.device);
    return make_cuda_engine(spec);
#else
    no_cuda(config.device);
#endif
}

}  // namespace trainbench
