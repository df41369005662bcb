#pragma once
#include <cstdint>

#include "trainbench/dataset.hpp"

namespace trainbench::data {

// All rows of a source that has no separate test set, before the held-out rows are split off.
struct LabeledTable {
    Task task = Task::classification;
    int64_t num_classes = 0;  // classification only
    DataSplit rows;
};

}  // namespace trainbench::data
