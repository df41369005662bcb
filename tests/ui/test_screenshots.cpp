// Renders the window before, during and after runs and checks that each picture really shows
// the app (right size, many colours, plots drawn). With TRAINBENCH_SCREENSHOT_DIR set, the
// pictures are also saved there: this is how docs/screenshots/ is regenerated.
#include <QAction>
#include <QDir>
#include <QImage>
#include <QSet>
#include <QTemporaryDir>
#include <QtTest>
#include <qcustomplot.h>

#include "config_panel.hpp"
#include "main_window.hpp"
#include "pipeline_chart.hpp"
#include "plot_area.hpp"
#include "run_controller.hpp"
#include "run_store.hpp"
#include "runs_table.hpp"
#include "trainbench/processes.hpp"
#include "ui_test_support.hpp"

using namespace trainbench;
using namespace trainbench::ui;

class ScreenshotTest : public QObject {
    Q_OBJECT
private:
    QTemporaryDir scratch_;
    QString folder_;

    // Saves the window's picture and checks that it is a real, busy rendering.
    void capture(MainWindow& window, const QString& name) {
        QCoreApplication::processEvents();
        for (auto* plot : window.findChildren<QCustomPlot*>()) plot->replot();
        const QImage image = window.grab().toImage().convertToFormat(QImage::Format_RGB32);
        QCOMPARE(image.size(), window.size());
        QSet<QRgb> colours;
        for (int y = 0; y < image.height(); y += 3)
            for (int x = 0; x < image.width(); x += 3) colours.insert(image.pixel(x, y));
        QVERIFY2(colours.size() > 200, qPrintable(QStringLiteral("%1 has only %2 colours").arg(name).arg(colours.size())));
        QVERIFY(image.save(QDir(folder_).filePath(name + QStringLiteral(".png"))));
    }

    // A window whose runs of several processes start the CLI under mpirun (as root here too:
    // initTestCase sets what Open MPI needs for that).
    static void show_for_processes(MainWindow& window) {
        window.resize(1400, 900);
        window.show();
        window.runController().setCliProgram(QStringLiteral(TRAINBENCH_CLI_PATH));
    }
    static RunConfig demo_config(int64_t step_size, int64_t batch_size = 64) {
        RunConfig config;
        config.dataset = "spirals";
        config.synthetic_samples = 6000;
        config.hidden = {128, 128};
        config.batch_size = batch_size;
        config.step_size = step_size;
        config.epochs = 6;
        config.optimizer.lr = 0.003;
        config.threads = 1;
        return config;
    }

private slots:
    void initTestCase() {
        testing::isolate_settings();
        testing::allow_mpi_as_root();
        folder_ = qEnvironmentVariable("TRAINBENCH_SCREENSHOT_DIR");
        if (folder_.isEmpty()) folder_ = scratch_.path();
        QDir().mkpath(folder_);
    }

    void beforeDuringAfter() {
        MainWindow window;
        window.resize(1400, 900);
        window.show();
        window.configPanel()->setConfig(demo_config(2));
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        capture(window, QStringLiteral("before-run"));

        window.startRun();
        QTRY_VERIFY_WITH_TIMEOUT(!window.runController().isRunning(), 60000);
        RunConfig longer = demo_config(8, 256);
        longer.epochs = 40;
        window.configPanel()->setConfig(longer);
        window.startRun();
        auto& second = *window.runStore().runs().back();
        QTRY_VERIFY_WITH_TIMEOUT(second.steps.size() > 150, 60000);
        QVERIFY(window.runController().isRunning());
        capture(window, QStringLiteral("during-run"));
        QTRY_VERIFY_WITH_TIMEOUT(!window.runController().isRunning(), 60000);

        RunConfig bf16 = demo_config(2);
        bf16.precision = Precision::bf16;
        window.configPanel()->setConfig(bf16);
        window.startRun();
        QTRY_VERIFY_WITH_TIMEOUT(!window.runController().isRunning(), 60000);
        window.runsTable()->selectRow(0);
        capture(window, QStringLiteral("after-runs"));
    }

    // The default example, a small GPT on the King James Bible: the settings before, the plots
    // and the first samples during, the samples turned into words after. The last picture is
    // the README's.
    void gptBeforeDuringAfter() {
        MainWindow window;
        window.resize(1600, 1000);
        window.show();
        RunConfig gpt = default_example_config();
        gpt.max_steps = 400;
        gpt.eval_every = 100;
        window.configPanel()->setConfig(gpt);
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        QTRY_VERIFY_WITH_TIMEOUT(window.configPanel()->plan().has_value(), 60000);  // the corpus loaded
        capture(window, QStringLiteral("gpt-before-run"));

        window.startRun();
        auto& run = *window.runStore().runs().back();
        QTRY_VERIFY_WITH_TIMEOUT(run.samples.size() >= 2 || !window.runController().isRunning(), 300000);
        QVERIFY2(window.runController().isRunning(), qPrintable(run.message));
        capture(window, QStringLiteral("gpt-during-run"));
        QTRY_VERIFY_WITH_TIMEOUT(!window.runController().isRunning(), 300000);
        QVERIFY2(run.state == RunState::completed, qPrintable(run.message));
        QCOMPARE(run.samples.size(), std::size_t{4});
        capture(window, QStringLiteral("gpt-after-run"));
        capture(window, QStringLiteral("main-window"));
    }

