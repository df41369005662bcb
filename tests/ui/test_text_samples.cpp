// Text samples in the app: a tiny GPT trained from the window fills the samples panel newest
// first and live, the runs table picks whose samples show (an MLP run gets a hint), a long
// history is updated incrementally, a GPT run stops promptly, and sessions keep the samples and
// the GPT's settings while sessions saved before samples existed still open.
#include <QAction>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QTemporaryDir>
#include <QTextDocument>
#include <QPlainTextEdit>
#include <QtTest>
#include <QSplitter>
#include <algorithm>

#include "config_panel.hpp"
#include "plot_area.hpp"
#include "main_window.hpp"
#include "run_controller.hpp"
#include "run_store.hpp"
#include "runs_table.hpp"
#include "samples_panel.hpp"
#include "session_file.hpp"
#include "trainbench/config_json.hpp"
#include "ui_test_support.hpp"

using namespace trainbench;
using namespace trainbench::ui;

namespace {

// Where the header line of the sample at `update` starts in the panel's text; -1 when absent.
// A header starts the text or follows a blank line, and is "update N" then " · ..." or a newline.
qsizetype header_position(const QString& text, int64_t update) {
    const QString header = QStringLiteral("update %L1").arg(update);
    for (qsizetype at = text.indexOf(header); at >= 0; at = text.indexOf(header, at + 1)) {
        const bool starts = at == 0 || text.mid(at - 2, 2) == QStringLiteral("\n\n");
        const qsizetype end = at + header.size();
        const bool ends = end < text.size() && (text[end] == QLatin1Char(' ') || text[end] == QLatin1Char('\n'));
        if (starts && ends) return at;
    }
    return -1;
}

}  // namespace

class TextSamplesTest : public QObject {
    Q_OBJECT

    QTemporaryDir scratch_;
    std::string text_path_;

    // A GPT small enough to train in well under a second per few updates on one thread, on a
    // text with some multi-byte UTF-8 characters (a byte-level model can emit half of one).
    RunConfig tiny_gpt(int64_t max_steps) const {
        RunConfig c = default_config(ModelFamily::gpt);
        c.dataset = "text:" + text_path_;
        c.n_layer = 1;
        c.n_head = 2;
        c.n_embd = 16;
        c.block_size = 16;
        c.batch_size = 8;
        c.step_size = 1;
        c.threads = 1;
        c.max_steps = max_steps;
        c.epochs = max_steps > 0 ? 1 : 1000;
        c.schedule.warmup_steps = 0;
        c.eval_every = 5;
        c.eval_samples = 16;
        c.sample_chars = 40;
        return c;
    }

    static const RunRecord& run_with_id(const MainWindow& window, int id) {
        const RunRecord* run = window.runStore().find(id);
        Q_ASSERT(run);
        return *run;
    }

    static void select_run(MainWindow& window, int id) {
        const int row = window.runsTable()->rowOf(id);
        QVERIFY(row >= 0);
        window.runsTable()->clearSelection();
        window.runsTable()->selectRow(row);
    }

    // Starts a run with `config` from the panel and waits for it to end.
    static const RunRecord& run_to_end(MainWindow& window, const RunConfig& config) {
        window.configPanel()->setConfig(config);
        window.startRun();
        const int id = window.runController().activeRunId();
        Q_ASSERT(id != 0);
        QElapsedTimer clock;
        clock.start();
        while (window.runController().isRunning() && clock.elapsed() < 120000) QTest::qWait(20);
        return run_with_id(window, id);
    }

    // The panel shows exactly `run`'s samples, newest on top, each under its header.
    static void verify_panel_shows(const SamplesPanel& panel, const RunRecord& run) {
        QCOMPARE(panel.runId(), run.id);
        QVERIFY(panel.title().contains(run.name));
        QVERIFY(!panel.hintShown());
        std::vector<int64_t> expected;
        for (auto it = run.samples.rbegin(); it != run.samples.rend(); ++it) expected.push_back(it->update);
        QCOMPARE(panel.shownUpdates(), expected);
        QVERIFY(std::is_sorted(expected.rbegin(), expected.rend()));
        const QString text = panel.text();
        qsizetype previous = -1;
        for (auto it = run.samples.rbegin(); it != run.samples.rend(); ++it) {
            const qsizetype header = header_position(text, it->update);
            QVERIFY2(header > previous, qPrintable(QStringLiteral("update %1 is not below the newer one").arg(it->update)));
            // The sample's text follows its header as generated, whitespace and newlines kept
            // (less the prompt's leading newline).
            const QString shown = it->text.startsWith(QLatin1Char('\n')) ? it->text.mid(1) : it->text;
            QVERIFY2(text.indexOf(QStringLiteral("\n") + shown, header) > header, qPrintable(it->text));
            previous = header;
        }
    }

private slots:
    void initTestCase() {
        testing::isolate_settings();
        QVERIFY(scratch_.isValid());
        text_path_ = scratch_.filePath(QStringLiteral("sentences.txt")).toStdString();
        QFile file(QString::fromStdString(text_path_));
        QVERIFY(file.open(QIODevice::WriteOnly));
        for (int i = 0; i < 200; ++i)
            file.write(i % 7 == 0 ? "The café served crème brûlée — and the word was with the text.\n"
                                  : "In the beginning was the word, and the word was with the text.\n");
    }

