#include "data/idx_reader.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "trainbench/error.hpp"

namespace trainbench::data {
namespace {

constexpr uint32_t images_magic = 0x00000803;  // unsigned bytes, 3 dimensions
constexpr uint32_t labels_magic = 0x00000801;  // unsigned bytes, 1 dimension
constexpr uint64_t largest_payload = uint64_t{1} << 33;  // 8 GiB: beyond is a corrupt header

std::string hex32(uint32_t value) {
    char text[16];
    std::snprintf(text, sizeof text, "0x%08x", value);
    return text;
}

// Owns a gzFile; zlib reads plain files through the same calls, so one path serves both.
class IdxStream {
public:
    explicit IdxStream(const std::string& path) : path_(path), file_(gzopen(path.c_str(), "rb")) {
        if (!file_) throw Error("cannot open IDX file " + path + "; check that it exists and is readable");
        gzbuffer(file_, 1 << 20);  // large reads keep decompression of 47 MB well under a second
    }
    ~IdxStream() { gzclose(file_); }
    IdxStream(const IdxStream&) = delete;
    IdxStream& operator=(const IdxStream&) = delete;

    // Reads up to `size` bytes; returns how many arrived (fewer only at the end of the data).
    uint64_t read(void* destination, uint64_t size) {
        auto* bytes = static_cast<unsigned char*>(destination);
        uint64_t total = 0;
        while (total < size) {
            const unsigned chunk =
                static_cast<unsigned>(std::min<uint64_t>(size - total, uint64_t{1} << 30));
            const int got = gzread(file_, bytes + total, chunk);
            if (got < 0) fail_with_zlib_error();
            if (got == 0) break;
            total += static_cast<uint64_t>(got);
        }
        int code = Z_OK;
        gzerror(file_, &code);
        if (code != Z_OK && code != Z_STREAM_END) fail_with_zlib_error();
        return total;
    }

    uint32_t read_big_endian_u32(const char* what) {
        unsigned char bytes[4];
        if (read(bytes, 4) != 4) {
            throw Error("IDX file " + path_ + " is truncated: it ends inside the header (" +
                        what + "); re-download or re-extract it");
        }
        return (uint32_t{bytes[0]} << 24) | (uint32_t{bytes[1]} << 16) |
               (uint32_t{bytes[2]} << 8) | uint32_t{bytes[3]};
    }

    // Reads the `size` bytes the header declares into `out`. The buffer grows as the data
    // arrives (from 1 MiB, doubling), not to the declared size at once: a damaged or hostile
    // header of a few bytes that claims gigabytes must not cost gigabytes before the data
    // runs out (found by fuzz/fuzz_idx: a 13-byte file made the reader allocate 3 GB).
    void read_payload(std::vector<uint8_t>& out, uint64_t size, const std::string& declared) {
        constexpr uint64_t first_chunk = uint64_t{1} << 20;
        out.clear();
        uint64_t got = 0;
        while (got < size) {
            const uint64_t want = std::min(size, std::max(first_chunk, 2 * got)) - got;
            out.reserve(got + want);  // exactly: resize alone may double the capacity
            out.resize(got + want);
            const uint64_t arrived = read(out.data() + got, want);
            got += arrived;
            if (arrived < want) break;
        }
        if (got < size) {
            throw Error("IDX file " + path_ + " is truncated: its header declares " + declared +
                        " (" + std::to_string(size) + " bytes) but only " + std::to_string(got) +
                        " follow; re-download or re-extract it");
        }
        unsigned char extra;
        if (read(&extra, 1) != 0) {
            throw Error("IDX file " + path_ + " has data beyond the " + declared +
                        " its header declares; the header or the file is damaged");
        }
    }

    const std::string& path() const { return path_; }

private:
    [[noreturn]] void fail_with_zlib_error() {
        int code = Z_OK;
        const char* message = gzerror(file_, &code);
        if (code == Z_BUF_ERROR) {
            throw Error("IDX file " + path_ + " is truncated: its gzip stream ends early; "
                        "re-download it");
        }
        throw Error("IDX file " + path_ + " cannot be decompressed (" +
                    (message ? message : "zlib error") + "); re-download it");
    }

    std::string path_;
    gzFile file_;
};

void check_magic(const IdxStream& stream, uint32_t magic, uint32_t expected, const char* kind) {
    if (magic != expected) {
        throw Error("IDX file " + stream.path() + " has magic number " + hex32(magic) +
                    ", not " + hex32(expected) + " of an IDX " + kind +
                    " file; check that the right file sits under this name");
    }
}

}  // namespace

IdxImages read_idx_images(const std::string& path) {
    IdxStream stream(path);
    check_magic(stream, stream.read_big_endian_u32("magic number"), images_magic, "image");
    IdxImages images;
    images.count = stream.read_big_endian_u32("image count");
    images.rows = stream.read_big_endian_u32("row count");
    images.columns = stream.read_big_endian_u32("column count");
    if (images.count == 0 || images.rows == 0 || images.columns == 0) {
        throw Error("IDX file " + path + " declares " + std::to_string(images.count) +
                    " images of " + std::to_string(images.rows) + "x" +
                    std::to_string(images.columns) + " pixels; every dimension must be positive");
    }
    // rows * columns fits in 64 bits (each is below 2^32); the count times that may not, and a
    // product that wrapped around to a small size was accepted with dimensions that do not
    // match the pixels (found by fuzz/fuzz_idx_gzip: 65536 images of 2^24 x 2^24, no pixels).
    const uint64_t per_image = static_cast<uint64_t>(images.rows) * static_cast<uint64_t>(images.columns);
    if (per_image > largest_payload || static_cast<uint64_t>(images.count) > largest_payload / per_image) {
        throw Error("IDX file " + path + " declares " + std::to_string(images.count) + " images of " +
                    std::to_string(images.rows) + "x" + std::to_string(images.columns) +
                    " pixels, more than 8 GiB; its header is damaged");
    }
    const uint64_t size = static_cast<uint64_t>(images.count) * per_image;
    stream.read_payload(images.pixels, size,
                        std::to_string(images.count) + " images of " + std::to_string(images.rows) +
                            "x" + std::to_string(images.columns));
    return images;
}

std::vector<int32_t> read_idx_labels(const std::string& path) {
    IdxStream stream(path);
    check_magic(stream, stream.read_big_endian_u32("magic number"), labels_magic, "label");
    const uint32_t count = stream.read_big_endian_u32("label count");
    if (count == 0) throw Error("IDX file " + path + " declares 0 labels; it must hold at least one");
    std::vector<uint8_t> bytes;
    stream.read_payload(bytes, count, std::to_string(count) + " labels");
    return std::vector<int32_t>(bytes.begin(), bytes.end());
}

std::string find_idx_file(const std::string& directory, const std::string& base_name) {
    const std::filesystem::path plain = std::filesystem::path(directory) / base_name;
    std::error_code ignored;
    if (std::filesystem::is_regular_file(plain, ignored)) return plain.string();
    const std::filesystem::path compressed = std::filesystem::path(directory) / (base_name + ".gz");
    if (std::filesystem::is_regular_file(compressed, ignored)) return compressed.string();
    return {};
}

}  // namespace trainbench::data
