// Runs of several processes from the app (Processes > 1): the app starts trainbench-cli under
// mpirun through QProcess and plots process 0's event stream as it arrives. The run gives the
// CLI's own update and final weights bit for bit, a stop reaches every process within a
// micro-batch, a process that dies or a run that cannot start ends as failed with one clear line,
// and closing the app while such a run trains leaves no process behind. The technique table
// measures the data-parallel and ZeRO rows the same way. Nothing waits on the
// child: the GUI keeps ticking throughout.
//
// Skips, saying why, in a build without MPI.
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QLabel>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QtTest>

#include <csignal>
#include <map>
#include <memory>

#include "config_panel.hpp"
#include "main_window.hpp"
#include "run_controller.hpp"
#include "run_store.hpp"
#include "technique_comparison_dialog.hpp"
#include "trainbench/technique_comparison.hpp"
#include "trainbench/processes.hpp"
#include "trainbench/weights.hpp"
#include "ui_test_support.hpp"

using namespace trainbench;
using namespace trainbench::ui;

namespace {

constexpr int kStopBoundMs = 10000;  // mpirun's start and its hand-over of the signal included

// A two-process run long enough to watch (and to stop) but quick to finish when let be.
RunConfig two_process_config(int64_t max_steps) {
    RunConfig config = testing::small_config(max_steps);
    config.hidden = {256, 256};
    config.batch_size = 64;
    config.processes = 2;
    return config;
}

// Processes whose command line mentions `marker` (the run's scratch folder lives under it), so a
// test can find the ranks of its own run and see that none outlives it.
QList<qint64> processes_mentioning(const QString& marker) {
    QList<qint64> found;
    const QDir proc(QStringLiteral("/proc"));
    for (const QString& entry : proc.entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
        bool numeric = false;
        const qint64 pid = entry.toLongLong(&numeric);
        if (!numeric || pid == QCoreApplication::applicationPid()) continue;
        QFile cmdline(proc.filePath(entry + QStringLiteral("/cmdline")));
        if (!cmdline.open(QIODevice::ReadOnly)) continue;
        const QByteArray text = cmdline.readAll();
        if (text.isEmpty()) continue;  // a zombie: it has ended, only its parent has not reaped it
        if (text.contains(marker.toUtf8())) found << pid;
    }
    return found;
}

// The ranks themselves: trainbench-cli started by mpirun (not mpirun, whose arguments name it).
QList<qint64> ranks_mentioning(const QString& marker) {
    QList<qint64> ranks;
    for (qint64 pid : processes_mentioning(marker)) {
        QFile cmdline(QStringLiteral("/proc/%1/cmdline").arg(pid));
        if (cmdline.open(QIODevice::ReadOnly) && cmdline.readAll().split('\0').value(0).endsWith("trainbench-cli"))
            ranks << pid;
    }
    return ranks;
}

}  // namespace

class ProcessRunsTest : public QObject {
    Q_OBJECT

    // The runs' scratch folders go here (QTemporaryDir follows TMPDIR), so their processes can be
    // told apart from other tests' by the folder in their command line.
    QTemporaryDir temp_;
    QString temp_marker_;

    RunRecord& only_run(RunStore& store) { return *store.runs().back(); }

private slots:
    void initTestCase() {
        if (!mpi_built_in()) QSKIP("this build has no MPI (install libopenmpi-dev and openmpi-bin and rebuild)");
        if (const std::string why = several_processes_unavailable(2); !why.empty()) QSKIP(why.c_str());
        testing::isolate_settings();
        QVERIFY(temp_.isValid());
        temp_marker_ = temp_.path();
        qputenv("TMPDIR", temp_.path().toUtf8());
        testing::allow_mpi_as_root();
    }

