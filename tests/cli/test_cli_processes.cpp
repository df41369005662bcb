// Data parallelism over MPI (--processes N): N processes that each train on their share of every
// global batch and sum their gradients must give the update of one process with the same global
// batch, up to float rounding, for the MLP and the GPT, SGD with momentum and AdamW, step_size 1
// and 2 (weights after 20 updates within 1e-6 of each tensor's scale, plus 1e-6 absolute; see
// difference_in_tolerances), and an epoch whose last batch is partial (and smaller than processes x step_size, so some
// processes get empty micro-batches). Process 0 alone reports and writes the outputs; a checkpoint
// of a 2-process run resumes on 1, 2 and 3 processes; ZeRO-1 and -2 give ZeRO-0's update and
// their checkpoints resume on other process counts; a killed process ends the run in seconds
// and leaves the last checkpoint whole; a "stop" on stdin (--stop-on-input, how the app stops
// such a run) or the end of stdin ends every process cleanly.
//
// Skips, saying why, in a build without MPI (TRAINBENCH_MPI found no libopenmpi-dev).
#include <QElapsedTimer>
#include <QProcessEnvironment>
#include <QTemporaryDir>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <cmath>
#include <csignal>
#include <vector>

#include "cli/cli_process.hpp"
#include "core/same_bits.hpp"
#include "core/weights_difference.hpp"
#include "trainbench/process_runs.hpp"
#include "trainbench/processes.hpp"
#include "trainbench/run_events.hpp"

namespace {

using testing::difference_in_tolerances;

// 162 samples, 10% held out: 146 training samples in batches of 48 = 3 full batches and a last
// one of 2 per epoch, so 20 updates cross four epoch ends and five such batches, where with 3
// processes one process has an empty micro-batch.
QStringList mlp_flags(const QString& optimizer, int step_size) {
    QStringList flags = {"train", "--dataset", "spirals", "--samples", "162", "--val-fraction", "0.1",
                         "--hidden", "16,16", "--batch-size", "48", "--step-size", QString::number(step_size),
                         "--epochs", "100", "--max-steps", "20", "--optimizer", optimizer, "--lr",
                         optimizer == "sgd" ? "0.05" : "0.003", "--seed", "11", "--threads", "1"};
    if (optimizer == "sgd") flags << "--momentum" << "0.9";
    return flags;
}

// A one-block GPT on the committed Bible excerpt; 8-token windows.
QStringList gpt_flags(const QString& optimizer, int step_size) {
    return {"train", "--model", "gpt", "--dataset", "text:" TRAINBENCH_FIXTURES_DIR "/text/bible_plain.txt",
            "--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "8", "--batch-size", "12",
            "--step-size", QString::number(step_size), "--epochs", "100", "--max-steps", "20", "--optimizer",
            optimizer, "--lr", "0.003", "--seed", "5", "--threads", "1"};
}

}  // namespace

class CliProcessesTest : public QObject {
    Q_OBJECT

    QTemporaryDir folder_;

    // Runs `flags` on `processes` processes, saving weights and metrics under `name`.
    CliRun train(const QStringList& flags, int processes, const QString& name, const QStringList& extra = {}) {
        QStringList arguments = flags;
        arguments << "--processes" << QString::number(processes) << "--save-weights" << path(name + ".safetensors")
                  << "--metrics-out" << path(name + ".csv") << extra;
        return run_cli(arguments, 180000);
    }
    QString path(const QString& name) const { return folder_.filePath(name); }
    trainbench::ModelWeights weights(const QString& name) const {
        return trainbench::load_weights(path(name + ".safetensors").toStdString());
    }
    // Empty when run `name` made the same update as run `reference`: bit for bit, or within
    // rounding (difference_in_tolerances); otherwise how far apart they are.
    QString differs_from(const QString& reference, const QString& name, bool bit_for_bit) const {
        if (bit_for_bit)
            return same_bits(weights(reference), weights(name)) ? QString() : name + " differs from " + reference;
        const double difference = difference_in_tolerances(weights(reference), weights(name));
        return difference <= 1.0 ? QString()
                                 : QString("%1 differs from %2 by %3 of the tolerance").arg(name, reference).arg(difference);
    }

