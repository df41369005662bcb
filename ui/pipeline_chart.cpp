#include "pipeline_chart.hpp"

#include "run_record.hpp"
#include "run_store.hpp"
#include "trainbench/memory.hpp"

namespace trainbench::ui {
namespace {

const QColor kForward(76, 114, 176);
const QColor kBackward(85, 168, 104);

bool has_pipeline(const RunRecord& run) { return !run.last_pipeline.empty(); }

}  // namespace

PipelineChart::PipelineChart(const RunStore& store, QWidget* parent) : QCustomPlot(parent), store_(store) {
    setObjectName(QStringLiteral("pipelineChart"));
    plotLayout()->insertRow(0);
    title_ = new QCPTextElement(this, QString(), QFont(font().family(), font().pointSize(), QFont::Bold));
    plotLayout()->addElement(0, 0, title_);
    xAxis->setLabel(tr("ms from the update's start (forward: blue, backward: green; gaps: idle)"));
    yAxis->setRangeReversed(true);
    yAxis->setTicker(QSharedPointer<QCPAxisTickerText>::create());
    yAxis->grid()->setVisible(false);
    setMinimumHeight(120);
    connect(&store_, &RunStore::metricsAppended, this, [this](int id) { onMetricsAppended(id); });
    connect(&store_, &RunStore::runRemoved, this, [this](int id) {
        if (id == focus_) focus_ = 0;
        if (id == shown_) render();
        setVisible(hasPipelineRuns());
    });
}

bool PipelineChart::hasPipelineRuns() const {
    for (const auto& run : store_.runs())
        if (has_pipeline(*run)) return true;
    return false;
}

void PipelineChart::setFocusRun(int id) {
    focus_ = id;
    render();
}

void PipelineChart::onMetricsAppended(int id) {
    const RunRecord* run = store_.find(id);
    if (!run || !has_pipeline(*run)) return;
    setVisible(true);
    if (id == focus_ || id == shown_ || shown_ == 0 || !store_.find(focus_) || !has_pipeline(*store_.find(focus_))) render();
}

QString PipelineChart::title() const { return title_->text(); }

void PipelineChart::render() {
    clearItems();
    bars_.clear();
    // The focused run when it has a pipeline, otherwise the newest run that has one.
    const RunRecord* run = store_.find(focus_);
    if (!run || !has_pipeline(*run)) {
        run = nullptr;
        for (const auto& candidate : store_.runs())
            if (has_pipeline(*candidate)) run = candidate.get();
    }
    shown_ = run ? run->id : 0;
    if (!run) {
        title_->setText(QString());
        replot(QCustomPlot::rpQueuedReplot);
        return;
    }
    const std::vector<PipelineStageMetrics>& stages = run->last_pipeline;
    double idle = 0.0, end = 0.0;
    auto ticker = QSharedPointer<QCPAxisTickerText>::create();
    for (size_t s = 0; s < stages.size(); ++s) {
        idle += stages[s].idle_fraction();
        end = std::max(end, stages[s].span_ms);
        ticker->addTick(static_cast<double>(s), tr("stage %1 · %2").arg(s + 1).arg(QString::fromStdString(format_bytes(stages[s].peak_bytes))));
        for (const PipelinePass& pass : stages[s].passes) {
            bars_.push_back({static_cast<int>(s), pass.forward, pass.micro_batch, pass.start_ms, pass.end_ms});
            auto* rect = new QCPItemRect(this);
            rect->topLeft->setCoords(pass.start_ms, static_cast<double>(s) - 0.38);
            rect->bottomRight->setCoords(pass.end_ms, static_cast<double>(s) + 0.38);
            const QColor colour = pass.forward ? kForward : kBackward;
            rect->setBrush(colour);
            rect->setPen(QPen(colour.darker(130)));
            auto* label = new QCPItemText(this);
            label->position->setCoords(0.5 * (pass.start_ms + pass.end_ms), static_cast<double>(s));
            label->setText(QString::number(pass.micro_batch + 1));
            label->setColor(Qt::white);
            label->setClipToAxisRect(true);
        }
    }
    yAxis->setTicker(ticker);
    yAxis->setRange(-0.6, static_cast<double>(stages.size()) - 0.4);
    xAxis->setRange(0.0, end > 0.0 ? end * 1.02 : 1.0);
    const int64_t m = run->plan ? run->plan->step_size : 0;
    const double formula = run->plan ? 100.0 * run->plan->pipeline_bubble : 0.0;
    title_->setText(tr("Pipeline, update %1 of %2: %3 stages, %4 micro-batches, %5 — bubble %6% measured, (P-1)/(m+P-1) = %7%")
                        .arg(run->last_pipeline_update)
                        .arg(run->name)
                        .arg(stages.size())
                        .arg(m)
                        .arg(run->plan ? QString::fromStdString(run->plan->pipeline_schedule) : QString())
                        .arg(100.0 * idle / static_cast<double>(stages.size()), 0, 'f', 1)
                        .arg(formula, 0, 'f', 1));
    replot(QCustomPlot::rpQueuedReplot);
}

}  // namespace trainbench::ui