    // Metrics arrive while the processes train, the plan is the 2-process one, and the weights
    // the app keeps are those `trainbench-cli train --processes 2` saves for the same settings.
    void twoProcessRunPlotsLiveAndKeepsTheCliWeights() {
        RunStore store;
        RunController controller(store);
        controller.setCliProgram(QStringLiteral(TRAINBENCH_CLI_PATH));
        const RunConfig config = two_process_config(400);
        int drains_while_training = 0;
        connect(&controller, &RunController::metricsDrained, this, [&](int id) {
            const RunRecord* run = store.find(id);
            if (run && run->state == RunState::running && !run->steps.empty() &&
                run->steps.back().update < config.max_steps)
                ++drains_while_training;
        });
        testing::EventLoopGapProbe probe;
        probe.start();
        controller.submit(config);
        QVERIFY(controller.isRunning());
        QTRY_VERIFY_WITH_TIMEOUT(!controller.isRunning(), 120000);
        probe.stop();

        const RunRecord& run = only_run(store);
        QVERIFY2(run.state == RunState::completed, qPrintable(run.message));
        QVERIFY(run.plan.has_value());
        QCOMPARE(run.plan->processes, int64_t{2});
        QCOMPARE(run.plan->micro_batch, int64_t{16});  // 64 / 2 processes / step_size 2
        QCOMPARE(run.plan->threads, 1);
        QVERIFY(run.plan->peak_flops > 0);
        // MFU counts the whole global batch, so the peak is both processes' together.
        QVERIFY2(run.plan->peak_source.find("times 2 processes") != std::string::npos, run.plan->peak_source.c_str());
        QCOMPARE(static_cast<int64_t>(run.steps.size()), config.max_steps);
        for (size_t k = 0; k < run.steps.size(); ++k) QCOMPARE(run.steps[k].update, static_cast<int64_t>(k + 1));
        QVERIFY(run.steps.back().comm_ms > 0);  // the gradient sum over the two processes
        QVERIFY(run.steps.back().memory.peak_bytes(MemoryCategory::optimizer_state) > 0);
        QVERIFY(!run.epochs.empty());
        QVERIFY2(drains_while_training >= 2,
                 qPrintable(QStringLiteral("only %1 drains while training").arg(drains_while_training)));
        QVERIFY2(probe.largestCpuGapMs() < 100, qPrintable(QString::number(probe.largestCpuGapMs())));

        QTemporaryDir out;
        const QString cli_weights = out.filePath(QStringLiteral("cli.safetensors"));
        QProcess cli;
        cli.start(QStringLiteral(TRAINBENCH_CLI_PATH),
                  {"train", "--dataset", "spirals", "--samples", "2000", "--hidden", "256,256", "--batch-size", "64",
                   "--step-size", "2", "--epochs", "1000", "--max-steps", "400", "--threads", "1", "--lr", "0.003",
                   "--processes", "2", "--quiet", "--save-weights", cli_weights});
        QVERIFY(cli.waitForFinished(120000));
        QVERIFY2(cli.exitCode() == 0, cli.readAllStandardError().constData());
        const ModelWeights expected = load_weights(cli_weights.toStdString());
        QVERIFY(!run.weights.empty());
        QCOMPARE(run.weights.tensors.size(), expected.tensors.size());
        for (size_t t = 0; t < expected.tensors.size(); ++t) {
            QCOMPARE(run.weights.tensors[t].name, expected.tensors[t].name);
            QVERIFY2(run.weights.tensors[t].data == expected.tensors[t].data, expected.tensors[t].name.c_str());
        }
        QVERIFY(processes_mentioning(temp_marker_).isEmpty());
    }

    void stopReachesEveryProcess() {
        RunStore store;
        RunController controller(store);
        controller.setCliProgram(QStringLiteral(TRAINBENCH_CLI_PATH));
        controller.submit(two_process_config(0));  // 1000 epochs: far longer than the test
        QTRY_VERIFY_WITH_TIMEOUT(!only_run(store).steps.empty(), 60000);
        QCOMPARE(ranks_mentioning(temp_marker_).size(), 2);
        QElapsedTimer stopping;
        stopping.start();
        controller.requestStop();
        QTRY_VERIFY_WITH_TIMEOUT(!controller.isRunning(), kStopBoundMs);
        qInfo("the 2-process run stopped %lld ms after the request", stopping.elapsed());
        const RunRecord& run = only_run(store);
        QVERIFY2(run.state == RunState::stopped, qPrintable(run.message));
        QVERIFY(!run.steps.empty());
        QVERIFY(!run.weights.empty());  // as they were when it stopped, as the CLI saves them
        QTRY_VERIFY_WITH_TIMEOUT(processes_mentioning(temp_marker_).isEmpty(), 5000);
    }

    // One of the processes killed: mpirun ends the other, and the run is failed with a line
    // that says which process died.
    void deadProcessFailsTheRunClearly() {
        RunStore store;
        RunController controller(store);
        controller.setCliProgram(QStringLiteral(TRAINBENCH_CLI_PATH));
        controller.submit(two_process_config(0));
        QTRY_VERIFY_WITH_TIMEOUT(!only_run(store).steps.empty(), 60000);
        const QList<qint64> ranks = ranks_mentioning(temp_marker_);
        QCOMPARE(ranks.size(), 2);
        QVERIFY(::kill(static_cast<pid_t>(ranks.last()), SIGKILL) == 0);
        QTRY_VERIFY_WITH_TIMEOUT(!controller.isRunning(), 30000);
        const RunRecord& run = only_run(store);
        QCOMPARE(run.state, RunState::failed);
        QVERIFY2(run.message.contains(QStringLiteral("died")) && run.message.contains(QStringLiteral("signal 9")),
                 qPrintable(run.message));
        QVERIFY(!run.message.contains(QLatin1Char('\n')));
        QVERIFY(!run.steps.empty());  // the curve it had is kept
        QTRY_VERIFY_WITH_TIMEOUT(processes_mentioning(temp_marker_).isEmpty(), 5000);
    }

