#include "backend/compute_engine.hpp"

#include "trainbench/error.hpp"

namespace trainbench {

void ComputeEngine::sum_gradients(ProcessGroup&) {
    throw Error("this engine does not train in several processes; use --device cpu or --processes 1");
}

ModelWeights ComputeEngine::gradients() const { throw Error("this engine does not read its gradients back"); }

void ComputeEngine::logits_row(const MicroBatch&, int64_t, float*) {
    throw Error("this engine cannot generate text samples; use --sample-chars 0");
}

}  // namespace trainbench
