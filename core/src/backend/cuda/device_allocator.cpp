#include "backend/cuda/device_allocator.hpp"

#include <algorithm>
#include <string>

#include "backend/cuda/cuda_check.hpp"
#include "trainbench/error.hpp"
#include "trainbench/run_config.hpp"

namespace trainbench::cuda {

DeviceAllocator::DeviceAllocator(int64_t budget_bytes) : budget_bytes_(budget_bytes) {
    // Room for every block the engine ever holds, so bookkeeping allocates nothing later.
    cache_.reserve(64);
    owned_.reserve(64);
}

DeviceAllocator::~DeviceAllocator() {
    // Destructors must not throw; a failing cudaFree here means the context is already gone.
    for (void* ptr : owned_) cudaFree(ptr);
}

int64_t DeviceAllocator::reserved_bytes() const { return report_.reserved; }

void DeviceAllocator::begin_update() { report_.begin_update(); }

void DeviceAllocator::count(MemoryCategory category, int64_t delta) {
    const int index = static_cast<int>(category);
    report_.current[index] += delta;
    report_.reserved = sum_bytes(report_.current);
    report_.note_peaks();
}

DeviceBlock DeviceAllocator::allocate(int64_t bytes, MemoryCategory category) {
    const int64_t size = rounded_size(bytes);
    if (size == 0) return DeviceBlock{nullptr, 0, category};

    auto best = cache_.end();
    for (auto it = cache_.begin(); it != cache_.end(); ++it) {
        if (it->bytes >= size && it->bytes <= 2 * size && (best == cache_.end() || it->bytes < best->bytes))
            best = it;
    }
    if (best != cache_.end()) {
        DeviceBlock block{best->ptr, best->bytes, category};
        cache_.erase(best);
        count(MemoryCategory::cache, -block.bytes);
        count(category, block.bytes);
        return block;
    }

    if (budget_bytes_ > 0 && reserved_bytes() + size > budget_bytes_) release_cache();
    if (budget_bytes_ > 0 && reserved_bytes() + size > budget_bytes_) {
        throw Error("CUDA memory budget exceeded: " + std::string(to_string(category)) + " needs " +
                    format_bytes(size) + " more while " + format_bytes(reserved_bytes()) +
                    " of the " + format_bytes(budget_bytes_) +
                    " budget are held; raise --memory-limit or use a larger --step-size, "
                    "--gradient-checkpointing or --precision bf16");
    }

    void* ptr = nullptr;
    cudaError_t status = cudaMalloc(&ptr, static_cast<size_t>(size));
    if (status == cudaErrorMemoryAllocation && !cache_.empty()) {
        cudaGetLastError();  // out-of-memory is not sticky; clear it and retry without the cache
        release_cache();
        status = cudaMalloc(&ptr, static_cast<size_t>(size));
    }
    if (status == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        size_t free_bytes = 0, total_bytes = 0;
        cudaMemGetInfo(&free_bytes, &total_bytes);
        throw Error("out of GPU memory: " + std::string(to_string(category)) + " needs " +
                    format_bytes(size) + " but only " + format_bytes(static_cast<int64_t>(free_bytes)) +
                    " of " + format_bytes(static_cast<int64_t>(total_bytes)) +
                    " are free; use a larger --step-size, --gradient-checkpointing or --precision bf16");
    }
    TRAINBENCH_CUDA_CHECK(status);
    owned_.push_back(ptr);
    count(category, size);
    return DeviceBlock{ptr, size, category};
}

void DeviceAllocator::release(DeviceBlock& block) {
    if (block.ptr == nullptr) return;
    cache_.push_back(CachedBlock{block.ptr, block.bytes});
    count(block.category, -block.bytes);
    count(MemoryCategory::cache, block.bytes);
    block = DeviceBlock{};
}

void DeviceAllocator::release_cache() {
    for (const CachedBlock& cached : cache_) {
        TRAINBENCH_CUDA_CHECK(cudaFree(cached.ptr));
        owned_.erase(std::find(owned_.begin(), owned_.end(), cached.ptr));
        count(MemoryCategory::cache, -cached.bytes);
    }
    cache_.clear();
}

}  // namespace trainbench::cuda
