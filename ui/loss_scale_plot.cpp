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

std::unique_ptr<RunPlot::RunCurves> LossScalePlot::makeCurves(const RunRecord& run) {
    if (run.config.precision != Precision::fp16) return nullptr;
    auto curves = std::make_unique<Curves>();
    curves->scale = addRunGraph(*curves);
    curves->scale->setPen(run_pen(run.color, 1.8));
    curves->scale->setLineStyle(QCPGraph::lsStepLeft);
    curves->skipped = addRunGraph(*curves);
    curves->skipped->setLineStyle(QCPGraph::lsNone);
    curves->skipped->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCross, QColor(0xb3261e), 7));
    for (auto* graph : curves->graphs) graph->setAdaptiveSampling(true);
    return curves;
}

void LossScalePlot::addPoints(const RunRecord& run, RunCurves& base, qsizetype firstStep, qsizetype) {
    auto& curves = static_cast<Curves&>(base);
    const RunX step_x = runX(run);
    for (auto i = static_cast<std::size_t>(firstStep); i < run.steps.size(); ++i) {
        const auto& step = run.steps[i];
        const double x = step_x(step);
        curves.scale->addData(x, step.loss_scale);
        if (step.skipped) curves.skipped->addData(x, step.loss_scale);
        curves.bounds.x.add(x);
        curves.bounds.y.add(step.loss_scale);
    }
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