    void runsThatCannotStartSayWhy() {
        RunStore store;
        RunController controller(store);
        // The CLI missing beside the app.
        controller.setCliProgram(temp_.filePath(QStringLiteral("no-such-dir/trainbench-cli")));
        controller.submit(two_process_config(20));
        QTRY_VERIFY_WITH_TIMEOUT(!controller.isRunning(), 10000);
        QCOMPARE(only_run(store).state, RunState::failed);
        QVERIFY2(only_run(store).message.contains(QStringLiteral("missing")), qPrintable(only_run(store).message));

        // The run's own error (its data cannot be read), once, without mpirun's boxes around it.
        controller.setCliProgram(QStringLiteral(TRAINBENCH_CLI_PATH));
        RunConfig unreadable = two_process_config(20);
        unreadable.dataset = "csv:" + temp_.filePath(QStringLiteral("nonexistent.csv")).toStdString();
        controller.submit(unreadable);
        QTRY_VERIFY_WITH_TIMEOUT(!controller.isRunning(), 30000);
        const RunRecord& run = only_run(store);
        QCOMPARE(run.state, RunState::failed);
        QVERIFY2(run.message.contains(QStringLiteral("nonexistent.csv")) && !run.message.contains(QStringLiteral("mpiexec")),
                 qPrintable(run.message));
        QVERIFY(!run.message.contains(QLatin1Char('\n')));
    }

    // Closing the window while a 2-process run trains stops it and leaves no process behind.
    void closingTheAppEndsTheRun() {
        {
            MainWindow window;
            window.runController().setCliProgram(QStringLiteral(TRAINBENCH_CLI_PATH));
            window.configPanel()->setConfig(two_process_config(0));
            window.startRun();
            QTRY_VERIFY_WITH_TIMEOUT(!window.runStore().runs().back()->steps.empty(), 60000);
            QCOMPARE(ranks_mentioning(temp_marker_).size(), 2);
        }
        QTRY_VERIFY_WITH_TIMEOUT(processes_mentioning(temp_marker_).isEmpty(), 5000);
    }

    // "Measure techniques..." adds the rows of several processes, each run as a child under
    // mpirun: they run, and ZeRO-1 holds less than plain data parallelism (half the Adam state).
    void techniqueTableMeasuresTheProcessRows() {
        RunConfig base = testing::small_config(0);
        base.hidden = {256, 256};
        base.batch_size = 64;
        TechniqueComparisonDialog dialog(base, nullptr, QStringLiteral(TRAINBENCH_CLI_PATH));
        dialog.start();
        QTRY_VERIFY_WITH_TIMEOUT(!dialog.isRunning(), 300000);
        std::map<Technique, const ComparisonRow*> rows;
        for (const ComparisonRow& row : dialog.rows()) rows[row.technique] = &row;
        for (Technique technique : multi_process_techniques()) {
            QVERIFY2(rows.count(technique), to_string(technique).c_str());
            QVERIFY2(rows[technique]->ok, rows[technique]->error.c_str());
            QVERIFY(rows[technique]->median_update_ms > 0);
        }
        qInfo("peak memory per process: data parallelism %lld bytes, ZeRO-1 %lld",
              static_cast<long long>(rows[Technique::data_parallel]->peak_memory_bytes),
              static_cast<long long>(rows[Technique::zero_1]->peak_memory_bytes));
        QVERIFY(rows[Technique::zero_1]->peak_memory_bytes < rows[Technique::data_parallel]->peak_memory_bytes);
        QTRY_VERIFY_WITH_TIMEOUT(processes_mentioning(temp_marker_).isEmpty(), 5000);
    }

    // The form: Processes and ZeRO are settings, and the batch relation names the processes.
    void processesAreASettingOfTheForm() {
        MainWindow window;
        window.show();
        window.configPanel()->setConfig(testing::small_config(20));
        auto* processes = window.configPanel()->findChild<QSpinBox*>(QStringLiteral("processes"));
        QVERIFY(processes);
        QVERIFY(window.configPanel()->findChild<QWidget*>(QStringLiteral("zero")));
        processes->setValue(2);
        QTRY_VERIFY_WITH_TIMEOUT(window.configPanel()->config().processes == 2, 2000);
        auto* derived = window.configPanel()->findChild<QLabel*>(QStringLiteral("derivedBatchLabel"));
        QVERIFY2(derived->text().contains(QStringLiteral("global batch 32 = micro-batch 8 × step_size 2 × processes 2")),
                 qPrintable(derived->text()));
        auto* plan = window.configPanel()->findChild<QLabel*>(QStringLiteral("memoryPlanLabel"));
        QTRY_VERIFY_WITH_TIMEOUT(plan->text().startsWith(QStringLiteral("Memory plan per process")), 5000);
        // The plan says how the cores are shared (CPU threads 1 here).
        QVERIFY2(derived->text().contains(QStringLiteral("× processes 2 (1 thread each)")), qPrintable(derived->text()));
    }
};

QTEST_MAIN(ProcessRunsTest)
#include "test_process_runs.moc"