    void decodingIsLenient() {
        // Valid UTF-8 decodes; a multi-byte character cut short becomes U+FFFD; CR LF becomes LF;
        // control characters show as their pictures, tab and newline stay.
        QCOMPARE(decode_sample_text("caf\xC3\xA9"), QStringLiteral("café"));
        QCOMPARE(decode_sample_text("ab\xC3"), QStringLiteral("ab") + QChar(0xFFFD));
        const QString cut = decode_sample_text("\xE2\x80 x");
        QVERIFY(cut.startsWith(QChar(0xFFFD)) && cut.endsWith(QStringLiteral(" x")));
        QCOMPARE(decode_sample_text("a\r\nb\tc\nd"), QStringLiteral("a\nb\tc\nd"));
        QCOMPARE(decode_sample_text("a\x1B" "b"), QStringLiteral("a") + QChar(0x241B) + QStringLiteral("b"));
        QCOMPARE(decode_sample_text(std::string_view("\0x", 2)), QString(QChar(0x2400)) + QStringLiteral("x"));
    }

    // (a) A GPT run fills the panel: one sample per evaluation, newest first.
    void gptRunShowsItsSamplesNewestFirst() {
        MainWindow window;
        window.resize(1400, 900);
        window.show();
        SamplesPanel* panel = window.samplesPanel();
        QVERIFY(!panel->isVisibleTo(&window));  // nothing but MLPs (none at all) yet: the plots keep the width
        const RunRecord& run = run_to_end(window, tiny_gpt(20));
        QVERIFY2(run.state == RunState::completed, qPrintable(run.message));
        QCOMPARE(run.steps.size(), std::size_t{20});
        // Evaluations after updates 5, 10, 15 and 20, each followed by 40 generated characters.
        QCOMPARE(run.samples.size(), std::size_t{4});
        for (std::size_t i = 0; i < run.samples.size(); ++i) {
            QCOMPARE(run.samples[i].update, static_cast<int64_t>(5 * (i + 1)));
            QVERIFY(run.samples[i].text.size() >= 20);  // 41 bytes: the prompt's newline and 40 generated
            QVERIFY(!run.samples[i].text.contains(QChar(0)));
        }
        QVERIFY(panel->isVisibleTo(&window));
        // About a quarter beside the plots, as far as the plots' smallest width allows.
        auto* splitter = qobject_cast<QSplitter*>(panel->parentWidget());
        QVERIFY(splitter);
        const int room = splitter->width() - splitter->handleWidth();
        const int expected = std::min(room / 4, room - window.plotArea()->minimumSizeHint().width());
        QVERIFY2(panel->width() >= expected - 8 && panel->width() <= room / 3,
                 qPrintable(QStringLiteral("%1 of %2 px").arg(panel->width()).arg(room)));
        verify_panel_shows(*panel, run);
        // Each header carries the validation loss measured at that update.
        QVERIFY(std::isfinite(run.val_loss_at(20)));
        QVERIFY2(panel->text().contains(QStringLiteral("update 20 · val loss %1").arg(run.val_loss_at(20), 0, 'f', 3)),
                 qPrintable(panel->text()));
        QVERIFY(panel->title().contains(QStringLiteral("4 text samples")));
    }

    // The panel follows the active run while it trains: samples arrive on top as it learns.
    void followsTheActiveRunLive() {
        MainWindow window;
        window.show();
        SamplesPanel* panel = window.samplesPanel();
        window.configPanel()->setConfig(tiny_gpt(0));  // 1000 epochs: far longer than the test
        window.startRun();
        const int id = window.runController().activeRunId();
        QCOMPARE(panel->runId(), id);
        QTRY_VERIFY_WITH_TIMEOUT(panel->shownSampleCount() >= 2, 60000);
        QVERIFY(window.runController().isRunning());
        const auto updates = panel->shownUpdates();
        QVERIFY(updates.front() > updates.back());
        QVERIFY(panel->text().startsWith(QStringLiteral("update %L1").arg(updates.front())));
        window.runController().requestStop();
        QVERIFY(window.runController().waitUntilIdle(5000));
        verify_panel_shows(*panel, run_with_id(window, id));
    }

