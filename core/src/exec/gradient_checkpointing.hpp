#pragma once
// Gradient checkpointing (--checkpointing on): activations traded for a second forward pass.
//
// The technique as a whole:
//   - the model builders (model/mlp_model.cpp, gpt_model.cpp, cnn_model.cpp) group ops into
//     segments (OpDesc::segment: sqrt(n) hidden layers of an MLP, a transformer block, a
//     convolution block); ops outside any segment (-1) keep their tensors;
//   - the planner (plan/graph_plan.cpp) keeps each segment's input and gives the tensors made
//     inside a segment recompute slots that every segment shares (GraphPlan::tensor_slot,
//     slot_elements): only one segment's inner tensors exist at a time, which is the saving; the
//     last segment's stay resident after the forward (GraphPlan::last_segment);
//   - a segment none of whose tensors got a slot dropped nothing and is never rebuilt
//     (GraphPlan::rebuildable);
//   - the executor (here, from exec/graph_walk.cpp) runs a segment's forward ops again, from its
//     kept input, right before the backward reaches it.
// The rebuilt tensors are the same bits as the first forward's, so checkpointing does not change
// the update at all: tests/core/test_mlp_checkpointing.cpp and test_gpt_model.cpp pin it.
#include <cstdint>

#include "exec/graph_walk.hpp"
#include "plan/graph_plan.hpp"

namespace trainbench {

// Before op `o`'s backward: if it belongs to a segment whose tensors the recompute slots do not
// hold (`resident_segment`: the one they hold, -1 when none), runs that segment's forward ops
// again for a micro-batch of n samples. Returns the segment the slots hold after.
int rebuild_segment_before_backward(const GraphPlan& plan, OpRunner& runner, int o, int64_t n, int resident_segment);

}  // namespace trainbench
