#pragma once
#include <cstdint>

#include "model/model_desc.hpp"
#include "trainbench/weights.hpp"

namespace trainbench {

// Every parameter of `model` initialised by its rule, in state_dict order, from one seeded
// stream: identical on every platform and standard library.
ModelWeights init_weights(const ModelDesc& model, uint64_t seed);

}  // namespace trainbench
