#include "atomic_output_file.hpp"

#include <cerrno>
#include <cstring>
#include <unistd.h>

#include "interrupt.hpp"
#include "trainbench/error.hpp"

namespace trainbench::cli {

AtomicOutputFile::AtomicOutputFile(std::string path)
    : path_(std::move(path)), temporary_path_(path_ + ".tmp") {
    stream_ = std::fopen(temporary_path_.c_str(), "wb");
    if (!stream_)
        throw Error("cannot write '" + path_ + "': " + std::strerror(errno) +
                    " (check that the folder exists and is writable)");
    cleanup_slot_ = register_temporary_file(temporary_path_);
}

AtomicOutputFile::~AtomicOutputFile() { discard(); }

void AtomicOutputFile::discard() {
    if (!stream_) return;
    std::fclose(stream_);
    stream_ = nullptr;
    std::remove(temporary_path_.c_str());
    unregister_temporary_file(cleanup_slot_);
}

void AtomicOutputFile::commit() {
    if (!stream_) throw Error("internal: '" + path_ + "' committed twice");
    bool written = std::fflush(stream_) == 0 && !std::ferror(stream_) && ::fsync(fileno(stream_)) == 0;
    int error_number = errno;
    bool closed = std::fclose(stream_) == 0;
    stream_ = nullptr;
    if (!written || !closed || std::rename(temporary_path_.c_str(), path_.c_str()) != 0) {
        if (closed && written) error_number = errno;
        std::remove(temporary_path_.c_str());
        unregister_temporary_file(cleanup_slot_);
        throw Error("cannot write '" + path_ + "': " + std::strerror(error_number));
    }
    unregister_temporary_file(cleanup_slot_);
}

void check_writable(const std::string& path) {
    AtomicOutputFile probe(path);  // removed again when it goes out of scope
}

}  // namespace trainbench::cli
