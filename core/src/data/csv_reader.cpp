#include "data/csv_reader.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string_view>
#include <vector>

#include "trainbench/error.hpp"

namespace trainbench::data {
namespace {

// More classes than this is almost surely a regression target or an id column by mistake.
constexpr int64_t most_classes = 100000;

std::string_view trim(std::string_view text) {
    const auto first = text.find_first_not_of(" \t\r");
    if (first == std::string_view::npos) return {};
    const auto last = text.find_last_not_of(" \t\r");
    return text.substr(first, last - first + 1);
}

std::vector<std::string_view> split_cells(std::string_view line) {
    std::vector<std::string_view> cells;
    size_t start = 0;
    for (;;) {
        const size_t comma = line.find(',', start);
        if (comma == std::string_view::npos) {
            cells.push_back(trim(line.substr(start)));
            return cells;
        }
        cells.push_back(trim(line.substr(start, comma - start)));
        start = comma + 1;
    }
}

// A whole-number target as text. Exact below 2^53; beyond, in exponent form ("1e+300"),
// because converting a double that int64_t cannot hold is undefined behaviour.
std::string whole_number_text(double value) {
    if (std::fabs(value) < 9007199254740992.0) return std::to_string(static_cast<int64_t>(value));
    char text[32];
    std::snprintf(text, sizeof text, "%g", value);
    return text;
}

std::string column_name(const std::vector<std::string>& header, size_t column) {
    return "column " + std::to_string(column + 1) + " ('" + header[column] + "')";
}

}  // namespace

LabeledTable read_csv_table(const std::string& path) {
    std::ifstream file(path, std::ios::binary);
    if (!file) throw Error("cannot open CSV file " + path + "; check the path after 'csv:'");
    return read_csv_table(file, path);
}

LabeledTable read_csv_table(std::istream& file, const std::string& path) {
    std::string line;
    int64_t line_number = 0;
    std::vector<std::string> header;
    while (header.empty() && std::getline(file, line)) {
        ++line_number;
        if (trim(line).empty()) continue;
        for (std::string_view cell : split_cells(line)) header.emplace_back(cell);
    }
    if (header.empty()) {
        throw Error("CSV file " + path + " is empty; it needs a header row and numeric rows "
                    "whose last column is the target");
    }
    if (header.size() < 2) {
        throw Error(path + ":" + std::to_string(line_number) + ": the header has " +
                    std::to_string(header.size()) +
                    " column; a CSV data set needs at least one feature column and a target column");
    }

    const size_t columns = header.size();
    const size_t features = columns - 1;
    std::vector<float> values;
    std::vector<double> targets;
    std::vector<int64_t> target_lines;  // for errors found after reading, e.g. negative labels
    while (std::getline(file, line)) {
        ++line_number;
        if (trim(line).empty()) continue;  // blank lines (e.g. at the end) carry no row
        const std::vector<std::string_view> cells = split_cells(line);
        const std::string where = path + ":" + std::to_string(line_number);
        if (cells.size() != columns) {
            throw Error(where + ": row has " + std::to_string(cells.size()) +
                        " columns but the header has " + std::to_string(columns) +
                        "; every row needs one value per header column");
        }
        for (size_t column = 0; column < columns; ++column) {
            const std::string_view cell = cells[column];
            // from_chars takes no leading '+', which spreadsheets sometimes write
            const std::string_view number =
                cell.size() > 1 && cell[0] == '+' && cell[1] != '-' && cell[1] != '+' ? cell.substr(1) : cell;
            double value = 0.0;
            const auto [end, error] =
                std::from_chars(number.data(), number.data() + number.size(), value);
            if (number.empty() || error != std::errc() || end != number.data() + number.size() ||
                !std::isfinite(value)) {
                throw Error(where + ": " + column_name(header, column) + " holds '" +
                            std::string(cell) + "', not a finite number; every cell must be numeric");
            }
            if (column < features) {
                values.push_back(static_cast<float>(value));
            } else {
                targets.push_back(value);
                target_lines.push_back(line_number);
            }
        }
    }
    if (targets.empty()) {
        throw Error("CSV file " + path + " has a header but no data rows; add numeric rows below it");
    }

    LabeledTable table;
    table.rows.count = static_cast<int64_t>(targets.size());
    table.rows.features = static_cast<int64_t>(features);
    table.rows.values_f32 = std::move(values);

    bool whole_targets = true;
    for (double target : targets) whole_targets = whole_targets && target == std::floor(target);
    if (!whole_targets) {
        table.task = Task::regression;
        table.rows.targets.assign(targets.begin(), targets.end());
        return table;
    }

    table.task = Task::classification;
    double largest = 0.0;
    for (size_t row = 0; row < targets.size(); ++row) {
        if (targets[row] < 0.0) {
            throw Error(path + ":" + std::to_string(target_lines[row]) + ": class label " +
                        whole_number_text(targets[row]) + " in " +
                        column_name(header, features) +
                        "; whole-number targets are class labels and must be 0, 1, 2, ...; renumber the classes");
        }
        largest = std::max(largest, targets[row]);
    }
    if (largest >= most_classes) {
        throw Error("CSV file " + path + ": the target " + column_name(header, features) +
                    " holds whole numbers up to " + whole_number_text(largest) +
                    ", too many classes; class labels must be 0.." +
                    std::to_string(most_classes - 1));
    }
    table.num_classes = static_cast<int64_t>(largest) + 1;
    table.rows.labels.reserve(targets.size());
    for (double target : targets) table.rows.labels.push_back(static_cast<int32_t>(target));
    return table;
}

}  // namespace trainbench::data
