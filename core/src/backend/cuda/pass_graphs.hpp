#pragma once
// What torch.compile's "reduce-overhead" mode does with CUDA graphs: the hundreds of launches of a
// micro-batch's pass become one. A pass's kernels depend on its sample count, on whether it
// writes or adds to the gradients (the update's first micro-batch writes them), on the loss's
// scale (the normaliser and the fp16 loss scale) and on the buffers the allocator handed it. A
// pass seen the first time runs launch by launch; seen again with the same buffers it is captured
// as a graph (so cuBLAS has chosen its algorithms outside the capture) and from then on replayed.
// Other buffers (after release_cache) run it launch by launch again. CUDA's alone: the executor
// knows nothing of it.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace trainbench::cuda {

// Enqueues one training pass's kernels on the stream, launch by launch.
class PassLauncher {
public:
    virtual void run_pass(int64_t samples, float grad_scale) = 0;

protected:
    ~PassLauncher() = default;
};

class PassGraphs {
public:
    // Keeps at most `capacity` passes: an update's first and later full micro-batches, a partial
    // last batch's, and those of a loss scale or normaliser that changed lately.
    explicit PassGraphs(size_t capacity);
    // The owner clears the graphs first, while its device is current (CudaEngine::destroy_handles).
    ~PassGraphs() { clear(); }
    PassGraphs(const PassGraphs&) = delete;
    PassGraphs& operator=(const PassGraphs&) = delete;

    // Runs the pass of `samples` (writing the gradients if `overwrites`, its loss scaled by
    // `grad_scale`) on `buffers`: through `launcher` or as its graph, on `stream`.
    void run(int64_t samples, bool overwrites, float grad_scale, const std::vector<void*>& buffers,
             PassLauncher& launcher, cudaStream_t stream);
    // Passes replayed as graphs so far.
    int64_t launches() const { return launches_; }
    // Destroys every graph (the device must be current).
    void clear() noexcept;

private:
    struct CapturedPass {
        int64_t samples = 0;
        bool overwrites = false;
        float grad_scale = 0.0f;
        std::vector<void*> buffers;       // the per-micro-batch buffers it ran on
        cudaGraphExec_t graph = nullptr;  // captured the second time the pass is seen
    };
    static void destroy(CapturedPass& pass) noexcept;
    static cudaGraphExec_t capture(int64_t samples, float grad_scale, PassLauncher& launcher, cudaStream_t stream);

    size_t capacity_;
    std::vector<CapturedPass> captured_;  // the most recently used last
    int64_t launches_ = 0;
};

}  // namespace trainbench::cuda
