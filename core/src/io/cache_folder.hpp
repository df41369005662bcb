#pragma once
#include <filesystem>

namespace trainbench {

// The user's cache folder for TrainBench: $XDG_CACHE_HOME/trainbench, or
// ~/.cache/trainbench when XDG_CACHE_HOME is unset or relative. Throws Error when neither
// XDG_CACHE_HOME nor HOME is set. The folder is not created.
std::filesystem::path user_cache_folder();

}  // namespace trainbench
