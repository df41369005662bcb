#pragma once
#include <cstdint>

#include "model/model_desc.hpp"
#include "trainbench/run_config.hpp"
#include "trainbench/weights.hpp"

namespace trainbench {

// Every parameter of `model` initialised by its rule, in state_dict order, from one seeded
// stream: identical on every platform and standard library. DoRA's magnitudes
// (InitRule::row_norms) are the norms of their weight's rows as a run in `working` precision
// multiplies them: rounded to its 16-bit format first, so that the fresh adapter scales each
// row by exactly 1.
ModelWeights init_weights(const ModelDesc& model, uint64_t seed, Precision working = Precision::fp32);

// A LoRA fine-tune's starting weights: `base` (a plain model file, e.g. an earlier run's
// --save-weights) with each adapter it lacks drawn as init_weights draws it for this seed (a
// DoRA magnitude from the base's weight).
ModelWeights with_initial_adapters(ModelWeights base, const ModelDesc& model, uint64_t seed,
                                   Precision working = Precision::fp32);

}  // namespace trainbench
