// The plots and the runs table fed with synthetic runs through a RunStore, as a live run feeds
// them (no training): every plot's graphs come and go per run through RunPlot (add, hide,
// remove, clear, redraw), a language model's tokens/s and MFU reach the speed plot and the
// runs table, the samples/tokens x-axis counts a language model's tokens, and validation
// points sit at the x of the update they followed, for every x-axis kind.
//
// With TRAINBENCH_SCREENSHOT_DIR set, plotsWithLanguageModel also saves the plots and the
// table with two GPT runs there to be looked at: plots-language-model.png (by update, tokens/s),
// -mfu.png (by tokens, MFU) and -narrow.png (as narrow as beside the samples panel).
#include <QDir>
#include <QImage>
#include <QLocale>
#include <QVBoxLayout>
#include <QtTest>
#include <cmath>
#include <random>

#include "loss_plot.hpp"
#include "loss_scale_plot.hpp"
#include "memory_plot.hpp"
#include "plot_area.hpp"
#include "run_store.hpp"
#include "runs_table.hpp"
#include "speed_plot.hpp"
#include "trainbench/trainer.hpp"
#include "ui_test_support.hpp"

using namespace trainbench;
using namespace trainbench::ui;

namespace {

constexpr int64_t kContext = 64;  // the language model's tokens per sample
const char* const kPeakSource = "the engine's fp32 matrix product on 2 threads, 100.0 GFLOP/s, measured now";

RunConfig mlp_config(Precision precision = Precision::fp32) {
    RunConfig config = testing::small_config(100);
    config.precision = precision;
    return config;
}

RunConfig gpt_config() {
    RunConfig config = default_config(ModelFamily::gpt);
    config.block_size = kContext;
    config.batch_size = 16;
    config.step_size = 2;
    config.eval_every = 5;
    return config;
}

RunPlan plan_for(const RunConfig& config, bool languageModel) {
    RunPlan plan;
    plan.global_batch = config.batch_size;
    plan.step_size = config.step_size;
    plan.micro_batch = (config.batch_size + config.step_size - 1) / config.step_size;
    plan.total_updates = config.max_steps;
    plan.tokens_per_sample = languageModel ? kContext : 0;
    plan.flops_per_sample = languageModel ? 2.5e6 : 0.0;
    plan.peak_flops = languageModel ? 1e11 : 0.0;
    plan.peak_source = languageModel ? kPeakSource : "";
    return plan;
}

// Updates [first, first + count) of a run with `batch` samples per update, each taking
// `update_ms` (a language model: `tokensPerSample` tokens per sample, MFU `mfu`).
std::vector<StepMetrics> make_steps(int64_t first, int64_t count, int64_t batch, double update_ms,
                                    int64_t tokensPerSample = 0, double mfu = std::nan("")) {
    std::vector<StepMetrics> steps;
    for (int64_t update = first; update < first + count; ++update) {
        StepMetrics step;
        step.update = update;
        step.epoch = 1;
        step.samples_seen = update * batch;
        step.wall_seconds = static_cast<double>(update) * 0.05;
        step.loss = 3.0 / std::sqrt(static_cast<double>(update));
        step.update_ms = update_ms;
        step.batch_samples = batch;
        step.samples_per_second = static_cast<double>(batch) / (update_ms / 1000.0);
        step.tokens_per_second = step.samples_per_second * static_cast<double>(tokensPerSample);
        step.mfu = mfu;
        step.memory.update_peak[static_cast<int>(MemoryCategory::parameters)] = 1 << 20;
        step.memory.update_live_peak = 1 << 20;
        step.memory.reserved = step.memory.reserved_peak = 1 << 20;
        steps.push_back(step);
    }
    return steps;
}

EpochMetrics evaluation(int64_t update, bool epochEnded, double valLoss) {
    EpochMetrics epoch;
    epoch.epoch = 1;
    epoch.epoch_ended = epochEnded;
    epoch.update = update;
    epoch.val_loss = valLoss;
    epoch.val_accuracy = 0.4;
    epoch.wall_seconds = static_cast<double>(update) * 0.05 + 0.01;  // after the update's own time
    return epoch;
}

// An MLP run of `updates` updates (batch 32, 2 ms each), fed in one drain.
int add_mlp_run(RunStore& store, int64_t updates, Precision precision = Precision::fp32) {
    const RunConfig config = mlp_config(precision);
    const int id = store.addRun(config).id;
    store.setPlan(id, plan_for(config, false));
    store.appendMetrics(id, make_steps(1, updates, config.batch_size, 2.0), {evaluation(updates, true, 1.0)}, {});
    return id;
}

// A language model of `updates` updates fed in drains of 7 updates, validated every 5 updates
// (eval_every, epoch_ended false) and at the end: the first half of its updates is slow
// (40 ms, a warm-up), the second half 10 ms at 25% MFU.
int add_gpt_run(RunStore& store, int64_t updates) {
    const RunConfig config = gpt_config();
    const int id = store.addRun(config).id;
    store.setPlan(id, plan_for(config, true));
    for (int64_t first = 1; first <= updates; first += 7) {
        const int64_t count = std::min<int64_t>(7, updates - first + 1);
        std::vector<StepMetrics> steps;
        for (int64_t update = first; update < first + count; ++update) {
            const bool warm = update > updates / 2;
            auto one = make_steps(update, 1, config.batch_size, warm ? 10.0 : 40.0, kContext, warm ? 0.25 : 0.0625);
            steps.push_back(one.front());
        }
        std::vector<EpochMetrics> epochs;
        for (int64_t update = first; update < first + count; ++update)
            if (update % config.eval_every == 0 || update == updates)
                epochs.push_back(evaluation(update, update == updates, 2.0 / static_cast<double>(update)));
        store.appendMetrics(id, steps, epochs, {});
    }
    return id;
}

}  // namespace

