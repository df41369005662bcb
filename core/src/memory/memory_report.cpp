#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

#include "trainbench/memory.hpp"

namespace trainbench {

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
