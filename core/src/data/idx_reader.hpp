#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace trainbench::data {

// The IDX format of MNIST and Fashion-MNIST: a big-endian header (magic, dimensions) followed
// by unsigned bytes. Files may be gzip-compressed or plain; both are read through zlib.
struct IdxImages {
    int64_t count = 0;
    int64_t rows = 0;
    int64_t columns = 0;
    std::vector<uint8_t> pixels;  // count * rows * columns, image after image
};

// Throw Error naming `path` and what is wrong: bad magic number, zero dimension, truncated
// data, bytes beyond what the header declares, or a damaged gzip stream.
IdxImages read_idx_images(const std::string& path);
std::vector<int32_t> read_idx_labels(const std::string& path);

// `directory`/`base_name`, or `directory`/`base_name`.gz when only that exists; empty when
// neither does.
std::string find_idx_file(const std::string& directory, const std::string& base_name);

}  // namespace trainbench::data
