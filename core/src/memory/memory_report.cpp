#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "trainbench/memory.hpp"

namespace trainbench {

void MemoryReport::begin_update() {
    update_peak = current;
    update_peak_held = current;
    update_live_peak = live();
}

void MemoryReport::note_peaks() {
    for (int c = 0; c < kMemoryCategoryCount; ++c) {
        update_peak[c] = std::max(update_peak[c], current[c]);
        peak[c] = std::max(peak[c], current[c]);
    }
    const int64_t held = live();
    if (held > update_live_peak) update_peak_held = current;
    update_live_peak = std::max(update_live_peak, held);
    live_peak = std::max(live_peak, held);
    reserved_peak = std::max(reserved_peak, reserved);
}

std::string_view to_string(MemoryCategory category) {
    switch (category) {
        case MemoryCategory::parameters: return "parameters";
        case MemoryCategory::gradients: return "gradients";
        case MemoryCategory::optimizer_state: return "optimizer_state";
        case MemoryCategory::master_weights: return "master_weights";
        case MemoryCategory::activations: return "activations";
        case MemoryCategory::workspace: return "workspace";
        case MemoryCategory::cache: return "cache";
        case MemoryCategory::count: break;
    }
    return "unknown";
}

std::string category_label(MemoryCategory category) {
    std::string label(to_string(category));
    for (char& c : label)
        if (c == '_') c = ' ';
    return label;
}

int64_t process_rss_bytes() {
    // Read with open/read into a stack buffer: this runs after every update and must not
    // touch the heap (fopen would).
    const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char text[128];
    const ssize_t n = ::read(fd, text, sizeof(text) - 1);
    ::close(fd);
    if (n <= 0) return 0;
    text[n] = '\0';
    char* cursor = text;
    std::strtoll(cursor, &cursor, 10);                  // total program size
    const long long resident_pages = std::strtoll(cursor, nullptr, 10);
    return static_cast<int64_t>(resident_pages) * ::sysconf(_SC_PAGESIZE);
}

}  // namespace trainbench
