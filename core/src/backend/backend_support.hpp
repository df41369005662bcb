#pragma once
// What each backend can run, said once. A run's settings are checked against the chosen device's
// backend before anything starts (run_config.cpp), and the CUDA plan and the CUDA engine's op
// switches refuse the same op kinds, each with the one line given here: what is missing and what
// to do instead. A kernel added to a backend is a line changed here.
#include <string>

#include "model/model_desc.hpp"

namespace trainbench {

enum class Backend { cpu, cuda };
// "cuda" and "cuda:N" run on the CUDA engine, everything else on the CPU's.
Backend backend_for_device(const std::string& device);

// Empty where `backend` runs ops of `kind`; otherwise the line that says it does not.
std::string unsupported_op(Backend backend, OpKind kind);
// The first of `model`'s ops `backend` cannot run, as unsupported_op says it (a pipeline stage
// after the first counts as a pipeline op); empty where it runs them all.
std::string unsupported_in(Backend backend, const ModelDesc& model);

// Ways of training beyond a model's ops.
enum class TrainingFeature { several_processes, zero, pipeline_stages };
std::string unsupported_feature(Backend backend, TrainingFeature feature);

}  // namespace trainbench