    // One process, then the same global batch on two (the app runs them as trainbench-cli
    // under mpirun), the second while it trains: the Processes setting, the batch relation and
    // the per-process memory plan in the form, both runs in the plots.
    void twoProcessesBesideOne() {
        if (!several_processes_unavailable(2).empty()) QSKIP(several_processes_unavailable(2).c_str());
        MainWindow window;
        show_for_processes(window);
        RunConfig one = demo_config(2, 256);
        one.epochs = 40;
        window.configPanel()->setConfig(one);
        window.startRun();
        QTRY_VERIFY_WITH_TIMEOUT(!window.runController().isRunning(), 120000);
        RunConfig two = one;
        two.processes = 2;
        window.configPanel()->setConfig(two);
        // The settings' scroll area shows the Device group, where Processes and ZeRO are.
        window.configPanel()->ensureWidgetVisible(window.configPanel()->findChild<QWidget*>(QStringLiteral("zero")));
        window.startRun();
        auto& run = *window.runStore().runs().back();
        QTRY_VERIFY_WITH_TIMEOUT(run.steps.size() > 300 || !window.runController().isRunning(), 120000);
        QVERIFY2(window.runController().isRunning(), qPrintable(run.message));
        capture(window, QStringLiteral("two-processes-run"));
        QTRY_VERIFY_WITH_TIMEOUT(!window.runController().isRunning(), 120000);
        QVERIFY2(run.state == RunState::completed, qPrintable(run.message));
    }

    // A GPT cut into 2 pipeline stages (a process each, under mpirun), 4 micro-batches per
    // update under 1F1B: the pipeline chart appears under the plots with the last update's
    // passes, a row per stage, and the bubble measured beside the formula.
    void pipelineRun() {
        if (!several_processes_unavailable(2).empty()) QSKIP(several_processes_unavailable(2).c_str());
        MainWindow window;
        show_for_processes(window);
        RunConfig config;
        config.model = ModelFamily::gpt;
        config.dataset = "text:" TRAINBENCH_FIXTURES_DIR "/text/bible_plain.txt";
        config.n_layer = 4;
        config.n_head = 4;
        config.n_embd = 64;
        config.block_size = 32;
        config.batch_size = 16;
        config.step_size = 4;
        config.epochs = 100;
        config.max_steps = 60;
        config.sample_chars = 0;
        config.processes = 2;
        config.pipeline_stages = 2;
        window.configPanel()->setConfig(config);
        window.configPanel()->ensureWidgetVisible(window.configPanel()->findChild<QWidget*>(QStringLiteral("pipeline_schedule")));
        const PipelineChart* chart = window.findChild<PipelineChart*>();
        QVERIFY(chart);
        QVERIFY(!chart->isVisible());
        window.startRun();
        auto& run = *window.runStore().runs().back();
        QTRY_VERIFY_WITH_TIMEOUT(!window.runController().isRunning(), 120000);
        QVERIFY2(run.state == RunState::completed, qPrintable(run.message));
        QVERIFY(chart->isVisible());
        QCOMPARE(chart->shownRun(), run.id);
        // Two stages, each a forward and a backward per micro-batch.
        QCOMPARE(chart->bars().size(), size_t{16});
        for (int stage = 0; stage < 2; ++stage) {
            int forwards = 0, backwards = 0;
            for (const PipelineChart::Bar& bar : chart->bars()) {
                if (bar.stage != stage) continue;
                QVERIFY(bar.end_ms > bar.start_ms);
                (bar.forward ? forwards : backwards) += 1;
            }
            QCOMPARE(forwards, 4);
            QCOMPARE(backwards, 4);
        }
        QVERIFY2(chart->title().contains("bubble") && chart->title().contains("(P-1)/(m+P-1) = 20.0%"),
                 qPrintable(chart->title()));
        // The store keeps the stages of the newest update only.
        QCOMPARE(run.last_pipeline_update, int64_t{60});
        for (const StepMetrics& step : run.steps) QVERIFY(step.pipeline_stages.empty());
        capture(window, QStringLiteral("pipeline-run"));
    }
};

QTEST_MAIN(ScreenshotTest)
#include "test_screenshots.moc"