class PlotRunsTest : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { testing::isolate_settings(); }

    // A run's steps have room for all its updates once its length is known (max_steps when it
    // is added, the plan's total for a run bounded by epochs), so appending never moves the
    // history already stored: no drain copies it (tests/ui/test_plot_scale times that).
    void appendingNeverMovesARunsHistory() {
        for (const bool bounded_by_epochs : {false, true}) {
            RunStore store;
            RunConfig config = mlp_config();
            config.max_steps = bounded_by_epochs ? 0 : 3000;
            const int id = store.addRun(config).id;
            RunPlan plan = plan_for(config, false);
            plan.total_updates = 3000;
            store.setPlan(id, plan);
            store.appendMetrics(id, make_steps(1, 100, config.batch_size, 2.0), {}, {});
            const StepMetrics* first = store.find(id)->steps.data();
            for (int64_t update = 101; update <= 3000; update += 100)
                store.appendMetrics(id, make_steps(update, 100, config.batch_size, 2.0), {}, {});
            QCOMPARE(store.find(id)->steps.size(), size_t{3000});
            QVERIFY2(store.find(id)->steps.data() == first, bounded_by_epochs ? "bounded by epochs" : "max_steps");
        }
    }

    // Every plot's curves of a run appear with its metrics and go with it, through RunPlot.
    void graphsFollowRunsThroughTheBaseClass() {
        RunStore store;
        PlotArea area(store);
        LossPlot& loss = *area.lossPlot();
        SpeedPlot& speed = *area.speedPlot();
        MemoryPlot& memory = *area.memoryPlot();
        LossScalePlot& scale = *area.lossScalePlot();
        const int memory_own_graphs = memory.graphCount();  // the focused run's stack and peak lines

        const int mlp = add_mlp_run(store, 20);
        const int gpt = add_gpt_run(store, 30);
        const int fp16 = add_mlp_run(store, 10, Precision::fp16);
        for (RunPlot* plot : {static_cast<RunPlot*>(&loss), static_cast<RunPlot*>(&speed), static_cast<RunPlot*>(&memory)}) {
            QCOMPARE(plot->runCount(), 3);
            for (int id : {mlp, gpt, fp16}) QVERIFY(plot->hasRun(id));
        }
        QCOMPARE(loss.runGraphs(gpt).size(), std::size_t(3));    // raw, smoothed, validation
        QCOMPARE(speed.runGraphs(gpt).size(), std::size_t(3));   // raw and smoothed ms, throughput
        QCOMPARE(memory.runGraphs(gpt).size(), std::size_t(1));  // total
        QCOMPARE(loss.graphCount(), 9);
        QCOMPARE(memory.graphCount(), memory_own_graphs + 3);
        // Only the fp16 run has a loss scale.
        QCOMPARE(scale.runCount(), 1);
        QVERIFY(scale.hasRun(fp16) && !scale.hasRun(mlp) && !scale.hasRun(gpt));
        QVERIFY(scale.hasFp16Runs());
        QCOMPARE(scale.runGraphs(fp16).size(), std::size_t(2));
        QCOMPARE(scale.runGraphs(fp16).front()->dataCount(), 10);
        QCOMPARE(loss.runGraphs(gpt)[0]->dataCount(), 30);
        QCOMPARE(loss.legend->itemCount(), 3);
        // The memory plot stacks the focused (newest) run; the others show their totals.
        QCOMPARE(memory.focusRunId(), fp16);
        QVERIFY(!memory.runGraphs(fp16).front()->visible());
        QVERIFY(memory.runGraphs(mlp).front()->visible());

        // Hiding a run hides all of its graphs and takes it out of the legend.
        store.setVisible(gpt, false);
        for (RunPlot* plot : area.plots())
            for (QCPGraph* graph : plot->runGraphs(gpt)) QVERIFY(!graph->visible());
        QCOMPARE(loss.legend->itemCount(), 2);
        for (QCPGraph* graph : loss.runGraphs(mlp)) QVERIFY(graph->visible());
        // A redraw (another x-axis) makes every run's curves again, hidden ones hidden.
        area.setXAxisKind(XAxisKind::wall_time);
        QCOMPARE(loss.runCount(), 3);
        for (QCPGraph* graph : loss.runGraphs(gpt)) QVERIFY(!graph->visible());
        QCOMPARE(loss.runGraphs(gpt)[0]->dataCount(), 30);
        QCOMPARE(loss.legend->itemCount(), 2);
        store.setVisible(gpt, true);
        for (QCPGraph* graph : loss.runGraphs(gpt)) QVERIFY(graph->visible());
        QCOMPARE(loss.legend->itemCount(), 3);

        // Renaming renames the legend entry.
        store.rename(mlp, QStringLiteral("baseline"));
        bool listed = false;
        for (int i = 0; i < loss.legend->itemCount(); ++i)
            if (auto* item = qobject_cast<QCPPlottableLegendItem*>(loss.legend->item(i)))
                listed = listed || item->plottable()->name() == QStringLiteral("baseline");
        QVERIFY(listed);

        // Removing a run removes its graphs from every plot.
        store.remove(fp16);
        for (RunPlot* plot : area.plots()) QVERIFY(!plot->hasRun(fp16));
        QCOMPARE(loss.graphCount(), 6);
        QVERIFY(!scale.hasFp16Runs());
        QCOMPARE(scale.graphCount(), 0);
        QCOMPARE(memory.focusRunId(), gpt);  // the newest run left takes the focus
        QVERIFY(memory.runGraphs(mlp).front()->visible());

        // Clearing the store leaves no run's graph anywhere.
        store.clear();
        for (RunPlot* plot : area.plots()) QCOMPARE(plot->runCount(), 0);
        QCOMPARE(loss.graphCount(), 0);
        QCOMPARE(speed.graphCount(), 0);
        QCOMPARE(memory.graphCount(), memory_own_graphs);
        QCOMPARE(loss.legend->itemCount(), 0);
        QVERIFY(!loss.legend->visible());
    }

    // tokens/s for language models, samples/s when an MLP is shown too, MFU on request.
    void speedPlotShowsTokensAndMfu() {
        RunStore store;
        PlotArea area(store);
        SpeedPlot& speed = *area.speedPlot();
        const int gpt = add_gpt_run(store, 40);
        const auto& steps = store.find(gpt)->steps;

        QCOMPARE(speed.throughputUnit(), ThroughputUnit::automatic);
        QCOMPARE(speed.drawnThroughputUnit(), ThroughputUnit::tokens);
        QVERIFY(speed.yAxis2->label().contains(QStringLiteral("tokens/s")));
        auto points = speed.throughputPoints(gpt);
        QCOMPARE(points.size(), steps.size());
        // Constant within each half, so the smoothed line starts exactly at the first value.
        QCOMPARE(points.front().second, steps.front().tokens_per_second);
        QCOMPARE(steps.front().tokens_per_second, 16.0 / 0.040 * kContext);

        // An MLP shown beside it: both in samples/s.
        const int mlp = add_mlp_run(store, 20);
        QCOMPARE(speed.drawnThroughputUnit(), ThroughputUnit::samples);
        QVERIFY(speed.yAxis2->label().contains(QStringLiteral("samples/s")));
        QCOMPARE(speed.throughputPoints(gpt).front().second, steps.front().samples_per_second);
        QCOMPARE(speed.throughputPoints(mlp).size(), std::size_t(20));
        // Hidden again: tokens/s.
        store.setVisible(mlp, false);
        QCOMPARE(speed.drawnThroughputUnit(), ThroughputUnit::tokens);
        QCOMPARE(speed.throughputPoints(gpt).front().second, steps.front().tokens_per_second);
        store.setVisible(mlp, true);

        // tokens/s chosen: the MLP has no thin line.
        area.setThroughputUnit(ThroughputUnit::tokens);
        QCOMPARE(speed.drawnThroughputUnit(), ThroughputUnit::tokens);
        QCOMPARE(speed.throughputPoints(gpt).size(), steps.size());
        QVERIFY(speed.throughputPoints(mlp).empty());

        // MFU in percent; the MLP, with no peak, has none.
        area.setThroughputUnit(ThroughputUnit::mfu);
        QCOMPARE(speed.drawnThroughputUnit(), ThroughputUnit::mfu);
        QVERIFY(speed.yAxis2->label().contains(QStringLiteral("MFU")));
        points = speed.throughputPoints(gpt);
        QCOMPARE(points.size(), steps.size());
        QCOMPARE(points.front().second, 6.25);
        QVERIFY(points.back().second > 20.0 && points.back().second < 25.0);  // smoothed towards the later 25%
        QVERIFY(speed.throughputPoints(mlp).empty());
        // The ms/update lines are there whatever the thin lines show.
        QCOMPARE(speed.runGraphs(mlp)[1]->dataCount(), 20);

        // The hover read-out names tokens/s, MFU and the peak it is measured against.
        const QString readout = speed.readoutAt(35.0);
        QVERIFY2(readout.contains(QStringLiteral("tokens/s")), qPrintable(readout));
        QVERIFY2(readout.contains(QStringLiteral("MFU 25.0%")), qPrintable(readout));
        QVERIFY2(readout.contains(QStringLiteral("samples of 64 tokens")), qPrintable(readout));
        const QString peak_note = QStringLiteral("MFU against the peak of ") + QString::fromLatin1(kPeakSource).toHtmlEscaped();
        QVERIFY2(readout.contains(peak_note),
                 qPrintable(readout));
        QCOMPARE(readout.count(QStringLiteral("MFU against")), 1);

        // Runs measured against the same peak share the note, whatever its wording; another
        // peak gets a line of its own, naming its runs.
        const int again = add_gpt_run(store, 40);
        RunPlan plan = *store.find(again)->plan;
        plan.peak_source = "the engine's fp32 matrix product on 2 threads, 100.0 GFLOP/s, measured earlier";
        store.setPlan(again, plan);
        QVERIFY(!speed.readoutAt(35.0).contains(QStringLiteral("MFU of")));
        const int other = add_gpt_run(store, 40);
        plan.peak_flops = 5e10;
        plan.peak_source = "a slower device, 50.0 GFLOP/s, measured now";
        store.setPlan(other, plan);
        const QString two_peaks = speed.readoutAt(35.0);
        const QString first = store.find(gpt)->name, second = store.find(again)->name, third = store.find(other)->name;
        QVERIFY2(two_peaks.contains(QStringLiteral("MFU of %1, %2 against the peak of the engine").arg(first, second)),
                 qPrintable(two_peaks));
        QVERIFY2(two_peaks.contains(QStringLiteral("MFU of %1 against the peak of a slower device").arg(third)),
                 qPrintable(two_peaks));
    }

    void runsTableShowsTokensPerSecondAndMfu() {
        RunStore store;
        RunsTable table(store);
        const int mlp = add_mlp_run(store, 20);
        const int gpt = add_gpt_run(store, 40);
        const int mlp_row = table.rowOf(mlp), gpt_row = table.rowOf(gpt);
        QCOMPARE(table.horizontalHeaderItem(RunsTable::kTokensPerSecond)->text(), QStringLiteral("Tokens/s"));
        QCOMPARE(table.horizontalHeaderItem(RunsTable::kMfu)->text(), QStringLiteral("MFU"));
        QVERIFY(table.horizontalHeaderItem(RunsTable::kTokensPerSecond)->toolTip().contains(QStringLiteral("later half")));

        // Over the later half of the updates (21-40), all at 10 ms: the slow first half is left out.
        const double tokens_per_second = 16.0 / 0.010 * kContext;
        QCOMPARE(table.item(gpt_row, RunsTable::kTokensPerSecond)->text(), QLocale().toString(tokens_per_second, 'f', 0));
        QCOMPARE(table.item(gpt_row, RunsTable::kMfu)->text(), QStringLiteral("25.0%"));
        QVERIFY(table.item(gpt_row, RunsTable::kMfu)->toolTip().contains(QString::fromLatin1(kPeakSource)));
        QVERIFY(table.item(gpt_row, RunsTable::kTokensPerSecond)->toolTip().contains(QStringLiteral("21–40")));
        // Not applicable to the MLP (no tokens, no peak): empty.
        QVERIFY(table.item(mlp_row, RunsTable::kTokensPerSecond)->text().isEmpty());
        QVERIFY(table.item(mlp_row, RunsTable::kMfu)->text().isEmpty());
        QVERIFY(!table.item(mlp_row, RunsTable::kFinalLoss)->text().isEmpty());

        // The window moves with the run: 40 more updates at 20 ms make the later half 41-80.
        const RunConfig config = gpt_config();
        store.appendMetrics(gpt, make_steps(41, 40, config.batch_size, 20.0, kContext, 0.125), {}, {});
        QCOMPARE(table.item(gpt_row, RunsTable::kTokensPerSecond)->text(),
                 QLocale().toString(16.0 / 0.020 * kContext, 'f', 0));
        QCOMPARE(table.item(gpt_row, RunsTable::kMfu)->text(), QStringLiteral("12.5%"));
    }

    // samples/tokens: an MLP counts samples, a language model the tokens in them.
    void tokensAxisCountsTokensOfLanguageModels() {
        RunStore store;
        PlotArea area(store);
        const int mlp = add_mlp_run(store, 20);
        const int gpt = add_gpt_run(store, 30);
        area.setXAxisKind(XAxisKind::samples_seen);
        const auto& gpt_steps = store.find(gpt)->steps;
        const auto& mlp_steps = store.find(mlp)->steps;
        for (RunPlot* plot : {static_cast<RunPlot*>(area.lossPlot()), static_cast<RunPlot*>(area.speedPlot()),
                              static_cast<RunPlot*>(area.memoryPlot())}) {
            const auto gpt_data = plot->runGraphs(gpt).front()->data();
            const auto mlp_data = plot->runGraphs(mlp).front()->data();
            QCOMPARE(gpt_data->size(), 30);
            for (int i = 0; i < gpt_data->size(); ++i)
                QCOMPARE(gpt_data->at(i)->key,
                         static_cast<double>(gpt_steps[static_cast<std::size_t>(i)].samples_seen * kContext));
            for (int i = 0; i < mlp_data->size(); ++i)
                QCOMPARE(mlp_data->at(i)->key, static_cast<double>(mlp_steps[static_cast<std::size_t>(i)].samples_seen));
        }
        QCOMPARE(area.lossPlot()->xAxis->label(), QStringLiteral("training samples seen (tokens for language models)"));
        store.setVisible(mlp, false);
        QCOMPARE(area.lossPlot()->xAxis->label(), QStringLiteral("training tokens seen"));
        store.setVisible(gpt, false);
        store.setVisible(mlp, true);
        QCOMPARE(area.lossPlot()->xAxis->label(), QStringLiteral("training samples seen"));
        // The hover finds a language model's update by its tokens.
        store.setVisible(gpt, true);
        const double x = static_cast<double>(gpt_steps[9].samples_seen * kContext);
        QVERIFY(area.lossPlot()->readoutAt(x).contains(QStringLiteral("update 10 ")));

        // A GPT run with no plan and no tokens/s in its steps (as read back from a session that
        // kept neither) counts its context length from its settings.
        RunConfig config = gpt_config();
        config.block_size = 32;
        const int bare = store.addRun(config).id;
        store.appendMetrics(bare, make_steps(1, 10, config.batch_size, 10.0), {}, {});
        QCOMPARE(area.lossPlot()->runGraphs(bare).front()->data()->at(9)->key, 10.0 * 16 * 32);
        area.setThroughputUnit(ThroughputUnit::tokens);
        QCOMPARE(area.speedPlot()->throughputPoints(bare).front().second, 16.0 / 0.010 * 32);
    }

    // A language model validates every eval_every updates, not only at epoch ends: each point
    // sits at the x of the update it followed, whatever the x-axis measures.
    void validationPointsSitAtTheirUpdate() {
        RunStore store;
        PlotArea area(store);
        const int gpt = add_gpt_run(store, 32);
        const int mlp = add_mlp_run(store, 20);
        const RunRecord& run = *store.find(gpt);
        QCOMPARE(run.epochs.size(), std::size_t(7));  // updates 5, 10, ..., 30 and the last, 32
        QVERIFY(!run.epochs.front().epoch_ended);
        auto step_of = [&](int64_t update) { return run.steps[static_cast<std::size_t>(update - 1)]; };
        for (auto kind : {XAxisKind::update, XAxisKind::samples_seen, XAxisKind::wall_time}) {
            area.setXAxisKind(kind);
            const auto points = area.lossPlot()->validationPoints(gpt);
            QCOMPARE(points.size(), run.epochs.size());
            for (std::size_t i = 0; i < points.size(); ++i) {
                const auto& epoch = run.epochs[i];
                const StepMetrics step = step_of(epoch.update);
                const double expected = kind == XAxisKind::update         ? static_cast<double>(epoch.update)
                                        : kind == XAxisKind::samples_seen ? static_cast<double>(step.samples_seen * kContext)
                                                                          : step.wall_seconds;
                QCOMPARE(points[i].first, expected);
                QCOMPARE(points[i].second, epoch.val_loss);
            }
            // The MLP's epoch-end validation, too.
            const auto mlp_points = area.lossPlot()->validationPoints(mlp);
            QCOMPARE(mlp_points.size(), std::size_t(1));
            const StepMetrics& last = store.find(mlp)->steps.back();
            QCOMPARE(mlp_points.front().first, kind == XAxisKind::update         ? 20.0
                                               : kind == XAxisKind::samples_seen ? static_cast<double>(last.samples_seen)
                                                                                 : last.wall_seconds);
        }
        // The read-out at update 12 gives the evaluation after update 10.
        area.setXAxisKind(XAxisKind::update);
        QVERIFY(area.lossPlot()->readoutAt(12).contains(QStringLiteral("val %1").arg(2.0 / 10, 0, 'g', 4)));
    }

    // The plots and the table with two language models (step_size 2 and 8), noisy as real runs
    // are, rendered (and saved when TRAINBENCH_SCREENSHOT_DIR is set) to be looked at.
    // From a real run's measurements: the memory stack of every update adds up to what was
    // held at one moment, so its top never passes the run's measured peak (the dashed line),
    // and the top of its live categories is the "held at once" line.
    void memoryStackNeverPassesTheMeasuredPeak() {
        RunConfig config = testing::small_config(6);
        config.step_size = 4;
        RunPlan plan;
        std::vector<StepMetrics> steps;
        Observer observer;
        observer.on_start = [&](const RunPlan& p) { plan = p; };
        observer.on_update = [&](const StepMetrics& m) { steps.push_back(m); };
        const RunResult result = train(config, observer);
        QVERIFY2(result.reason == StopReason::max_steps, result.message.c_str());
        RunStore store;
        PlotArea area(store);
        const int id = store.addRun(config).id;
        store.setPlan(id, plan);
        store.appendMetrics(id, steps, {}, {});
        MemoryPlot& memory = *area.memoryPlot();
        QCOMPARE(memory.focusRunId(), id);
        const int categories = static_cast<int>(MemoryPlot::kStackOrder.size());
        QCPGraph* top = memory.graph(categories - 1);            // the cache, the stack's top
        QCPGraph* live_top = memory.graph(categories - 2);       // the workspace, the live part's top
        QCPGraph* held = memory.graph(categories);               // "held at once"
        QCPGraph* peak = memory.graph(categories + 1);           // the run's peak, dashed
        QCOMPARE(top->dataCount(), int(steps.size()));
        QVERIFY(peak->dataCount() > 0);
        const double peak_mib = peak->data()->at(0)->value;
        QCOMPARE(peak_mib, double(steps.back().memory.reserved_peak) / (1024.0 * 1024.0));
        for (int i = 0; i < top->dataCount(); ++i) {
            QVERIFY2(top->data()->at(i)->value <= peak_mib * (1 + 1e-12),
                     qPrintable(QString("update %1: stack %2 MiB, peak %3 MiB").arg(i + 1).arg(top->data()->at(i)->value).arg(peak_mib)));
            QVERIFY(std::abs(live_top->data()->at(i)->value - held->data()->at(i)->value) < 1e-9);
        }
    }

    void plotsWithLanguageModel() {
        RunStore store;
        QWidget window;
        auto* layout = new QVBoxLayout(&window);
        auto* area = new PlotArea(store);
        auto* table = new RunsTable(store);
        layout->addWidget(area, 1);
        layout->addWidget(table);
        table->setMaximumHeight(120);
        window.resize(1100, 900);
        window.show();
        QVERIFY(QTest::qWaitForWindowExposed(&window));

        std::mt19937 random(7);
        std::lognormal_distribution<double> noise(0.0, 0.08);
        auto add_run = [&](const RunConfig& config, bool languageModel, double ms, double lossScale) {
            const int id = store.addRun(config).id;
            store.setPlan(id, plan_for(config, languageModel));
            std::vector<StepMetrics> steps;
            std::vector<EpochMetrics> epochs;
            for (int64_t update = 1; update <= 600; ++update) {
                auto step = make_steps(update, 1, config.batch_size, ms * noise(random) * (update < 4 ? 3.0 : 1.0),
                                       languageModel ? kContext : 0)
                                .front();
                if (languageModel) step.mfu = 2.5e6 * step.samples_per_second / 1e11;
                step.loss = lossScale * (0.6 + 3.6 * std::exp(-static_cast<double>(update) / 120.0)) * noise(random);
                step.wall_seconds = static_cast<double>(update) * ms / 1000.0;
                steps.push_back(step);
                if (update % 50 == 0)
                    epochs.push_back(evaluation(
                        update, false, lossScale * (0.7 + 3.6 * std::exp(-static_cast<double>(update) / 120.0))));
            }
            store.appendMetrics(id, steps, epochs, {});
            return id;
        };
        add_run(gpt_config(), true, 45.0, 1.0);
        RunConfig accumulated = gpt_config();
        accumulated.step_size = 8;
        add_run(accumulated, true, 52.0, 1.02);
        QTest::qWait(400);  // the plots' coalesced, autoscaled replots
        const QImage image = window.grab().toImage();
        QVERIFY(!image.isNull());
        const QString folder = qEnvironmentVariable("TRAINBENCH_SCREENSHOT_DIR");
        if (!folder.isEmpty()) {
            QDir().mkpath(folder);
            QVERIFY(image.save(QDir(folder).filePath(QStringLiteral("plots-language-model.png"))));
            area->setThroughputUnit(ThroughputUnit::mfu);
            area->setXAxisKind(XAxisKind::samples_seen);
            QTest::qWait(400);
            QVERIFY(window.grab().toImage().save(QDir(folder).filePath(QStringLiteral("plots-language-model-mfu.png"))));
            window.resize(700, 900);  // as narrow as beside the samples panel
            QTest::qWait(400);
            QVERIFY(window.grab().toImage().save(QDir(folder).filePath(QStringLiteral("plots-language-model-narrow.png"))));
        }
    }
};

QTEST_MAIN(PlotRunsTest)
#include "test_plot_runs.moc"
