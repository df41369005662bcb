#pragma once
#include <cstdint>
#include <vector>

#include "trainbench/weights.hpp"

namespace trainbench {

// torch.nn.Linear's default initialisation (kaiming_uniform with a = sqrt(5), which is
// U(-1/sqrt(in), 1/sqrt(in)) for weights, and the same bound for biases), seeded.
ModelWeights init_mlp_weights(const std::vector<int64_t>& layer_sizes, uint64_t seed);

}  // namespace trainbench
