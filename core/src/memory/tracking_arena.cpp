#include "memory/tracking_arena.hpp"

#include <algorithm>
#include <cstdlib>
#include <new>
#include <string>

#include "trainbench/error.hpp"
#include "trainbench/run_config.hpp"

namespace trainbench {
namespace {
constexpr int64_t kAlignment = 64;  // a cache line; also what AVX-512 loads like
int idx(MemoryCategory c) { return static_cast<int>(c); }
}  // namespace

TrackingArena::TrackingArena(int64_t limit_bytes) : limit_bytes_(limit_bytes) {
    blocks_.reserve(64);
}

TrackingArena::~TrackingArena() {
    for (auto& b : blocks_) std::free(b.pointer);
}

int64_t TrackingArena::rounded_size(int64_t bytes) {
    return std::max<int64_t>(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
}

void* TrackingArena::acquire(MemoryCategory category, int64_t bytes) {
    const int64_t size = rounded_size(bytes);
    for (auto& b : blocks_) {
        if (!b.live && b.bytes == size) {
            count_out(MemoryCategory::cache, size);
            b.live = true;
            b.category = category;
            count_in(category, size);
            report_.note_peaks();
            return b.pointer;
        }
    }
    if (limit_bytes_ > 0 && report_.reserved + size > limit_bytes_) {
        release_cache();
        if (report_.reserved + size > limit_bytes_) {
            throw Error("out of memory: the budget of " + format_bytes(limit_bytes_) +
                        " cannot hold another " + format_bytes(size) + " of " +
                        std::string(to_string(category)) + " (" + format_bytes(report_.reserved) +
                        " already held); raise --memory-limit or use --auto-fit");
        }
    }
    void* pointer = std::aligned_alloc(kAlignment, static_cast<size_t>(size));
    if (!pointer) throw Error("out of host memory allocating " + format_bytes(size));
    blocks_.push_back({pointer, size, category, true});
    report_.reserved += size;
    count_in(category, size);
    report_.note_peaks();
    return pointer;
}

void TrackingArena::release(void* block) {
    if (!block) return;
    for (auto& b : blocks_) {
        if (b.pointer == block && b.live) {
            b.live = false;
            count_out(b.category, b.bytes);
            count_in(MemoryCategory::cache, b.bytes);
            report_.note_peaks();  // the cache grew: its peaks (update and run) may be new
            return;
        }
    }
}

void TrackingArena::release_cache() {
    auto cached = [](const Block& b) { return !b.live; };
    for (auto& b : blocks_) {
        if (cached(b)) {
            std::free(b.pointer);
            count_out(MemoryCategory::cache, b.bytes);
            report_.reserved -= b.bytes;
        }
    }
    blocks_.erase(std::remove_if(blocks_.begin(), blocks_.end(), cached), blocks_.end());
}

void TrackingArena::begin_update() { report_.begin_update(); }

MemoryReport TrackingArena::report() const { return report_; }

void TrackingArena::count_in(MemoryCategory category, int64_t bytes) {
    report_.current[idx(category)] += bytes;
}

void TrackingArena::count_out(MemoryCategory category, int64_t bytes) {
    report_.current[idx(category)] -= bytes;
}


}  // namespace trainbench