    // (b) Selecting runs in the table picks whose samples show; an MLP run gets the hint.
    void selectingARunShowsItsSamples() {
        MainWindow window;
        window.show();
        SamplesPanel* panel = window.samplesPanel();
        const RunRecord& gpt = run_to_end(window, tiny_gpt(20));
        QCOMPARE(gpt.samples.size(), std::size_t{4});
        const RunRecord& mlp = run_to_end(window, testing::small_config(30));
        QCOMPARE(mlp.state, RunState::completed);
        QVERIFY(mlp.samples.empty());
        // The MLP run was the active one: the panel followed it and says what it is for.
        QCOMPARE(panel->runId(), mlp.id);
        QVERIFY(panel->isVisibleTo(&window));  // the session holds a GPT run
        QVERIFY(panel->hintShown());
        QVERIFY(panel->hint().contains(QStringLiteral("GPT runs")));
        QCOMPARE(panel->shownSampleCount(), 0);
        QVERIFY(panel->title().contains(mlp.name));

        select_run(window, gpt.id);
        verify_panel_shows(*panel, gpt);
        select_run(window, mlp.id);
        QCOMPARE(panel->runId(), mlp.id);
        QVERIFY(panel->hintShown());
        QVERIFY(panel->text().isEmpty());
        select_run(window, gpt.id);
        verify_panel_shows(*panel, gpt);

        // Deleting the shown run moves the panel to the latest run left.
        window.runStore().remove(gpt.id);
        QCOMPARE(panel->runId(), mlp.id);
        QVERIFY(!panel->isVisibleTo(&window));  // only an MLP left
    }

    // Appending to a long history inserts at the top and caps what is on screen.
    void longHistoryIsUpdatedIncrementally() {
        RunStore store;
        SamplesPanel panel(store);
        panel.resize(300, 600);
        panel.show();
        RunConfig config = tiny_gpt(0);
        const int id = store.addRun(config).id;
        panel.showRun(id);
        QVERIFY(panel.hintShown());
        QVERIFY(panel.hint().contains(QStringLiteral("after update 5")));
        const auto sample = [](int64_t update) {
            return TextSample{update, QStringLiteral("sample %1\n  indented line\n\nafter a blank line").arg(update)};
        };
        const int total = SamplesPanel::kMaxShownSamples + 50;
        for (int update = 1; update <= 10; ++update) store.appendSamples(id, {sample(update)});
        QCOMPARE(panel.shownSampleCount(), 10);
        QVERIFY(!panel.hintShown());

        // One more sample changes the document by about one sample's characters, not the history.
        auto* document = panel.findChild<QPlainTextEdit*>()->document();
        int added = 0, removed = 0;
        const auto connection = connect(document, &QTextDocument::contentsChange, [&](int, int r, int a) {
            added += a;
            removed += r;
        });
        store.appendSamples(id, {sample(11)});
        disconnect(connection);
        QVERIFY2(removed == 0 && added < 120, qPrintable(QStringLiteral("added %1, removed %2").arg(added).arg(removed)));

        std::vector<TextSample> batch;
        for (int update = 12; update <= total; ++update) batch.push_back(sample(update));
        QElapsedTimer clock;
        clock.start();
        store.appendSamples(id, std::move(batch));
        for (int update = total + 1; update <= total + 100; ++update) store.appendSamples(id, {sample(update)});
        QVERIFY2(clock.elapsed() < 3000, qPrintable(QString::number(clock.elapsed())));
        const int newest = total + 100;
        QCOMPARE(panel.shownSampleCount(), SamplesPanel::kMaxShownSamples);
        const auto updates = panel.shownUpdates();
        QCOMPARE(updates.front(), newest);
        QCOMPARE(updates.back(), newest - SamplesPanel::kMaxShownSamples + 1);
        QVERIFY(panel.title().contains(QStringLiteral("newest %1 of").arg(SamplesPanel::kMaxShownSamples)));
        // After dropping the oldest, the document is exactly what a fresh render gives.
        const QString incremental = panel.text();
        QVERIFY(incremental.startsWith(QStringLiteral("update %L1\nsample %1\n  indented line\n\nafter a blank line\n\nupdate")
                                           .arg(newest)));
        QVERIFY(incremental.endsWith(QStringLiteral("sample %1\n  indented line\n\nafter a blank line").arg(updates.back())));
        panel.showRun(0);
        QVERIFY(panel.hintShown());
        panel.showRun(id);
        QCOMPARE(panel.text(), incremental);
    }

