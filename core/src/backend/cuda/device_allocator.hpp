#pragma once
// The CUDA engine's caching allocator: every device byte the engine holds comes from here and
// is counted by category. Freed blocks stay reserved in the `cache` category for reuse (as
// PyTorch's caching allocator does) until release_cache() hands them back with cudaFree, so
// --empty-cache-steps trades time (a fresh cudaMalloc next time) for reserved memory.
#include <cstdint>
#include <vector>

#include "plan/cuda_buffer_sizes.hpp"
#include "trainbench/memory.hpp"

namespace trainbench::cuda {

struct DeviceBlock {
    void* ptr = nullptr;
    int64_t bytes = 0;  // as rounded by the allocator
    MemoryCategory category = MemoryCategory::workspace;
};

class DeviceAllocator {
public:
    // budget_bytes > 0 makes the allocator behave like a device with that much memory.
    explicit DeviceAllocator(int64_t budget_bytes = 0);
    ~DeviceAllocator();
    DeviceAllocator(const DeviceAllocator&) = delete;
    DeviceAllocator& operator=(const DeviceAllocator&) = delete;

    // Sizes are rounded as plans round them (plan/cuda_buffer_sizes.hpp), so that plans
    // (plan_cuda_engine_memory) and real allocations agree to the byte.
    static int64_t rounded_size(int64_t bytes) { return allocation_bytes(bytes); }

    // Reuses a cached block that fits (best fit, at most twice the size), else cudaMalloc.
    // Throws Error when the budget or the device cannot hold it.
    DeviceBlock allocate(int64_t bytes, MemoryCategory category);
    // Moves the block to the cache; `block` is reset.
    void release(DeviceBlock& block);
    // cudaFree on every cached block.
    void release_cache();

    MemoryReport report() const { return report_; }
    // Starts the per-update peaks (MemoryReport::update_peak, update_live_peak) afresh.
    void begin_update();
    int64_t reserved_bytes() const;

private:
    void count(MemoryCategory category, int64_t delta);

    struct CachedBlock {
        void* ptr;
        int64_t bytes;
    };
    int64_t budget_bytes_;
    std::vector<CachedBlock> cache_;
    std::vector<void*> owned_;  // every pointer obtained from cudaMalloc and not yet freed
    MemoryReport report_;
};

}  // namespace trainbench::cuda
