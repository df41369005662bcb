#pragma once
// ZeRO (--zero 1|2 with several processes): each process keeps only its slice of what the update
// needs, in host memory shared over MPI.
//
// The technique as a whole:
//   - the planner (plan/graph_plan.cpp) cuts the trainable part of the flat parameter store into
//     one contiguous slice per process (GraphPlan::optimizer_shard, parallel/shard_range.hpp) and
//     sizes the optimizer state for that slice alone (ZeRO-1); under ZeRO-2 it sizes the
//     gradients for the slice too and groups the parameters into buckets in the order the
//     backward completes them (GraphPlan::gradient_buckets), with a bucket block that holds one
//     micro-batch's gradients until they are reduced;
//   - the CPU backend's kernels write a parameter's gradient into its place in the bucket block
//     (GraphPlan::param_bucket_offset); right after the op that completes a bucket, the walk's
//     hook (OpRunner::backward_done) reduces it (here): a reduce-scatter leaves each process the
//     sum of its part, which it writes or adds into its slice (PlanExecutor::bucket_write);
//   - the optimizer step updates the slice, and an all-gather brings every process the others'
//     updated weights (backend/cpu/graph_engine.cpp, optimizer_step);
//   - checkpoints gather the slices into whole tensors (optimizer_state, gradients).
// Sharding changes the update only by float rounding (the sums' order): tests/mpi/ and
// tests/core/test_gradient_buckets.cpp pin it.
#include <cstdint>

#include "plan/graph_plan.hpp"

namespace trainbench {

class ProcessGroup;

// ZeRO-2: sums a complete bucket, held in `bucket_block`, over `group`, and writes (the update's
// first micro-batch) or adds this process's part of the sum into `shard_gradients`, its slice's
// gradients. The reduce-scatter's time is added to `collective_ms`.
void reduce_gradient_bucket(const GraphPlan& plan, const GraphPlan::GradientBucket& bucket, float* bucket_block,
                            float* shard_gradients, GradientWrite write, ProcessGroup& group, double& collective_ms);

// ZeRO-2: a process with no samples in a micro-batch still takes part in every bucket's
// reduce-scatter, adding zeros, and receives its part of the sum.
void reduce_empty_buckets(const GraphPlan& plan, float* bucket_block, float* shard_gradients, GradientWrite write,
                          ProcessGroup& group, double& collective_ms);

// A flat tensor of n floats cut into the processes' shards (`shard`: this process's, its values at
// `slice`), gathered whole into `whole` on every process of `group` (checkpoints, gradients()).
void gather_shards(const float* slice, ShardRange shard, float* whole, int64_t n, ProcessGroup& group);

// ZeRO-2: replaces the gradient of the trainable range `tensor` by its sum over `holders` when each
// process holds only the part of it in its shard: through the bucket block (free between backward
// passes), a block's length at a time, each process adds its part with zeros elsewhere and keeps
// its part of the sum. The holders' shards must tile the tensor (each stage's copies do).
void sum_sharded_gradient(const GraphPlan& plan, ShardRange tensor, float* bucket_block, float* shard_gradients,
                          ProcessGroup& holders);

// ZeRO-2: the squared norm of the trainable range `tensor`'s gradient, summed over the shards.
double sharded_gradient_norm_squared(const GraphPlan& plan, ShardRange tensor, const float* shard_gradients,
                                     ProcessGroup& group);

}  // namespace trainbench
