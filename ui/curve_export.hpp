#pragma once
#include <QString>
#include <vector>

namespace trainbench::ui {

struct RunRecord;

// Loss curves of the given runs: one row per update per run, each row carrying the run's name
// and key settings so a spreadsheet or pandas can group and compare without the session file.
// A figure the CLI's metrics CSV also has (docs/METRICS.md) has the CLI's column name.
// Numbers are written with 17 significant digits, so they read back exactly. Throws Error when
// the file cannot be written.
void write_curves_csv(const QString& path, const std::vector<const RunRecord*>& runs);
void write_curves_json(const QString& path, const std::vector<const RunRecord*>& runs);

// The CSV header, in column order (tests read columns by these names).
QStringList curves_csv_columns();

}  // namespace trainbench::ui
