#pragma once
// The order in which each pipeline stage (model/pipeline_stages.hpp) runs an update's
// micro-batches, for GPipe and 1F1B (PipeDream-flush). Every stage runs the backwards in the
// micro-batches' order, so gradients accumulate in the order one process adds them. Under GPipe
// every stage, the last too, holds all m micro-batches' activations; under 1F1B stage s holds at
// most P - s, and the last runs each micro-batch's backward right after its forward
// (ComputeEngine::forward_backward) wherever it holds one at a time.
#include <cstdint>
#include <vector>

#include "trainbench/run_config.hpp"

namespace trainbench {

struct PipelineAction {
    bool forward = true;
    int64_t micro_batch = 0;  // index in the update
    int slot = 0;             // where a stage before the last keeps its activations meanwhile
};

// Stage `stage` of `stages`'s actions for an update of `micro_batches` micro-batches.
std::vector<PipelineAction> pipeline_actions(PipelineSchedule schedule, int stages, int stage, int64_t micro_batches);
// The same into `actions` (its capacity kept: no allocation once it has held an update's).
void pipeline_actions(PipelineSchedule schedule, int stages, int stage, int64_t micro_batches,
                      std::vector<PipelineAction>& actions);
// The most micro-batches whose activations the stage holds at once (EngineSpec::pipeline_in_flight).
int pipeline_in_flight(PipelineSchedule schedule, int stages, int stage, int64_t micro_batches);

}  // namespace trainbench
