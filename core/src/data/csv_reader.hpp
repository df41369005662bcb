#pragma once
#include <istream>
#include <string>

#include "data/labeled_table.hpp"

namespace trainbench::data {

// Reads a CSV file: a header row, then numeric rows; the last column is the target. When every
// target is a whole number the table is a classification with max(target) + 1 classes,
// otherwise a regression. Errors name file:line and the column.
LabeledTable read_csv_table(const std::string& path);
// The same from a stream (e.g. text held in memory); `path` only names it in messages.
LabeledTable read_csv_table(std::istream& in, const std::string& path);

}  // namespace trainbench::data