    struct Resume {
        int processes;
        QStringList flags;
    };
    // A checkpoint of 2 processes (trained with `written_with`), written at update 10 of 20,
    // resumed as each of `resumes`: on 2 processes with the same flags bit for bit as the
    // uninterrupted run, otherwise within rounding.
    void expect_checkpoint_resumes(const QString& prefix, const QStringList& flags, const QStringList& written_with,
                                   const std::vector<Resume>& resumes) {
        const QString checkpoints = path(prefix + "-checkpoints");
        const CliRun whole = train(flags, 2, prefix + "-whole", written_with);
        QVERIFY2(whole.exit_code == 0, CLI_DIAGNOSTICS(whole));
        QStringList first_half = flags;
        first_half.replace(first_half.indexOf("--max-steps") + 1, "10");
        const CliRun half = train(first_half, 2, prefix + "-half",
                                  written_with + QStringList{"--checkpoint-every", "10", "--checkpoint-dir", checkpoints});
        QVERIFY2(half.exit_code == 0, CLI_DIAGNOSTICS(half));
        for (const Resume& resume : resumes) {
            const QString name = QString("%1-resumed-on-%2").arg(prefix).arg(resume.processes);
            const CliRun resumed = train(flags, resume.processes, name, resume.flags + QStringList{"--resume", checkpoints});
            QVERIFY2(resumed.exit_code == 0, CLI_DIAGNOSTICS(resumed));
            QVERIFY2(resumed.out.contains("resumed from the checkpoint of update 10"), qPrintable(resumed.out));
            const bool same_run = resume.processes == 2 && resume.flags == written_with;
            const QString difference = differs_from(prefix + "-whole", name, same_run);
            QVERIFY2(difference.isEmpty(), qPrintable(difference));
        }
    }

private slots:
    void initTestCase() {
        if (!trainbench::mpi_built_in())
            QSKIP("built without MPI (install libopenmpi-dev and openmpi-bin and reconfigure): multi-process runs "
                  "are not built");
        QVERIFY(folder_.isValid());
    }

    void sameUpdateAsOneProcess_data() {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QString>("optimizer");
        QTest::addColumn<int>("stepSize");
        QTest::newRow("mlp sgd step 1") << "mlp" << "sgd" << 1;
        QTest::newRow("mlp sgd step 2") << "mlp" << "sgd" << 2;
        QTest::newRow("mlp adamw step 1") << "mlp" << "adamw" << 1;
        QTest::newRow("mlp adamw step 2") << "mlp" << "adamw" << 2;
        QTest::newRow("gpt adamw step 2") << "gpt" << "adamw" << 2;
        QTest::newRow("gpt sgd step 1") << "gpt" << "sgd" << 1;
    }
    void sameUpdateAsOneProcess() {
        QFETCH(QString, model);
        QFETCH(QString, optimizer);
        QFETCH(int, stepSize);
        const QStringList flags = model == "mlp" ? mlp_flags(optimizer, stepSize) : gpt_flags(optimizer, stepSize);
        const QString base = QString("%1-%2-%3").arg(model, optimizer).arg(stepSize);
        const CliRun one = train(flags, 1, base + "-1");
        QVERIFY2(one.exit_code == 0, CLI_DIAGNOSTICS(one));
        const trainbench::ModelWeights reference = weights(base + "-1");
        for (int processes : {2, 3}) {
            const QString name = base + "-" + QString::number(processes);
            const CliRun run = train(flags, processes, name);
            QVERIFY2(run.exit_code == 0, CLI_DIAGNOSTICS(run));
            // Process 0 alone reports: one summary, no line from the others.
            QCOMPARE(run.out.count("result: max_steps after 20 updates"), 1);
            QVERIFY2(run.err.trimmed().isEmpty(), qPrintable(run.err));
            const double difference = difference_in_tolerances(reference, weights(name));
            qInfo("%s on %d processes: weights after 20 updates differ from one process's by %.3g of the tolerance",
                  qPrintable(base), processes, difference);
            QVERIFY2(difference <= 1.0, qPrintable(QString::number(difference)));
            // The metrics are the whole batch's: the loss agrees with one process's.
            const auto table_one = read_metrics_csv(path(base + "-1.csv"));
            const auto table = read_metrics_csv(path(name + ".csv"));
            QVERIFY(table_one && table);
            QCOMPARE(table->rows.size(), table_one->rows.size());
            const double loss_one = last_value(*table_one, "loss").value();
            const double loss = last_value(*table, "loss").value();
            QVERIFY2(std::fabs(loss - loss_one) <= 1e-5 * std::fabs(loss_one),
                     qPrintable(QString("%1 vs %2").arg(loss).arg(loss_one)));
            QCOMPARE(last_value(*table, "samples_seen").value(), last_value(*table_one, "samples_seen").value());
        }
    }

    // A checkpoint written by 2 processes resumes on 1, 2 and 3: on 2 bit for bit as the
    // uninterrupted 2-process run, on the others within rounding.
    void checkpointResumesOnAnotherProcessCount() {
        expect_checkpoint_resumes("resume", mlp_flags("adamw", 2), {}, {{2, {}}, {1, {}}, {3, {}}});
    }

