#include "backend/compute_engine.hpp"

#include "backend/backend_support.hpp"
#include "trainbench/error.hpp"

namespace trainbench {

// An engine without a way of training says so as the config's check would have
// (backend/backend_support.hpp): that check refuses such runs first.
void ComputeEngine::sum_gradients(ProcessGroup&) {
    throw Error(unsupported_feature(Backend::cuda, TrainingFeature::several_processes));
}

ModelWeights ComputeEngine::gradients() const { throw Error("this engine does not read its gradients back"); }

void ComputeEngine::sum_gradient_of(const std::string& name, ProcessGroup&) {
    throw Error("internal: this engine runs no pipeline stage, so it does not sum the gradient of '" + name + "'");
}

double ComputeEngine::gradient_norm_squared_of(const std::string& name) {
    throw Error("internal: this engine runs no pipeline stage, so it has no norm of the gradient of '" + name + "'");
}

void ComputeEngine::logits_row(const MicroBatch&, int64_t, float*) {
    throw Error("this engine cannot generate text samples; use --sample-chars 0");
}

namespace {
[[noreturn]] void no_pipeline_stages() { throw Error(unsupported_feature(Backend::cuda, TrainingFeature::pipeline_stages)); }
}  // namespace

float* ComputeEngine::stage_input() { no_pipeline_stages(); }
float* ComputeEngine::stage_input_gradient() { no_pipeline_stages(); }
float* ComputeEngine::stage_output() { no_pipeline_stages(); }
float* ComputeEngine::stage_output_gradient() { no_pipeline_stages(); }
double ComputeEngine::stage_forward(const MicroBatch&, int, double, double) { no_pipeline_stages(); }
void ComputeEngine::stage_backward(int) { no_pipeline_stages(); }

}  // namespace trainbench
