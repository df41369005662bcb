#pragma once
#include <cstdint>

#include "model/model_desc.hpp"
#include "trainbench/weights.hpp"

namespace trainbench {

// Every parameter of `model` initialised by its rule, in state_dict order, from one seeded
// stream: identical on every platform and standard library.
ModelWeights init_weights(const ModelDesc& model, uint64_t seed);

// A LoRA fine-tune's starting weights: `base` (a plain model file, e.g. an earlier run's
// --save-weights) with each adapter it lacks drawn as init_weights draws it for this seed.
ModelWeights with_initial_adapters(ModelWeights base, const ModelDesc& model, uint64_t seed);

}  // namespace trainbench
