#pragma once
// Reads one file as IDX images and as IDX labels (data/idx_reader.cpp; `--dataset idx:DIR`
// and fashion-mnist), checking what a successful read promises.
#include <string>

#include "data/idx_reader.hpp"
#include "fuzz_support.hpp"

namespace trainbench::fuzz {

inline void read_as_idx_images_and_labels(const std::string& path) {
    try {
        const data::IdxImages images = data::read_idx_images(path);
        FUZZ_CHECK(images.count > 0 && images.rows > 0 && images.columns > 0);
        FUZZ_CHECK(images.pixels.size() == static_cast<size_t>(images.count * images.rows * images.columns));
    } catch (const Error&) {
    }
    try {
        const std::vector<int32_t> labels = data::read_idx_labels(path);
        FUZZ_CHECK(!labels.empty());
        for (int32_t label : labels) FUZZ_CHECK(label >= 0 && label <= 255);
    } catch (const Error&) {
    }
}

}  // namespace trainbench::fuzz
