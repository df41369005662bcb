// Exports: loss-curve CSV rows equal the run's metrics, JSON and plot files are written, the
// config reloads as the same config, and a saved session reopens with every metric.
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include "config_panel.hpp"
#include "main_window.hpp"
#include "run_controller.hpp"
#include "run_store.hpp"
#include "runs_table.hpp"
#include "settings_diff_dialog.hpp"
#include "curve_export.hpp"
#include "trainbench/config_json.hpp"
#include "trainbench/weights.hpp"
#include "ui_test_support.hpp"

using namespace trainbench;
using namespace trainbench::ui;

namespace {

// RFC 4180 fields: quoted fields may hold commas and doubled quotes.
QStringList split_csv_line(const QString& line) {
    QStringList fields;
    QString field;
    bool quoted = false;
    for (int i = 0; i < line.size(); ++i) {
        const QChar c = line[i];
        if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
            field += '"';
            ++i;
        } else if (c == '"') {
            quoted = !quoted;
        } else if (c == ',' && !quoted) {
            fields << field;
            field.clear();
        } else {
            field += c;
        }
    }
    fields << field;
    return fields;
}

}  // namespace

class ExportTest : public QObject {
    Q_OBJECT
private:
    std::unique_ptr<MainWindow> window_;
    QTemporaryDir dir_;

    QString path(const char* name) const { return dir_.filePath(QString::fromLatin1(name)); }

private slots:
    void initTestCase() {
        testing::isolate_settings();
        QVERIFY(dir_.isValid());
        window_ = std::make_unique<MainWindow>();
        window_->resize(1400, 900);
        window_->show();
        window_->configPanel()->setConfig(testing::small_config(120, 2));
        window_->startRun();
        QTRY_VERIFY_WITH_TIMEOUT(!window_->runController().isRunning(), 30000);
        window_->configPanel()->setConfig(testing::small_config(80, 4));
        window_->startRun();
        QTRY_VERIFY_WITH_TIMEOUT(!window_->runController().isRunning(), 30000);
        QCOMPARE(window_->runStore().runs().size(), std::size_t{2});
    }

    void cleanupTestCase() { window_.reset(); }

    void csvRowsMatchTheRunsMetrics() {
        window_->exportCurvesCsv(path("curves.csv"));
        QFile file(path("curves.csv"));
        QVERIFY(file.open(QIODevice::ReadOnly | QIODevice::Text));
        const QStringList header = QString::fromUtf8(file.readLine()).trimmed().split(',');
        QCOMPARE(header, curves_csv_columns());
        const int run_column = header.indexOf("run"), update_column = header.indexOf("update"),
                  loss_column = header.indexOf("loss"), step_column = header.indexOf("step_size"),
                  ms_column = header.indexOf("update_ms");
        std::map<QString, const RunRecord*> by_name;
        for (const auto& run : window_->runStore().runs()) by_name[run->name] = run.get();
        std::map<QString, std::size_t> rows_per_run;
        while (!file.atEnd()) {
            const QStringList fields = split_csv_line(QString::fromUtf8(file.readLine()).trimmed());
            QCOMPARE(fields.size(), header.size());
            const RunRecord* run = by_name.at(fields[run_column]);
            const std::size_t index = rows_per_run[run->name]++;
            QVERIFY(index < run->steps.size());
            const auto& step = run->steps[index];
            QCOMPARE(fields[update_column].toLongLong(), step.update);
            QCOMPARE(fields[loss_column].toDouble(), step.loss);  // exact: 17 significant digits
            QCOMPARE(fields[ms_column].toDouble(), step.update_ms);
            QCOMPARE(fields[step_column].toLongLong(), run->config.step_size);
            QCOMPARE(fields[header.indexOf("hidden")], QStringLiteral("32,32"));
        }
        for (const auto& [name, run] : by_name) QCOMPARE(rows_per_run[name], run->steps.size());
    }

