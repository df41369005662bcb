// End-to-end runs of `trainbench-cli train` on synthetic data: it learns, the metrics CSV has
// one row per update, weights round-trip through --save-weights/--init-weights, Ctrl-C
// stops the run but keeps what was measured, and --events-out streams the run as JSON lines.
#include <QElapsedTimer>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QThread>

#include <csignal>
#include <map>
#include <vector>

#include "cli/cli_process.hpp"
#include "trainbench/error.hpp"
#include "trainbench/run_events.hpp"

namespace {

// "result: completed after 171 updates, ..." -> 171
int reported_updates(const QString& out) {
    auto match = QRegularExpression("result: \\w+ after (\\d+) updates").match(out);
    return match.hasMatch() ? match.captured(1).toInt() : -1;
}

const char* kMetricsHeader =
    "update,epoch,samples_seen,wall_seconds,loss,learning_rate,grad_norm,update_ms,"
    "samples_per_second,batch_samples,loss_scale,skipped,mem_parameters,mem_gradients,"
    "mem_optimizer_state,mem_master_weights,mem_activations,mem_workspace,mem_cache,mem_total,"
    "mem_peak_total,rss_bytes,device_used_bytes,val_loss,val_accuracy,tokens_per_second,mfu,"
    "mem_update_peak_parameters,mem_update_peak_gradients,mem_update_peak_optimizer_state,"
    "mem_update_peak_master_weights,mem_update_peak_activations,mem_update_peak_workspace,"
    "mem_update_peak_cache,mem_update_peak_live,comm_ms";

const char* kCategories[] = {"parameters",  "gradients", "optimizer_state", "master_weights",
                             "activations", "workspace", "cache"};

}  // namespace

class CliTrainingTest : public QObject {
    Q_OBJECT

private:
    QTemporaryDir scratch_;
    QString path(const QString& name) const { return scratch_.filePath(name); }

private slots:
    void initTestCase() { QVERIFY(scratch_.isValid()); }

    void spirals_reach_95_percent() {
        const QString metrics = path("spirals.csv");
        CliRun run = run_cli({"train", "--dataset", "spirals", "--epochs", "5", "--lr", "0.01",
                              "--threads", "1", "--metrics-out", metrics});
        QVERIFY2(run.exit_code == 0, CLI_DIAGNOSTICS(run));
        auto table = read_metrics_csv(metrics);
        QVERIFY(table.has_value());
        auto accuracy = last_value(*table, "val_accuracy");
        QVERIFY(accuracy.has_value());
        QVERIFY2(*accuracy >= 0.95, qPrintable(QString::number(*accuracy)));
        // The summary agrees with the file.
        auto match = QRegularExpression("validation: loss [^,]+, accuracy (\\d+\\.\\d+)%").match(run.out);
        QVERIFY2(match.hasMatch(), qPrintable(run.out));
        QVERIFY(std::abs(match.captured(1).toDouble() - 100.0 * *accuracy) < 0.01);
        QVERIFY(!QFile::exists(metrics + ".tmp"));
    }

    void metrics_csv_has_one_row_per_update() {
        // 1000 samples, 10% held out: 900 train / batch 64 = 15 updates per epoch, the last
        // one partial; max-steps cuts the third epoch short.
        const QString metrics = path("rows.csv");
        CliRun run = run_cli({"train", "--dataset", "moons", "--samples", "1000", "--epochs", "3",
                              "--max-steps", "40", "--batch-size", "64", "--step-size", "3",
                              "--hidden", "16", "--threads", "1", "--metrics-out", metrics});
        QVERIFY2(run.exit_code == 0, CLI_DIAGNOSTICS(run));
        auto table = read_metrics_csv(metrics);
        QVERIFY(table.has_value());
        QCOMPARE(table->header.join(','), QString(kMetricsHeader));
        QCOMPARE(table->rows.size(), 40);
        QCOMPARE(reported_updates(run.out), 40);
        for (int i = 0; i < table->rows.size(); ++i) {
            QCOMPARE(table->rows[i].size(), table->header.size());
            QCOMPARE(table->cell(i, "update").toInt(), i + 1);
        }
        // Validation only on the rows that end an epoch (15, 30) and on the last update.
        QStringList validated;
        for (int i = 0; i < table->rows.size(); ++i)
            if (!table->cell(i, "val_loss").isEmpty()) validated << table->cell(i, "update");
        QCOMPARE(validated, (QStringList{"15", "30", "40"}));
        QCOMPARE(table->cell(14, "batch_samples").toInt(), 900 - 14 * 64);
        QCOMPARE(table->cell(14, "samples_seen").toInt(), 900);
        QVERIFY(table->cell(0, "mem_parameters").toLongLong() > 0);
        QVERIFY(table->cell(0, "mem_peak_total").toLongLong() >= table->cell(0, "mem_total").toLongLong());
    }

