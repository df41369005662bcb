#include "backend/compute_engine.hpp"

#include "trainbench/error.hpp"

namespace trainbench {

ModelWeights ComputeEngine::gradients() const { throw Error("this engine does not read its gradients back"); }

}  // namespace trainbench
