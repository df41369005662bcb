#pragma once
// The bytes the CPU executor moves through memory, counted from its plan: what --fused on saves
// over --fused off, as the plan shows it. Each pass of a kernel is counted as reading every
// tensor it reads once and writing every tensor it writes once (the compulsory traffic); what
// a pass re-reads from cache inside itself (a product's tiles, an attention tile of T x T
// scores) is not counted, and neither are the weights a product reads beyond one pass over
// them. A fused kernel saves the passes that would write an intermediate and read it back.
#include <cstdint>

#include "plan/graph_plan.hpp"

namespace trainbench {

struct MemoryTraffic {
    int64_t forward = 0;    // one micro-batch of plan.micro_batch samples, the loss included
    int64_t backward = 0;
    int64_t recompute = 0;  // checkpointing: the dropped segments' second forward
    int64_t optimizer = 0;  // one update of this process's shard (16-bit runs: and the working copy)

    int64_t per_update(int64_t micro_batches) const { return micro_batches * (forward + backward + recompute) + optimizer; }
};

// The optimizer's passes as the plan's engine runs them after its first update. A gradient
// multiplier other than 1 (clipping, loss scaling) adds a pass over the gradients in eager runs,
// which the count leaves out: whether it happens is known only once the norm is.
MemoryTraffic count_memory_traffic(const GraphPlan& plan, const OptimizerConfig& optimizer);

}  // namespace trainbench