    // (c) A GPT run stops within about one micro-batch of work.
    void stopEndsAGptRunPromptly() {
        MainWindow window;
        window.show();
        RunConfig config = tiny_gpt(0);
        config.n_embd = 64;
        config.n_head = 4;
        config.n_layer = 2;
        config.block_size = 32;
        config.batch_size = 16;
        config.step_size = 4;
        window.configPanel()->setConfig(config);
        window.startRun();
        const int id = window.runController().activeRunId();
        QTRY_VERIFY_WITH_TIMEOUT(!run_with_id(window, id).steps.empty(), 30000);
        const auto& steps = run_with_id(window, id).steps;
        const double update_ms = std::max_element(steps.begin(), steps.end(), [](const auto& a, const auto& b) {
                                     return a.update_ms < b.update_ms;
                                 })->update_ms;
        const int bound_ms = std::max(2000, static_cast<int>(3 * update_ms));
        QElapsedTimer stopping;
        stopping.start();
        window.stopAction()->trigger();
        QTRY_VERIFY_WITH_TIMEOUT(!window.runController().isRunning(), bound_ms);
        QVERIFY2(stopping.elapsed() < bound_ms, qPrintable(QStringLiteral("%1 ms to stop; an update takes %2 ms")
                                                               .arg(stopping.elapsed())
                                                               .arg(update_ms)));
        qInfo("stopped in %lld ms; the slowest of %zu updates took %.1f ms (bound %d ms)", stopping.elapsed(),
              steps.size(), update_ms, bound_ms);
        const RunRecord& run = run_with_id(window, id);
        QCOMPARE(run.state, RunState::stopped);
        QVERIFY(!run.steps.empty());
        QVERIFY(window.runAction()->isEnabled());
    }

    // (d) A session keeps each run's samples and the GPT's settings.
    void sessionRoundTripKeepsSamplesAndGptConfig() {
        const QString path = QDir(scratch_.path()).filePath(QStringLiteral("gpt.tbsession.json"));
        RunConfig config = tiny_gpt(20);
        config.n_layer = 2;
        config.n_head = 4;
        config.n_embd = 32;
        config.block_size = 24;
        config.sample_temperature = 0.7;
        config.sample_seed = 12345;
        config.seed = 77;
        std::string saved_config;
        std::vector<TextSample> saved_samples;
        std::vector<EpochMetrics> saved_evaluations;
        std::vector<StepMetrics> saved_steps;
        RunPlan saved_plan;
        {
            MainWindow window;
            window.show();
            const RunRecord& gpt = run_to_end(window, config);
            QVERIFY2(gpt.state == RunState::completed, qPrintable(gpt.message));
            QCOMPARE(gpt.samples.size(), std::size_t{4});
            run_to_end(window, testing::small_config(10));
            // A sample with characters JSON must escape, newlines, tabs and non-ASCII.
            window.runStore().appendSamples(gpt.id, {{21, QStringLiteral("\"quoted\" \\ back\tslash\ncafé ") + QChar(0xFFFD)}});
            saved_config = config_to_json(gpt.config);
            saved_samples = gpt.samples;
            saved_evaluations = gpt.epochs;
            saved_steps = gpt.steps;
            saved_plan = *gpt.plan;
            window.saveSession(path);
        }
        MainWindow window;
        window.show();
        window.openSession(path);
        const auto& runs = window.runStore().runs();
        QCOMPARE(runs.size(), std::size_t{2});
        const RunRecord& gpt = *runs[0];
        QCOMPARE(gpt.config.model, ModelFamily::gpt);
        QCOMPARE(gpt.config.n_layer, 2);
        QCOMPARE(gpt.config.n_head, 4);
        QCOMPARE(gpt.config.n_embd, 32);
        QCOMPARE(gpt.config.block_size, 24);
        QCOMPARE(gpt.config.eval_every, 5);
        QCOMPARE(gpt.config.sample_chars, 40);
        QCOMPARE(gpt.config.sample_seed, uint64_t{12345});
        QCOMPARE(config_to_json(gpt.config), saved_config);
        QCOMPARE(gpt.samples.size(), saved_samples.size());
        for (std::size_t i = 0; i < saved_samples.size(); ++i) {
            QCOMPARE(gpt.samples[i].update, saved_samples[i].update);
            QCOMPARE(gpt.samples[i].text, saved_samples[i].text);
        }
        // Evaluations within an epoch stay marked so, and the language model's speed is kept.
        QCOMPARE(gpt.epochs.size(), saved_evaluations.size());
        for (std::size_t i = 0; i < saved_evaluations.size(); ++i) {
            QCOMPARE(gpt.epochs[i].epoch_ended, saved_evaluations[i].epoch_ended);
            QCOMPARE(gpt.epochs[i].update, saved_evaluations[i].update);
        }
        QVERIFY(!gpt.epochs.front().epoch_ended);
        QCOMPARE(gpt.steps.size(), saved_steps.size());
        QCOMPARE(gpt.steps.back().tokens_per_second, saved_steps.back().tokens_per_second);
        // MFU's terms, so the reopened run still names the peak it was measured against.
        QVERIFY(gpt.plan.has_value());
        QCOMPARE(gpt.plan->tokens_per_sample, int64_t{24});
        QCOMPARE(gpt.plan->flops_per_sample, saved_plan.flops_per_sample);
        QCOMPARE(gpt.plan->peak_flops, saved_plan.peak_flops);
        QCOMPARE(gpt.plan->peak_source, saved_plan.peak_source);
        QVERIFY(gpt.plan->peak_flops > 0 && !gpt.plan->peak_source.empty());
        QVERIFY(gpt.steps.back().tokens_per_second > 0);
        QCOMPARE(runs[1]->config.model, ModelFamily::mlp);
        QVERIFY(runs[1]->samples.empty());

        SamplesPanel* panel = window.samplesPanel();
        QVERIFY(panel->isVisibleTo(&window));
        select_run(window, runs[1]->id);
        QVERIFY(panel->hintShown());
        select_run(window, gpt.id);
        verify_panel_shows(*panel, gpt);
        // A saved run can be run again: its GPT settings go back into the panel intact.
        window.configPanel()->setConfig(gpt.config);
        QCOMPARE(window.configPanel()->config().model, ModelFamily::gpt);
        QCOMPARE(window.configPanel()->config().n_layer, 2);
    }