    // The held-after-update columns cannot tell what checkpointing did (activations are 0
    // after every update either way); the per-update peaks can.
    void update_peaks_show_what_checkpointing_does() {
        std::map<bool, MetricsTable> tables;
        for (bool checkpointing : {false, true}) {
            const QString metrics = path(checkpointing ? "peaks-checkpointed.csv" : "peaks.csv");
            QStringList arguments{"train", "--dataset", "spirals", "--samples", "1000", "--hidden", "64,64,64,64",
                                  "--max-steps", "6", "--threads", "1", "--metrics-out", metrics};
            if (checkpointing) arguments << "--gradient-checkpointing";
            CliRun run = run_cli(arguments);
            QVERIFY2(run.exit_code == 0, CLI_DIAGNOSTICS(run));
            auto table = read_metrics_csv(metrics);
            QVERIFY(table.has_value());
            QCOMPARE(table->rows.size(), 6);
            for (int i = 0; i < table->rows.size(); ++i) {
                QCOMPARE(table->rows[i].size(), table->header.size());
                QCOMPARE(table->cell(i, "mem_activations").toLongLong(), 0);
                QVERIFY(table->cell(i, "mem_update_peak_activations").toLongLong() > 0);
                // A peak during the update is at least what is held at its end, and the live
                // peak at most what was ever held (live + cache).
                for (const char* category : kCategories) {
                    const QString name(category);
                    QVERIFY2(table->cell(i, "mem_update_peak_" + name).toLongLong() >= table->cell(i, "mem_" + name).toLongLong(),
                             qPrintable(QString("update %1, %2").arg(i + 1).arg(name)));
                }
                const qint64 live_peak = table->cell(i, "mem_update_peak_live").toLongLong();
                QVERIFY(live_peak >= table->cell(i, "mem_update_peak_activations").toLongLong() +
                                         table->cell(i, "mem_parameters").toLongLong());
                QVERIFY(live_peak <= table->cell(i, "mem_peak_total").toLongLong());
            }
            tables[checkpointing] = *table;
        }
        for (int i = 0; i < 6; ++i) {
            const qint64 kept = tables[false].cell(i, "mem_update_peak_activations").toLongLong();
            const qint64 recomputed = tables[true].cell(i, "mem_update_peak_activations").toLongLong();
            QVERIFY2(recomputed < kept, qPrintable(QString("%1 vs %2").arg(recomputed).arg(kept)));
        }
    }

    void saved_weights_reload_as_initial_weights() {
        const QString weights = path("spirals.safetensors");
        const QString first_metrics = path("first.csv");
        CliRun first = run_cli({"train", "--dataset", "spirals", "--epochs", "2", "--lr", "0.01",
                                "--threads", "1", "--save-weights", weights, "--metrics-out", first_metrics});
        QVERIFY2(first.exit_code == 0, CLI_DIAGNOSTICS(first));
        QVERIFY(QFile::exists(weights));
        QVERIFY(!QFile::exists(weights + ".tmp"));

        // One SGD step with a negligible learning rate: validation then measures the loaded
        // weights themselves, which must be the ones the first run ended with.
        const QString second_metrics = path("second.csv");
        CliRun second = run_cli({"train", "--dataset", "spirals", "--epochs", "1", "--max-steps", "1",
                                 "--optimizer", "sgd", "--lr", "1e-12", "--threads", "1",
                                 "--init-weights", weights, "--metrics-out", second_metrics});
        QVERIFY2(second.exit_code == 0, CLI_DIAGNOSTICS(second));
        auto trained = last_value(*read_metrics_csv(first_metrics), "val_loss");
        auto reloaded = last_value(*read_metrics_csv(second_metrics), "val_loss");
        QVERIFY(trained && reloaded);
        QVERIFY2(std::abs(*trained - *reloaded) <= 1e-6 * std::max(1.0, std::abs(*trained)),
                 qPrintable(QString("%1 vs %2").arg(*trained).arg(*reloaded)));

        // A model of another shape refuses the file with a clear line.
        CliRun mismatch = run_cli({"train", "--dataset", "spirals", "--hidden", "8", "--threads", "1",
                                   "--init-weights", weights});
        QCOMPARE(mismatch.exit_code, 1);
        QCOMPARE(mismatch.error_lines().size(), 1);
    }

    void interrupt_stops_and_keeps_the_metrics() {
        const QString metrics = path("interrupted.csv");
        const QString weights = path("interrupted.safetensors");
        QProcess process;
        process.start(QStringLiteral(TRAINBENCH_CLI_PATH),
                      {"train", "--dataset", "spirals", "--samples", "200000", "--epochs", "100",
                       "--threads", "1", "--metrics-out", metrics, "--save-weights", weights});
        QVERIFY(process.waitForStarted());
        // Wait until it trains (the first progress line after the plan), then press Ctrl-C.
        QElapsedTimer clock;
        clock.start();
        QByteArray seen;
        while (!seen.contains("update ") && clock.elapsed() < 60000) {
            process.waitForReadyRead(1000);
            seen += process.readAllStandardOutput();
        }
        QVERIFY2(seen.contains("update "), seen.constData());
        QThread::msleep(200);
        ::kill(static_cast<pid_t>(process.processId()), SIGINT);
        QVERIFY(process.waitForFinished(30000));
        seen += process.readAllStandardOutput();
        const QString out = QString::fromUtf8(seen);
        QCOMPARE(process.exitStatus(), QProcess::NormalExit);
        QCOMPARE(process.exitCode(), 130);
        QVERIFY2(out.contains("result: stopped"), qPrintable(out));
        auto table = read_metrics_csv(metrics);
        QVERIFY(table.has_value());
        QVERIFY(table->rows.size() > 0);
        QCOMPARE(table->rows.size(), reported_updates(out));
        QVERIFY(QFile::exists(weights));
        QVERIFY(!QFile::exists(metrics + ".tmp"));
        QVERIFY(!QFile::exists(weights + ".tmp"));
    }

