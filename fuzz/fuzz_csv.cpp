// The CSV data-set reader (`--dataset csv:PATH`, data/csv_reader.cpp) and the hold-out split
// that load_dataset applies to its table.
#include <sstream>
#include <string>

#include "data/csv_reader.hpp"
#include "data/holdout_split.hpp"
#include "fuzz_support.hpp"

using namespace trainbench;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::istringstream in{std::string(fuzz::bytes_of(data, size))};
    data::LabeledTable table;
    try {
        table = data::read_csv_table(in, "fuzz.csv");
    } catch (const Error&) {
        return 0;
    }
    const DataSplit& rows = table.rows;
    FUZZ_CHECK(rows.count > 0 && rows.features > 0);
    FUZZ_CHECK(static_cast<int64_t>(rows.values_f32.size()) == rows.count * rows.features);
    if (table.task == Task::classification) {
        FUZZ_CHECK(static_cast<int64_t>(rows.labels.size()) == rows.count);
        for (int32_t label : rows.labels) FUZZ_CHECK(label >= 0 && label < table.num_classes);
    } else {
        FUZZ_CHECK(table.task == Task::regression);
        FUZZ_CHECK(static_cast<int64_t>(rows.targets.size()) == rows.count);
    }
    const int64_t count = rows.count;
    DataOptions options;  // what `--dataset csv:PATH` uses: 10% held out, shuffled
    Dataset dataset;
    try {
        data::split_holdout(std::move(table), options, dataset);
    } catch (const Error&) {
        return 0;
    }
    FUZZ_CHECK(dataset.train.count + dataset.validation.count == count);
    return 0;
}
