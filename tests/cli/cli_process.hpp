#pragma once
// Runs the trainbench-cli binary under test and reads its metrics CSV; shared by the cli suites.
#include <QDir>
#include <QFile>
#include <QProcess>
#include <QStringList>
#include <QTextStream>
#include <QtTest>

#include <optional>

struct CliRun {
    int exit_code = -1;
    bool finished = false;
    QString out;
    QString err;
    // stderr without trailing blank lines, split into lines
    QStringList error_lines() const {
        QStringList lines = err.split('\n');
        while (!lines.isEmpty() && lines.last().trimmed().isEmpty()) lines.removeLast();
        return lines;
    }
};

inline CliRun run_cli(const QStringList& arguments, int timeout_ms = 120000,
                      const QString& working_directory = {}) {
    QProcess process;
    if (!working_directory.isEmpty()) process.setWorkingDirectory(working_directory);
    process.start(QStringLiteral(TRAINBENCH_CLI_PATH), arguments);
    CliRun run;
    if (!process.waitForStarted(10000)) {
        run.err = "could not start " + QStringLiteral(TRAINBENCH_CLI_PATH);
        return run;
    }
    run.finished = process.waitForFinished(timeout_ms);
    if (!run.finished) {
        process.kill();
        process.waitForFinished(5000);
    }
    run.exit_code = process.exitStatus() == QProcess::NormalExit ? process.exitCode() : -1;
    run.out = QString::fromUtf8(process.readAllStandardOutput());
    run.err = QString::fromUtf8(process.readAllStandardError());
    return run;
}

// A text file for a language-model run: `line` written `times` times. False when it cannot be written.
inline bool write_repeated_text(const QString& path, const QByteArray& line, int times) {
    QFile file(path);
    if (!file.open(QIODevice::WriteOnly)) return false;
    for (int i = 0; i < times; ++i)
        if (file.write(line) != line.size()) return false;
    return true;
}

// A line of the text the GPT suites train on (200 of them: 12,600 characters).
inline const QByteArray kGptTestLine = "In the beginning was the word, and the word was with the text.\n";

// A metrics CSV as header + rows of cells, so tests address columns by name.
struct MetricsTable {
    QStringList header;
    QList<QStringList> rows;
    int column(const QString& name) const { return header.indexOf(name); }
    QString cell(int row, const QString& name) const { return rows.at(row).at(column(name)); }
};

// One CSV line's cells; a quoted cell may hold commas and doubled quotes (RFC 4180).
inline QStringList split_csv_line(const QString& line) {
    QStringList cells{QString()};
    bool quoted = false;
    for (qsizetype i = 0; i < line.size(); ++i) {
        const QChar c = line[i];
        if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
            cells.back() += '"';
            ++i;
        } else if (c == '"') {
            quoted = !quoted;
        } else if (c == ',' && !quoted) {
            cells.append(QString());
        } else {
            cells.back() += c;
        }
    }
    return cells;
}

inline std::optional<MetricsTable> read_metrics_csv(const QString& path) {
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly | QIODevice::Text)) return std::nullopt;
    MetricsTable table;
    QTextStream stream(&file);
    table.header = split_csv_line(stream.readLine());
    while (!stream.atEnd()) {
        QString line = stream.readLine();
        if (!line.isEmpty()) table.rows.append(split_csv_line(line));
    }
    return table;
}

// The last non-empty value of `column` (validation figures appear only on epoch-end rows).
inline std::optional<double> last_value(const MetricsTable& table, const QString& column) {
    const int index = table.column(column);
    if (index < 0) return std::nullopt;
    for (auto row = table.rows.crbegin(); row != table.rows.crend(); ++row)
        if (row->size() > index && !row->at(index).isEmpty()) return row->at(index).toDouble();
    return std::nullopt;
}

#define CLI_DIAGNOSTICS(run) \
    qPrintable(QStringLiteral("exit %1\nstdout:\n%2\nstderr:\n%3").arg((run).exit_code).arg((run).out, (run).err))
