#pragma once
#include <optional>
#include <string>

#include "atomic_output_file.hpp"
#include "trainbench/metrics.hpp"

namespace trainbench::cli {

// `--metrics-out FILE.csv`: one row per optimizer update, columns as in docs/METRICS.md.
// The validation figures of an epoch belong on the row of the update that ended it, and the
// trainer reports them after that update, so each row is held back until the next update (or
// the epoch end, or commit) arrives.
class MetricsCsvWriter {
public:
    explicit MetricsCsvWriter(const std::string& path);  // throws Error when not writable

    void add_update(const StepMetrics& metrics);
    void add_epoch_end(const EpochMetrics& epoch);
    int64_t rows_written() const { return rows_written_; }
    // Writes the held-back row and moves the file into place.
    void commit();

private:
    void write_pending(const EpochMetrics* epoch);

    AtomicOutputFile file_;
    std::optional<StepMetrics> pending_;
    int64_t rows_written_ = 0;
};

// The header line, without the newline (also used by the tests and docs).
const char* metrics_csv_header();

}  // namespace trainbench::cli
