#pragma once
#include <string>

#include "data/labeled_table.hpp"

namespace trainbench::data {

// Reads a CSV file: a header row, then numeric rows; the last column is the target. When every
// target is a whole number the table is a classification with max(target) + 1 classes,
// otherwise a regression. Errors name file:line and the column.
LabeledTable read_csv_table(const std::string& path);

}  // namespace trainbench::data