    // --events-out -: stdout carries only the event lines (docs/METRICS.md), one plan, an update
    // per update the summary reports, the evaluations, and an end event last; the summary moves
    // to stderr.
    void event_stream_on_stdout() {
        const CliRun run = run_cli({"train", "--dataset", "spirals", "--samples", "300", "--epochs", "3",
                                    "--batch-size", "64", "--threads", "1", "--events-out", "-"});
        QVERIFY2(run.exit_code == 0, CLI_DIAGNOSTICS(run));
        std::vector<trainbench::RunPlan> plans;
        std::vector<trainbench::StepMetrics> updates;
        int evaluations = 0;
        trainbench::Observer observer;
        observer.on_start = [&](const trainbench::RunPlan& plan) {
            QVERIFY(updates.empty());
            plans.push_back(plan);
        };
        observer.on_update = [&](const trainbench::StepMetrics& m) { updates.push_back(m); };
        observer.on_epoch_end = [&](const trainbench::EpochMetrics&) { ++evaluations; };
        trainbench::RunEventReader reader(observer);
        const QStringList lines = run.out.split('\n', Qt::SkipEmptyParts);
        for (const QString& line : lines) {
            QVERIFY2(!reader.end(), "an event after the end event");
            try {
                reader.read_line(line.toStdString());
            } catch (const trainbench::Error& e) {
                QFAIL(e.what());
            }
        }
        QCOMPARE(plans.size(), size_t{1});
        QCOMPARE(static_cast<int>(updates.size()), reported_updates(run.err));
        QCOMPARE(static_cast<int64_t>(updates.size()), plans[0].total_updates);
        for (size_t k = 0; k < updates.size(); ++k) QCOMPARE(updates[k].update, static_cast<int64_t>(k + 1));
        QCOMPARE(evaluations, 3);
        QVERIFY(reader.end());
        QCOMPARE(reader.end()->reason, trainbench::StopReason::completed);
        QCOMPARE(reader.end()->updates, plans[0].total_updates);
        QVERIFY2(run.err.contains("final loss"), qPrintable(run.err));
    }

    void event_stream_in_a_missing_folder_is_one_error_before_training() {
        const CliRun run = run_cli({"train", "--dataset", "spirals", "--samples", "300", "--epochs", "3",
                                    "--events-out", path("no-such-folder/events.jsonl")});
        QCOMPARE(run.exit_code, 1);
        QCOMPARE(run.error_lines().size(), 1);
        QVERIFY2(run.err.contains("cannot write the event stream"), qPrintable(run.err));
        QVERIFY2(!run.out.contains("update "), qPrintable(run.out));
    }

    // A checkpoint folder that cannot be made (here under a plain file) fails before the first
    // update, not at the first checkpoint; a folder that can is made and left empty of probes.
    void unwritable_checkpoint_folder_is_one_error_before_training() {
        QFile blocker(path("a-file"));
        QVERIFY(blocker.open(QIODevice::WriteOnly));
        blocker.close();
        const CliRun run = run_cli({"train", "--dataset", "spirals", "--samples", "300", "--epochs", "3",
                                    "--checkpoint-every", "1", "--checkpoint-dir", path("a-file/checkpoints")});
        QVERIFY2(run.exit_code != 0, qPrintable(run.err));
        QCOMPARE(run.error_lines().size(), 1);
        QVERIFY2(run.err.contains("cannot write checkpoints to '" + path("a-file/checkpoints") + "'"), qPrintable(run.err));
        QVERIFY2(run.err.contains("--checkpoint-dir"), qPrintable(run.err));
        QVERIFY2(!run.out.contains("update "), qPrintable(run.out));

        const CliRun fine = run_cli({"train", "--dataset", "spirals", "--samples", "300", "--epochs", "1",
                                     "--checkpoint-every", "1000", "--checkpoint-dir", path("new/checkpoints")});
        QVERIFY2(fine.exit_code == 0, qPrintable(fine.err));
        QVERIFY(QDir(path("new/checkpoints")).exists());
        QVERIFY(QDir(path("new/checkpoints")).entryList(QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot).isEmpty());
    }
};

QTEST_APPLESS_MAIN(CliTrainingTest)
#include "test_cli_training.moc"