    // A figure the CLI's metrics CSV also writes has the CLI's column name, and for the same
    // run (the second run's config, trained by trainbench-cli) the same values.
    void csvColumnsAreTheClisForTheSameQuantities() {
        const RunRecord& run = *window_->runStore().runs().back();
        QFile config(path("cli-run.json"));
        QVERIFY(config.open(QIODevice::WriteOnly));
        config.write(QByteArray::fromStdString(config_to_json(run.config)));
        config.close();
        QProcess cli;
        cli.start(QStringLiteral(TRAINBENCH_CLI_PATH),
                  {"train", "--config", path("cli-run.json"), "--metrics-out", path("cli-metrics.csv"), "--quiet"});
        QVERIFY(cli.waitForFinished(60000));
        QVERIFY2(cli.exitStatus() == QProcess::NormalExit && cli.exitCode() == 0, cli.readAllStandardError().constData());
        QFile cli_file(path("cli-metrics.csv"));
        QVERIFY(cli_file.open(QIODevice::ReadOnly | QIODevice::Text));
        const QStringList cli_header = QString::fromUtf8(cli_file.readLine()).trimmed().split(',');
        QList<QStringList> cli_rows;
        while (!cli_file.atEnd()) cli_rows << QString::fromUtf8(cli_file.readLine()).trimmed().split(',');
        QCOMPARE(static_cast<std::size_t>(cli_rows.size()), run.steps.size());

        // Every per-update column of the app's CSV (after the run's settings) is one of the CLI's.
        const QStringList settings{"run",       "dataset",    "model",      "hidden",    "n_layer",
                                   "n_head",    "n_embd",     "block_size", "batch_size", "step_size",
                                   "micro_batch", "precision", "device",    "optimizer", "lr"};
        const QStringList columns = curves_csv_columns();
        QCOMPARE(columns.mid(0, settings.size()), settings);
        const QStringList shared = columns.mid(settings.size());
        for (const QString& column : shared) QVERIFY2(cli_header.contains(column), qPrintable(column));
        for (const char* column : {"mem_total", "mem_update_peak_live", "mem_update_peak_activations"})
            QVERIFY(shared.contains(QString(column)));

        window_->exportCurvesCsv(path("curves-vs-cli.csv"));
        QFile file(path("curves-vs-cli.csv"));
        QVERIFY(file.open(QIODevice::ReadOnly | QIODevice::Text));
        QCOMPARE(QString::fromUtf8(file.readLine()).trimmed().split(','), columns);
        int compared = 0;
        while (!file.atEnd()) {
            const QStringList fields = split_csv_line(QString::fromUtf8(file.readLine()).trimmed());
            if (fields[0] != run.name) continue;
            const QStringList& cli_row = cli_rows.at(compared++);
            for (const QString& column : shared) {
                if (column == "wall_seconds" || column == "update_ms" || column == "samples_per_second" ||
                    column == "tokens_per_second" || column == "mfu" || column == "rss_bytes")
                    continue;  // timings and the process's size differ between two processes
                const QString app_value = fields[columns.indexOf(column)];
                const QString cli_value = cli_row[cli_header.indexOf(column)];
                // The CLI writes 9 significant digits, the app 17: compare at the CLI's.
                const QString app_rounded = app_value.contains('.') || app_value.contains('e')
                                                ? QString::asprintf("%.9g", app_value.toDouble())
                                                : app_value;
                QVERIFY2(app_rounded == cli_value,
                         qPrintable(QString("update %1, %2: app %3, CLI %4").arg(compared).arg(column, app_value, cli_value)));
            }
        }
        QCOMPARE(static_cast<std::size_t>(compared), run.steps.size());
    }

    void jsonHoldsEveryUpdate() {
        window_->exportCurvesJson(path("curves.json"));
        QFile file(path("curves.json"));
        QVERIFY(file.open(QIODevice::ReadOnly));
        const QJsonArray runs = QJsonDocument::fromJson(file.readAll()).object()["runs"].toArray();
        QCOMPARE(runs.size(), 2);
        const RunRecord& first = *window_->runStore().runs().front();
        const QJsonArray loss = runs[0].toObject()["updates"].toObject()["loss"].toArray();
        QCOMPARE(static_cast<std::size_t>(loss.size()), first.steps.size());
        QCOMPARE(loss.last().toDouble(), first.steps.back().loss);
    }

    void plotsAreWrittenAsPngPdfAndSvg() {
        for (const char* name : {"plots.png", "plots.pdf", "plots.svg"}) {
            const auto written = window_->exportPlots(path(name));
            QVERIFY(written.size() >= 3);
            for (const QString& file : written) {
                QVERIFY2(QFileInfo(file).size() > 1000, qPrintable(file));
            }
        }
        QFile png(path("plots-loss.png"));
        QVERIFY(png.open(QIODevice::ReadOnly));
        QCOMPARE(png.read(8), QByteArray("\x89PNG\r\n\x1a\n", 8));
        QFile pdf(path("plots-memory.pdf"));
        QVERIFY(pdf.open(QIODevice::ReadOnly));
        QVERIFY(pdf.read(5) == QByteArray("%PDF-"));
    }

    void configExportLoadsBackIdentically() {
        window_->exportConfig(path("config.json"));
        const RunConfig loaded = load_config_file(path("config.json").toStdString());
        QCOMPARE(QString::fromStdString(config_to_json(loaded)),
                 QString::fromStdString(config_to_json(window_->configPanel()->config())));
    }

