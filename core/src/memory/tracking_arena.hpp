#pragma once
// The CPU engine's allocator. Every buffer the engine uses comes from here, tagged with a
// MemoryCategory, so the figures the app plots are exactly what was allocated. Like a GPU
// framework's caching allocator, released blocks stay in a cache and are handed out again
// for the same size, so the steady-state training step never reaches the system allocator;
// release_cache() returns them to the system (the "empty the cache" technique).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "trainbench/memory.hpp"

namespace trainbench {

class TrackingArena {
public:
    // limit_bytes > 0 makes the arena behave like a device of that size: a request that
    // would take reserved bytes past it first empties the cache, then throws Error.
    explicit TrackingArena(int64_t limit_bytes = 0);
    ~TrackingArena();
    TrackingArena(const TrackingArena&) = delete;
    TrackingArena& operator=(const TrackingArena&) = delete;

    void* acquire(MemoryCategory category, int64_t bytes);
    template <class T>
    T* acquire_array(MemoryCategory category, int64_t count) {
        return static_cast<T*>(acquire(category, count * static_cast<int64_t>(sizeof(T))));
    }
    // Returns the block to the cache (it stays allocated, counted as `cache`).
    void release(void* block);
    void release_cache();

    void begin_update();  // resets the per-update peaks
    MemoryReport report() const;

    // Bytes a request really takes (rounded to the arena's alignment), for exact planning.
    static int64_t rounded_size(int64_t bytes);

private:
    struct Block {
        void* pointer;
        int64_t bytes;
        MemoryCategory category;
        bool live;
    };
    void count_in(MemoryCategory category, int64_t bytes);
    void count_out(MemoryCategory category, int64_t bytes);

    int64_t limit_bytes_;
    std::vector<Block> blocks_;  // few (tens of) blocks: a linear scan is cheapest
    MemoryReport report_;
};

}  // namespace trainbench
