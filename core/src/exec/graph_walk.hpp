#pragma once
// The walk over a plan's ops, the same on every backend: a backend runs one op's forward or
// backward (OpRunner); the walk decides which ops run, in what order, and where gradient
// checkpointing rebuilds a segment before its backward.
#include <cstdint>

#include "plan/graph_plan.hpp"

namespace trainbench {

class OpRunner {
public:
    virtual void forward_op(int o, int64_t n) = 0;
    virtual void backward_op(int o, int64_t n) = 0;
    // After op o's backward (ZeRO-2: the gradient buckets op o completed are reduced here).
    virtual void backward_done(int) {}

protected:
    ~OpRunner() = default;
};

// Every op's forward, in order, for a micro-batch of n samples.
void walk_forward(const GraphPlan& plan, OpRunner& runner, int64_t n);

// The backward pass, from the op before the last (the loss, or a pipeline stage's end, whose
// gradient the caller seeds) down to the first. An op whose output has no gradient (nothing
// trainable upstream or inside, GraphPlan::grad_offset) is skipped. With checkpointing, before
// the first backward op of a segment other than `resident_segment` (the one whose tensors are
// still held: GraphPlan::last_segment right after a forward, -1 when none is), that segment's
// forward ops run again from its kept input.
void walk_backward(const GraphPlan& plan, OpRunner& runner, int64_t n, int resident_segment);

}  // namespace trainbench
