#pragma once
#include <stdexcept>

namespace trainbench::cli {

// Exit statuses scripts can rely on (documented in docs/CLI.md).
inline constexpr int kExitSuccess = 0;
inline constexpr int kExitRuntimeError = 1;   // data, files, memory budget, divergence
inline constexpr int kExitUsageError = 2;     // flags, config file, invalid configuration

// A problem with what the user asked for (flags, --config contents, an invalid configuration),
// as opposed to something that went wrong while running it. One line, like trainbench::Error.
class UsageError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

}  // namespace trainbench::cli
