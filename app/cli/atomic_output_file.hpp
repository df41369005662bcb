#pragma once
#include <cstdio>
#include <string>

namespace trainbench::cli {

// An output file that appears complete or not at all: everything goes to PATH.tmp, and only
// commit() renames it to PATH. Destroyed without commit() (an error, an exception), the
// temporary file is removed.
class AtomicOutputFile {
public:
    // Throws Error naming the path when PATH.tmp cannot be created (missing folder, no rights).
    explicit AtomicOutputFile(std::string path);
    ~AtomicOutputFile();
    AtomicOutputFile(const AtomicOutputFile&) = delete;
    AtomicOutputFile& operator=(const AtomicOutputFile&) = delete;

    std::FILE* stream() { return stream_; }
    const std::string& path() const { return path_; }
    // Flushes, closes and renames into place; throws Error when any write failed.
    void commit();

private:
    void discard();

    std::string path_;
    std::string temporary_path_;
    std::FILE* stream_ = nullptr;
    int cleanup_slot_ = -1;
};

// Fails early, before a long run, when PATH could not be written at the end.
void check_writable(const std::string& path);

}  // namespace trainbench::cli
