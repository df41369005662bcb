#pragma once
// Turns a validated RunConfig and its data into the engine spec, and picks the backend.
#include <memory>

#include "backend/compute_engine.hpp"
#include "trainbench/run_config.hpp"

namespace trainbench {

// The spec of process `process` of the run (-1: this process, or process 0 outside the run's MPI
// job): a pipeline's processes each hold a stage, a ZeRO run's each a shard.
EngineSpec make_engine_spec(const RunConfig& config, const Dataset& data, int64_t micro_batch, int process = -1);
bool is_cuda_device(const std::string& device);
int cuda_device_index(const std::string& device);
// The graph plan the chosen backend runs for `spec`.
GraphPlan plan_engine_graph(const RunConfig& config, const EngineSpec& spec);
// Bytes by category the chosen backend will hold at the peak of an update.
BytesByCategory plan_engine_memory(const RunConfig& config, const EngineSpec& spec);
// The same, from the graph plan it runs (plan_engine_graph(config, spec)).
BytesByCategory plan_engine_memory(const RunConfig& config, const EngineSpec& spec, const GraphPlan& graph);
std::unique_ptr<ComputeEngine> make_engine(const RunConfig& config, const EngineSpec& spec);

}  // namespace trainbench
