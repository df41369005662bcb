#pragma once
#include <cstdint>
#include <string>

#include "data/labeled_table.hpp"

namespace trainbench::data {

bool is_synthetic_set(const std::string& name);

// Generates `samples` rows of "spirals", "moons", "blobs" or "sine" from `seed`. Classes take
// turns row by row, so every class has the same share (to within one row) of any prefix.
LabeledTable make_synthetic_set(const std::string& name, int64_t samples, uint64_t seed);

}  // namespace trainbench::data
