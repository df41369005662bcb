#include "io/cache_folder.hpp"

#include <cstdlib>

#include "trainbench/error.hpp"

namespace trainbench {

std::filesystem::path user_cache_folder() {
    const char* cache_home = std::getenv("XDG_CACHE_HOME");
    if (cache_home && cache_home[0] == '/') return std::filesystem::path(cache_home) / "trainbench";
    const char* home = std::getenv("HOME");
    if (!home || !home[0])
        throw Error("no cache folder: neither XDG_CACHE_HOME nor HOME is set; set one of them");
    return std::filesystem::path(home) / ".cache" / "trainbench";
}

}  // namespace trainbench
