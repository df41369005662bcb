#pragma once
#include <cstdint>
#include <string>

#include "data/labeled_table.hpp"
#include "trainbench/dataset.hpp"

namespace trainbench::data {

// Moves round(val_fraction * rows) rows of `table` into dataset.validation and the rest into
// dataset.train, and sets task, classes, features and validation_source. With
// options.shuffle the held-out rows are picked by a seeded permutation; without it they are
// the last rows. Both splits keep the table's row order.
void split_holdout(LabeledTable table, const DataOptions& options, Dataset& dataset);

// "12.5%" for 0.125.
std::string percent_text(double fraction);

// "10% held out", "12.5% held out", or "none" for a zero fraction.
std::string describe_holdout(double val_fraction);

}  // namespace trainbench::data