    // ZeRO through the CLI: stages 1 and 2 on 3 processes give stage 0's weights (stage 1 bit for
    // bit: the same sum, the same rule on each slice); the plan says how the batch, the threads and
    // the optimizer state are shared. A ZeRO-1 checkpoint holds the whole optimizer state, gathered:
    // it resumes with ZeRO-1 on 2 processes bit for bit, on 3 and without ZeRO on 1 within rounding.
    void zeroStagesThroughTheCli() {
        const QStringList flags = mlp_flags("adamw", 2);
        const CliRun zero0 = train(flags, 3, "zero0", {"--zero", "0"});
        QVERIFY2(zero0.exit_code == 0, CLI_DIAGNOSTICS(zero0));
        for (const char* stage : {"1", "2"}) {
            const QString name = QString("zero") + stage;
            const CliRun run = train(flags, 3, name, {"--zero", stage});
            QVERIFY2(run.exit_code == 0, CLI_DIAGNOSTICS(run));
            QVERIFY2(run.out.contains(QString("x processes 3 (1 thread each, ZeRO-%1)").arg(stage)), qPrintable(run.out));
            QVERIFY2(run.out.contains("memory plan per process"), qPrintable(run.out));
            const QString difference = differs_from("zero0", name, QString(stage) == "1");
            QVERIFY2(difference.isEmpty(), qPrintable(difference));
        }
        expect_checkpoint_resumes("zero", flags, {"--zero", "1"},
                                  {{2, {"--zero", "1"}}, {3, {"--zero", "1"}}, {1, {"--zero", "0"}}});
    }

    // One process killed mid-run: mpirun ends the others and exits with a clear message within
    // seconds, nothing hangs, and the last checkpoint is complete and resumes.
    void killedProcessEndsTheRunAndKeepsTheCheckpoint() {
        const QString checkpoints = path("killed-checkpoints");
        QProcess run;
        run.start(QStringLiteral(TRAINBENCH_CLI_PATH),
                  {"train", "--dataset", "spirals", "--samples", "4000", "--hidden", "64,64", "--batch-size", "32",
                   "--epochs", "1000", "--threads", "1", "--processes", "2", "--checkpoint-every", "20",
                   "--checkpoint-dir", checkpoints, "-q"});
        QVERIFY(run.waitForStarted(10000));
        const QString latest = checkpoints + "/latest.safetensors";
        QTRY_VERIFY_WITH_TIMEOUT(QFile::exists(latest), 60000);
        // trainbench-cli became mpirun (same process id); its children are the two processes.
        QProcess children;
        children.start("pgrep", {"-P", QString::number(run.processId())});
        QVERIFY(children.waitForFinished(10000));
        const QStringList pids = QString::fromUtf8(children.readAllStandardOutput()).split('\n', Qt::SkipEmptyParts);
        QCOMPARE(pids.size(), 2);
        QVERIFY(::kill(pids.last().toInt(), SIGKILL) == 0);
        QElapsedTimer ending;
        ending.start();
        QVERIFY2(run.waitForFinished(30000), "the run did not end within 30 s of a killed process");
        qInfo("the run ended %lld ms after one of its processes was killed", ending.elapsed());
        QVERIFY(run.exitStatus() == QProcess::NormalExit && run.exitCode() != 0);
        const QString errors = QString::fromUtf8(run.readAllStandardError());
        QVERIFY2(errors.contains("exited on signal 9"), qPrintable(errors));
        // The checkpoint is whole: a run resumes from it.
        const CliRun resumed = run_cli({"train", "--dataset", "spirals", "--samples", "4000", "--hidden", "64,64",
                                        "--batch-size", "32", "--epochs", "1000", "--threads", "1", "--processes",
                                        "2", "--resume", checkpoints, "--max-steps", "1", "-q"});
        QVERIFY2(resumed.exit_code == 0 && resumed.out.contains("nothing left to train"), CLI_DIAGNOSTICS(resumed));
    }

