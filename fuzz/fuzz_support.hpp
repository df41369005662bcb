#pragma once
// Shared by the libFuzzer harnesses (fuzz/fuzz_*.cpp, docs/RELIABILITY.md).
//
// A parser may refuse its input only by throwing trainbench::Error: any other exception, a
// sanitizer report, a crash, a hang or a broken invariant (FUZZ_CHECK) is a finding.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include <unistd.h>

#include "trainbench/error.hpp"

// Aborts with the condition and its line, so libFuzzer saves the input as a crash.
#define FUZZ_CHECK(condition)                                                                      \
    do {                                                                                           \
        if (!(condition)) {                                                                        \
            std::fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #condition); \
            std::abort();                                                                          \
        }                                                                                          \
    } while (false)

namespace trainbench::fuzz {

inline std::string_view bytes_of(const uint8_t* data, size_t size) {
    return {reinterpret_cast<const char*>(data), size};
}

// A folder of this process's own (libFuzzer's -jobs run several processes), removed at exit,
// for parsers that only read a path.
inline const std::string& scratch_folder() {
    static const std::string folder = [] {
        const char* tmp = std::getenv("TMPDIR");
        std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/trainbench-fuzz-XXXXXX";
        if (!mkdtemp(pattern.data())) {
            std::perror("fuzz: mkdtemp");
            std::abort();
        }
        static std::string to_remove;
        to_remove = pattern;
        std::atexit([] {
            std::error_code ignored;
            std::filesystem::remove_all(to_remove, ignored);
        });
        return pattern;
    }();
    return folder;
}

// Writes `bytes` to `name` in the scratch folder (replacing it) and returns its path.
inline std::string write_scratch_file(const std::string& name, std::string_view bytes) {
    const std::string path = scratch_folder() + "/" + name;
    std::FILE* file = std::fopen(path.c_str(), "wb");
    if (!file) {
        std::perror(path.c_str());
        std::abort();
    }
    if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), file) != bytes.size()) std::abort();
    if (std::fclose(file) != 0) std::abort();
    return path;
}

}  // namespace trainbench::fuzz
