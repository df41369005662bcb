#pragma once
// The CUDA executor over a model description (plan/graph_plan.hpp), the GPU twin of the CPU's
// graph engine (backend/cpu/graph_engine.cpp): the same schedule, recompute slots, gradient
// offsets and write modes, in fp32. make_cuda_engine hands every non-MLP model to it; MLPs stay
// on the layer-chain CUDA engine (cuda_engine.hpp), which also covers 16-bit storage.
// No CUDA types here, so the tests include it with the host compiler alone.
#include <memory>

#include "backend/compute_engine.hpp"

namespace trainbench {

// Bytes per category the executor will allocate for `spec` (exactly; pure arithmetic, no GPU
// needed). Throws Error with one line for a precision other than fp32.
BytesByCategory plan_cuda_graph_memory(const EngineSpec& spec);
std::unique_ptr<ComputeEngine> make_cuda_graph_engine(const EngineSpec& spec);

}  // namespace trainbench