    // --stop-on-input: a "stop" line on mpirun's stdin reaches process 0, which agrees the stop
    // with the other at the next micro-batch; the run ends normally (exit 0), its event stream
    // whole up to its end event and its weights written. The end of the input (a parent that
    // died) stops it the same way.
    void stopOnInputEndsEveryProcessCleanly() {
        for (const bool close_instead : {false, true}) {
            const QString weights = path(close_instead ? "input-closed.safetensors" : "input-stop.safetensors");
            QProcess run;
            run.start(QStringLiteral(TRAINBENCH_CLI_PATH),
                      {"train", "--dataset", "spirals", "--samples", "4000", "--hidden", "64,64", "--batch-size", "32",
                       "--epochs", "1000", "--threads", "1", "--processes", "2", "--events-out", "-",
                       "--stop-on-input", "--save-weights", weights});
            QVERIFY(run.waitForStarted(10000));
            QByteArray events;
            QElapsedTimer clock;
            clock.start();
            while (!events.contains("\"event\":\"update\"") && clock.elapsed() < 60000) {
                run.waitForReadyRead(1000);
                events += run.readAllStandardOutput();
            }
            QVERIFY2(events.contains("\"event\":\"update\""), events.constData());
            QElapsedTimer stopping;
            stopping.start();
            if (close_instead)
                run.closeWriteChannel();
            else
                run.write("stop\n");
            QVERIFY2(run.waitForFinished(30000), "the run did not stop within 30 s");
            qInfo("%s: the 2-process run ended %lld ms later", close_instead ? "input closed" : "\"stop\" written",
                  stopping.elapsed());
            events += run.readAllStandardOutput();
            const QString errors = QString::fromUtf8(run.readAllStandardError());
            QVERIFY2(run.exitStatus() == QProcess::NormalExit && run.exitCode() == 0, qPrintable(errors));
            QVERIFY2(!errors.contains("mpiexec"), qPrintable(errors));
            trainbench::RunEventReader reader{trainbench::Observer{}};
            for (const QByteArray& line : events.split('\n')) reader.read_line(line.toStdString());
            QVERIFY(reader.end());
            QCOMPARE(reader.end()->reason, trainbench::StopReason::stopped);
            QCOMPARE(reader.end()->updates, reader.result().last.update);
            QVERIFY(QFile::exists(weights));
        }
    }

    // A technique comparison's row of 2 processes (run_in_processes, as compare and the app's
    // table run it) stopped from the caller: the child hears "stop" on its stdin and ends as a
    // stopped run with its updates read back, promptly, rather than being torn down by a signal.
    void comparisonRowStopsCleanly() {
        trainbench::RunConfig config;
        config.dataset = "spirals";
        config.synthetic_samples = 4000;
        config.hidden = {64, 64};
        config.batch_size = 32;
        config.epochs = 1000;
        config.threads = 1;
        config.processes = 2;
        const auto data = trainbench::load_dataset(config.dataset, trainbench::data_options_for(config));
        // The stop is asked for once the first update has arrived (mpirun can take seconds to
        // start the processes on a fresh machine), and the time is bounded from the stop.
        std::atomic<bool> stop{false}, updated{false};
        std::atomic<int64_t> stop_asked_ms{-1};
        QElapsedTimer clock;
        clock.start();
        trainbench::Observer observer;
        observer.on_update = [&](const trainbench::StepMetrics&) { updated = true; };
        std::thread stopper([&] {
            while (!updated && clock.elapsed() < 120000) std::this_thread::sleep_for(std::chrono::milliseconds(10));
            stop_asked_ms = clock.elapsed();
            stop = true;
        });
        const trainbench::RunResult result =
            trainbench::run_in_processes(TRAINBENCH_CLI_PATH, config, data, observer, &stop);
        stopper.join();
        const int64_t after_stop = clock.elapsed() - stop_asked_ms;
        qInfo("the first update came %lld ms after the start; the row ended %lld ms after the stop",
              static_cast<long long>(stop_asked_ms.load()), static_cast<long long>(after_stop));
        QVERIFY2(updated, "no update arrived within 2 minutes");
        QVERIFY2(result.reason == trainbench::StopReason::stopped, result.message.c_str());
        QVERIFY(result.last.update > 0);
        // A micro-batch here is a few ms; the processes stop at the next one.
        QVERIFY2(after_stop < 2000, "the stopped row took more than 2 s to end after the stop");
    }

    // A configuration error is reported once, by process 0, as one line.
    void errorIsReportedOnce() {
        QStringList flags = mlp_flags("sgd", 2);
        flags.replace(flags.indexOf("--batch-size") + 1, "4");
        const CliRun run = train(flags, 3, "too-small");
        QCOMPARE(run.exit_code, 2);
        QCOMPARE(run.error_lines().size(), 1);
        QVERIFY2(run.err.contains("smaller than processes x step_size"), qPrintable(run.err));
        QVERIFY(!QFile::exists(path("too-small.csv")));
        QVERIFY(!QFile::exists(path("too-small.safetensors")));
    }
};

QTEST_MAIN(CliProcessesTest)
#include "test_cli_processes.moc"
