#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace trainbench {

// Categories the engine's allocator counts. master_weights holds the fp32 copy only when
// training in 16-bit precision (then `parameters` holds the 16-bit working copy).
enum class MemoryCategory : int {
    parameters,
    gradients,
    optimizer_state,
    master_weights,
    activations,
    workspace,
    cache,  // freed blocks kept for reuse (not live), released by empty-cache
    count
};
inline constexpr int kMemoryCategoryCount = static_cast<int>(MemoryCategory::count);
using BytesByCategory = std::array<int64_t, kMemoryCategoryCount>;

std::string_view to_string(MemoryCategory);
// For people: "optimizer state" where to_string, a key for files, says "optimizer_state".
std::string category_label(MemoryCategory);

inline int64_t sum_bytes(const BytesByCategory& bytes) {
    int64_t total = 0;
    for (auto b : bytes) total += b;
    return total;
}

// What the engine's allocator holds, read after an update. "Live" excludes the cache;
// "reserved" is live + cache, what a device would have taken from the system.
struct MemoryReport {
    BytesByCategory current{};      // bytes held now (after the update)
    BytesByCategory update_peak{};  // per category, the most held at any moment of the last update
    // Per category (cache included), what was held at the moment of the last update's live peak
    // (update_live_peak): a composition that existed at one moment, unlike update_peak, whose
    // categories peak at different moments and so add up to more than was ever held.
    BytesByCategory update_peak_held{};
    BytesByCategory peak{};         // per category, the most held since the run began
    int64_t update_live_peak = 0;   // most live bytes at once during the last update
    int64_t live_peak = 0;          // most live bytes at once since the run began
    int64_t reserved = 0;           // live + cache now
    int64_t reserved_peak = 0;      // most live + cache at once since the run began

    int64_t bytes(MemoryCategory c) const { return current[static_cast<int>(c)]; }
    int64_t update_peak_bytes(MemoryCategory c) const { return update_peak[static_cast<int>(c)]; }
    int64_t peak_bytes(MemoryCategory c) const { return peak[static_cast<int>(c)]; }
    int64_t live() const { return reserved - bytes(MemoryCategory::cache); }

    // The allocators' bookkeeping, one rule for both: begin_update starts the per-update peaks
    // from what is held now; note_peaks, called after every change to `current` and `reserved`,
    // raises the peaks and keeps the composition of the update's live peak.
    void begin_update();
    void note_peaks();
};

// Resident set size of this process from /proc/self/statm (no heap use); 0 where unavailable.
int64_t process_rss_bytes();

}  // namespace trainbench
