#pragma once
// The optimizer state of a flat parameter store as checkpoint tensors: one tensor per state
// buffer ("optimizer.exp_avg", ...), each the n floats of that buffer in store order.
#include <cstdint>
#include <string>
#include <vector>

#include "parallel/shard_range.hpp"
#include "trainbench/run_config.hpp"
#include "trainbench/weights.hpp"

namespace trainbench {

// The prefix of every optimizer-state tensor's name in a checkpoint.
inline const std::string kOptimizerStatePrefix = "optimizer.";

// `state` holds optimizer_state_slots(config) consecutive buffers of n floats.
std::vector<NamedTensor> optimizer_state_tensors(const OptimizerConfig& config, const float* state, int64_t n);
// Throws Error when a buffer is missing or of another size (another optimizer or model). A ZeRO
// process loads only its shard of each n-float tensor (`state` then holds buffers of
// shard.size() floats); the default shard is the whole.
void load_optimizer_state_tensors(const OptimizerConfig& config, const std::vector<NamedTensor>& tensors, float* state,
                                  int64_t n, ShardRange shard = {0, -1});

}  // namespace trainbench
