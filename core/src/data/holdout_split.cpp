#include "data/holdout_split.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "data/portable_random.hpp"
#include "trainbench/error.hpp"

namespace trainbench::data {
namespace {

constexpr uint64_t holdout_seed_purpose = 2;

DataSplit copy_rows(const DataSplit& source, const std::vector<int64_t>& rows) {
    DataSplit split;
    split.count = static_cast<int64_t>(rows.size());
    split.features = source.features;
    const size_t width = static_cast<size_t>(source.features);
    split.values_f32.resize(rows.size() * width);
    for (size_t i = 0; i < rows.size(); ++i) {
        std::copy_n(source.values_f32.begin() + rows[i] * width, width,
                    split.values_f32.begin() + i * width);
    }
    if (!source.labels.empty()) {
        split.labels.reserve(rows.size());
        for (int64_t row : rows) split.labels.push_back(source.labels[row]);
    }
    if (!source.targets.empty()) {
        split.targets.reserve(rows.size());
        for (int64_t row : rows) split.targets.push_back(source.targets[row]);
    }
    return split;
}

}  // namespace

std::string percent_text(double fraction) {
    char text[32];
    std::snprintf(text, sizeof text, "%g%%", fraction * 100.0);
    return text;
}

std::string describe_holdout(double val_fraction) {
    if (val_fraction == 0.0) return "none";
    return percent_text(val_fraction) + " held out";
}

void split_holdout(LabeledTable table, const DataOptions& options, Dataset& dataset) {
    const int64_t rows = table.rows.count;
    int64_t held_out = std::llround(static_cast<double>(rows) * options.val_fraction);
    if (options.val_fraction > 0.0) held_out = std::max<int64_t>(held_out, 1);
    if (rows - held_out < 1) {
        throw Error("data set '" + dataset.name + "' has " + std::to_string(rows) +
                    " rows, too few to hold out " + percent_text(options.val_fraction) +
                    " of them and still train; lower val_fraction or add rows");
    }

    std::vector<bool> is_held_out(static_cast<size_t>(rows), false);
    if (options.shuffle) {
        std::vector<int64_t> order(static_cast<size_t>(rows));
        seeded_permutation(order, derive_seed(options.seed, holdout_seed_purpose));
        for (int64_t i = 0; i < held_out; ++i) is_held_out[order[i]] = true;
    } else {
        std::fill(is_held_out.end() - held_out, is_held_out.end(), true);
    }
    std::vector<int64_t> train_rows;
    std::vector<int64_t> validation_rows;
    train_rows.reserve(rows - held_out);
    validation_rows.reserve(held_out);
    for (int64_t row = 0; row < rows; ++row) {
        (is_held_out[row] ? validation_rows : train_rows).push_back(row);
    }

    dataset.task = table.task;
    dataset.num_classes = table.task == Task::classification ? table.num_classes : 0;
    dataset.features = table.rows.features;
    dataset.validation_source = describe_holdout(options.val_fraction);
    if (held_out == 0) {
        dataset.train = std::move(table.rows);
        dataset.validation = DataSplit{};
        dataset.validation.features = dataset.features;
        return;
    }
    dataset.train = copy_rows(table.rows, train_rows);
    dataset.validation = copy_rows(table.rows, validation_rows);
}

}  // namespace trainbench::data
