#include "backend/cuda/pass_graphs.hpp"

#include <algorithm>

#include "backend/cuda/cuda_check.hpp"

namespace trainbench::cuda {

PassGraphs::PassGraphs(size_t capacity) : capacity_(capacity) { captured_.reserve(capacity); }

void PassGraphs::run(int64_t samples, bool overwrites, float grad_scale, const std::vector<void*>& buffers,
                     PassLauncher& launcher, cudaStream_t stream) {
    CapturedPass* pass = nullptr;
    for (auto p = captured_.begin(); p != captured_.end(); ++p)
        if (p->samples == samples && p->overwrites == overwrites && p->grad_scale == grad_scale) {
            std::rotate(p, p + 1, captured_.end());
            pass = &captured_.back();
            break;
        }
    if (pass == nullptr) {
        if (captured_.size() == capacity_) {  // the least recently used makes room
            destroy(captured_.front());
            captured_.erase(captured_.begin());
        }
        captured_.push_back({.samples = samples, .overwrites = overwrites, .grad_scale = grad_scale, .buffers = buffers});
        launcher.run_pass(samples, grad_scale);
        return;
    }
    if (pass->buffers != buffers) {
        destroy(*pass);
        pass->buffers = buffers;
        launcher.run_pass(samples, grad_scale);
        return;
    }
    if (pass->graph == nullptr) pass->graph = capture(samples, grad_scale, launcher, stream);
    TRAINBENCH_CUDA_CHECK(cudaGraphLaunch(pass->graph, stream));
    ++launches_;
}

void PassGraphs::clear() noexcept {
    for (CapturedPass& pass : captured_) destroy(pass);
    captured_.clear();
}

void PassGraphs::destroy(CapturedPass& pass) noexcept {
    if (pass.graph != nullptr) cudaGraphExecDestroy(pass.graph);
    pass.graph = nullptr;
}

cudaGraphExec_t PassGraphs::capture(int64_t samples, float grad_scale, PassLauncher& launcher, cudaStream_t stream) {
    // Thread-local: the loader threads never touch CUDA, and this thread calls nothing that
    // allocates while capturing (the buffers were taken before, cuBLAS has its workspace).
    TRAINBENCH_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    cudaGraph_t graph = nullptr;
    try {
        launcher.run_pass(samples, grad_scale);
    } catch (...) {
        cudaStreamEndCapture(stream, &graph);  // leaves the stream usable
        if (graph != nullptr) cudaGraphDestroy(graph);
        cudaGetLastError();  // the failed capture's error is not the next launch's
        throw;
    }
    TRAINBENCH_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    cudaGraphExec_t exec = nullptr;
    const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    TRAINBENCH_CUDA_CHECK(status);
    return exec;
}

}  // namespace trainbench::cuda