    void weightsExportAsSafetensors() {
        window_->exportWeights(path("weights.safetensors"));
        const ModelWeights weights = load_weights(path("weights.safetensors").toStdString());
        const RunRecord& latest = *window_->runStore().runs().back();
        QCOMPARE(weights.tensors.size(), latest.weights.tensors.size());
        QCOMPARE(weights.tensors.front().data, latest.weights.tensors.front().data);
    }

    void sessionReopensWithAllMetrics() {
        window_->saveSession(path("session.json"));
        MainWindow reopened;
        reopened.openSession(path("session.json"));
        const auto& original = window_->runStore().runs();
        const auto& loaded = reopened.runStore().runs();
        QCOMPARE(loaded.size(), original.size());
        for (std::size_t r = 0; r < loaded.size(); ++r) {
            QCOMPARE(loaded[r]->name, original[r]->name);
            QCOMPARE(loaded[r]->steps.size(), original[r]->steps.size());
            QCOMPARE(loaded[r]->epochs.size(), original[r]->epochs.size());
            QCOMPARE(loaded[r]->config.step_size, original[r]->config.step_size);
            for (std::size_t i = 0; i < loaded[r]->steps.size(); ++i) {
                QCOMPARE(loaded[r]->steps[i].loss, original[r]->steps[i].loss);
                QCOMPARE(loaded[r]->steps[i].memory.update_peak, original[r]->steps[i].memory.update_peak);
            }
        }
        QVERIFY(reopened.plotArea() != nullptr);
    }

    // A language-model run's exports carry its family, its shape, tokens/s, MFU and its samples.
    void gptRunExportsItsModelAndSamples() {
        MainWindow window;
        auto record = std::make_unique<RunRecord>();
        record->name = QStringLiteral("gpt run");
        record->config = default_example_config();
        record->state = RunState::completed;
        for (int64_t update = 1; update <= 3; ++update) {
            StepMetrics step;
            step.update = update;
            step.samples_seen = 32 * update;
            step.loss = 4.0 - 0.1 * static_cast<double>(update);
            step.samples_per_second = 100.0;
            step.tokens_per_second = 6400.0;
            step.mfu = 0.25;
            record->steps.push_back(step);
        }
        RunRecord& run = window.runStore().adoptRun(std::move(record));
        window.runStore().appendSamples(run.id, {{2, QStringLiteral("\nAnd God said")}});
        window.runsTable()->selectRow(window.runsTable()->rowOf(run.id));

        window.exportCurvesCsv(path("gpt.csv"));
        QFile csv(path("gpt.csv"));
        QVERIFY(csv.open(QIODevice::ReadOnly | QIODevice::Text));
        const QStringList header = QString::fromUtf8(csv.readLine()).trimmed().split(',');
        const QStringList row = split_csv_line(QString::fromUtf8(csv.readLine()).trimmed());
        QCOMPARE(row[header.indexOf("model")], QStringLiteral("gpt"));
        QCOMPARE(row[header.indexOf("n_layer")], QStringLiteral("2"));
        QCOMPARE(row[header.indexOf("block_size")], QStringLiteral("64"));
        QCOMPARE(row[header.indexOf("hidden")], QString());
        QCOMPARE(row[header.indexOf("tokens_per_second")].toDouble(), 6400.0);
        QCOMPARE(row[header.indexOf("mfu")].toDouble(), 0.25);

        window.exportCurvesJson(path("gpt.json"));
        QFile json_file(path("gpt.json"));
        QVERIFY(json_file.open(QIODevice::ReadOnly));
        const QJsonObject entry = QJsonDocument::fromJson(json_file.readAll()).object()["runs"].toArray()[0].toObject();
        QCOMPARE(entry["config"].toObject()["model"].toString(), QStringLiteral("gpt"));
        QCOMPARE(entry["config"].toObject()["n_embd"].toInt(), 64);
        QCOMPARE(entry["updates"].toObject()["tokens_per_second"].toArray()[0].toDouble(), 6400.0);
        QCOMPARE(entry["samples"].toArray()[0].toObject()["update"].toInt(), 2);
        QCOMPARE(entry["samples"].toArray()[0].toObject()["text"].toString(), QStringLiteral("\nAnd God said"));
    }

    void settingsDifferenceListsStepSize() {
        const auto& runs = window_->runStore().runs();
        const auto differences = compare_settings(runs[0]->config, runs[1]->config);
        QStringList keys;
        for (const auto& difference : differences) keys << difference.key;
        QVERIFY2(keys.contains(QStringLiteral("step_size")), qPrintable(keys.join(',')));
        QVERIFY2(keys.contains(QStringLiteral("max_steps")), qPrintable(keys.join(',')));
        QCOMPARE(keys.size(), 2);
    }
};

QTEST_MAIN(ExportTest)
#include "test_export.moc"