    // (e) Sessions saved before text samples existed still open: the format right before them
    // and the first release's (no model fields in the config, the plan's layer widths).
    void oldSessionsOpen_data() {
        QTest::addColumn<QString>("file");
        QTest::newRow("before samples") << QStringLiteral("mlp_before_samples.tbsession.json");
        QTest::newRow("first release") << QStringLiteral("mlp_first_release.tbsession.json");
    }

    void oldSessionsOpen() {
        QFETCH(QString, file);
        const QString path = QStringLiteral(TRAINBENCH_FIXTURES_DIR "/sessions/") + file;
        QVERIFY(QFile::exists(path));
        MainWindow window;
        window.show();
        window.openSession(path);
        const auto& runs = window.runStore().runs();
        QCOMPARE(runs.size(), std::size_t{1});
        const RunRecord& run = *runs.front();
        QCOMPARE(run.name, QStringLiteral("MLP spirals"));
        QCOMPARE(run.state, RunState::completed);
        QCOMPARE(run.config.model, ModelFamily::mlp);
        QCOMPARE(run.config.hidden, (std::vector<int64_t>{8, 8}));
        QCOMPARE(run.config.step_size, 2);
        QCOMPARE(run.steps.size(), std::size_t{6});
        QCOMPARE(run.steps.back().update, 6);
        QVERIFY(std::isfinite(run.steps.back().loss));
        QCOMPARE(run.epochs.size(), std::size_t{1});
        QVERIFY(run.epochs.front().epoch_ended);
        QVERIFY(std::isfinite(run.final_val_accuracy()));
        QVERIFY(run.plan.has_value());
        QCOMPARE(run.plan->model_summary.rfind("MLP", 0), std::size_t{0});
        QVERIFY(run.samples.empty());
        QCOMPARE(window.runsTable()->rowCount(), 1);
        // An MLP-only session keeps the plots' full width; its run has no text to show.
        select_run(window, run.id);
        QVERIFY(!window.samplesPanel()->isVisibleTo(&window));
        QCOMPARE(window.samplesPanel()->runId(), run.id);
        QVERIFY(window.samplesPanel()->hintShown());
    }
};

QTEST_MAIN(TextSamplesTest)
#include "test_text_samples.moc"
