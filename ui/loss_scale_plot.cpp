#include "loss_scale_plot.hpp"

namespace trainbench::ui {

LossScalePlot::LossScalePlot(const RunStore& store, QWidget* parent) : RunPlot(store, parent) {
    setObjectName(QStringLiteral("lossScalePlot"));
    yAxis->setLabel(tr("fp16 loss scale"));
    setMinimumHeight(110);
    setLogY(true);
    auto ticker = QSharedPointer<QCPAxisTickerLog>::create();
    ticker->setLogBase(2);
    yAxis->setTicker(ticker);
    yAxis->setNumberFormat(QStringLiteral("gb"));
}

void LossScalePlot::appendRun(const RunRecord& run, qsizetype firstStep, qsizetype) {
    if (run.config.precision != Precision::fp16) return;
    auto it = graphs_.find(run.id);
    if (it == graphs_.end()) {
        Graphs graphs;
        graphs.scale = addGraph();
        graphs.scale->setPen(run_pen(run.color, 1.8));
        graphs.scale->setLineStyle(QCPGraph::lsStepLeft);
        graphs.skipped = addGraph();
        graphs.skipped->setLineStyle(QCPGraph::lsNone);
        graphs.skipped->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCross, QColor(0xb3261e), 7));
        graphs.scale->setAdaptiveSampling(true);
        graphs.skipped->setAdaptiveSampling(true);
        it = graphs_.emplace(run.id, graphs).first;
    }
    RunBounds& bounds = boundsFor(run.id);
    for (auto i = static_cast<std::size_t>(firstStep); i < run.steps.size(); ++i) {
        const auto& step = run.steps[i];
        const double x = stepX(step);
        it->second.scale->addData(x, step.loss_scale);
        if (step.skipped) it->second.skipped->addData(x, step.loss_scale);
        bounds.x.add(x);
        bounds.y.add(step.loss_scale);
    }
}

void LossScalePlot::removeRun(int id) {
    auto it = graphs_.find(id);
    if (it == graphs_.end()) return;
    removeGraph(it->second.scale);
    removeGraph(it->second.skipped);
    graphs_.erase(it);
    forgetBounds(id);
}

void LossScalePlot::setRunVisible(int id, bool visible) {
    if (auto it = graphs_.find(id); it != graphs_.end()) {
        it->second.scale->setVisible(visible);
        it->second.skipped->setVisible(visible);
    }
}

void LossScalePlot::clearRuns() {
    for (auto& [id, graphs] : graphs_) {
        removeGraph(graphs.scale);
        removeGraph(graphs.skipped);
    }
    graphs_.clear();
}

QString LossScalePlot::describeStep(const RunRecord& run, std::size_t index) const {
    if (run.config.precision != Precision::fp16) return {};
    const auto& step = run.steps[index];
    return tr("scale %1%2 · %3 skipped so far")
        .arg(step.loss_scale, 0, 'g', 8)
        .arg(step.skipped ? tr(" (skipped: overflow)") : QString())
        .arg(step.skipped_updates);
}

}  // namespace trainbench::ui
