#include "loss_plot.hpp"

#include <algorithm>
#include <cmath>

namespace trainbench::ui {

LossPlot::LossPlot(const RunStore& store, QWidget* parent) : RunPlot(store, parent) {
    setObjectName(QStringLiteral("lossPlot"));
    yAxis->setLabel(tr("loss"));
    legend->setVisible(false);  // shown once a run has a curve in it
    axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
    connect(this, &QCustomPlot::beforeReplot, this, &LossPlot::thinValidationMarkers);
}

// A long run validates thousands of times: markers closer than their own size merge into a
// band anyway, and drawing every one of ten runs' markers dominated the replot. Keep them
// about a marker apart at the current zoom; hovering still reads out every validation.
void LossPlot::thinValidationMarkers() {
    constexpr double kMarkerSpacingPx = 10.0;
    const double width_px = std::max(1, axisRect()->width());
    const QCPRange range = xAxis->range();
    for (auto& [id, graphs] : graphs_) {
        const auto data = graphs.validation->data();
        const auto shown = std::distance(data->findBegin(range.lower), data->findEnd(range.upper));
        const double per_marker_px = width_px / std::max<double>(1.0, static_cast<double>(shown));
        graphs.validation->setScatterSkip(
            per_marker_px >= kMarkerSpacingPx ? 0 : static_cast<int>(std::ceil(kMarkerSpacingPx / per_marker_px)) - 1);
    }
}

LossPlot::Graphs& LossPlot::graphsFor(const RunRecord& run) {
    auto it = graphs_.find(run.id);
    if (it != graphs_.end()) return it->second;
    Graphs graphs{nullptr, nullptr, nullptr, DebiasedEma(smoothing_)};
    QColor faded = run.color;
    faded.setAlpha(70);
    graphs.raw = addGraph();
    graphs.raw->setPen(run_pen(faded, 1));
    graphs.raw->removeFromLegend();
    // Noisy raw data draws as a dense band; antialiasing it costs much and shows nothing more.
    graphs.raw->setAntialiased(false);
    graphs.smoothed = addGraph();
    graphs.smoothed->setPen(run_pen(run.color, 2));
    graphs.smoothed->setName(run.name);
    graphs.validation = addGraph();
    graphs.validation->setLineStyle(QCPGraph::lsNone);
    graphs.validation->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, Qt::white, run.color, 8));
    graphs.validation->setPen(run_pen(run.color, 2));
    graphs.validation->removeFromLegend();
    for (auto* graph : {graphs.raw, graphs.smoothed, graphs.validation}) graph->setAdaptiveSampling(true);
    return graphs_.emplace(run.id, std::move(graphs)).first->second;
}

double LossPlot::epochX(const RunRecord& run, const EpochMetrics& epoch) const {
    auto it = std::lower_bound(run.steps.begin(), run.steps.end(), epoch.update,
                               [](const StepMetrics& step, int64_t update) { return step.update < update; });
    if (it != run.steps.end() && it->update == epoch.update) return stepX(*it);
    return xAxisKind() == XAxisKind::wall_time ? epoch.wall_seconds : static_cast<double>(epoch.update);
}

void LossPlot::appendRun(const RunRecord& run, qsizetype firstStep, qsizetype firstEpoch) {
    Graphs& graphs = graphsFor(run);
    RunBounds& bounds = boundsFor(run.id);
    const auto count = static_cast<qsizetype>(run.steps.size()) - firstStep;
    if (count > 0) {
        QVector<double> xs(count), raw(count), smoothed(count);
        for (qsizetype i = 0; i < count; ++i) {
            const auto& step = run.steps[static_cast<std::size_t>(firstStep + i)];
            xs[i] = stepX(step);
            raw[i] = step.loss;
            smoothed[i] = graphs.ema.push(step.loss);
            bounds.x.add(xs[i]);
            bounds.y.add(raw[i]);
        }
        graphs.raw->addData(xs, raw, true);
        graphs.smoothed->addData(xs, smoothed, true);
        legend->setVisible(legend->itemCount() > 0);
    }
    for (auto i = static_cast<std::size_t>(firstEpoch); i < run.epochs.size(); ++i) {
        const auto& epoch = run.epochs[i];
        if (!std::isfinite(epoch.val_loss)) continue;
        const double x = epochX(run, epoch);
        graphs.validation->addData(x, epoch.val_loss);
        bounds.x.add(x);
        bounds.y.add(epoch.val_loss);
    }
}

void LossPlot::removeRun(int id) {
    auto it = graphs_.find(id);
    if (it == graphs_.end()) return;
    for (auto* graph : {it->second.raw, it->second.smoothed, it->second.validation}) removeGraph(graph);
    graphs_.erase(it);
    forgetBounds(id);
    legend->setVisible(legend->itemCount() > 0);
}

void LossPlot::setRunVisible(int id, bool visible) {
    auto it = graphs_.find(id);
    if (it == graphs_.end()) return;
    for (auto* graph : {it->second.raw, it->second.smoothed, it->second.validation}) graph->setVisible(visible);
    if (visible)
        it->second.smoothed->addToLegend();
    else
        it->second.smoothed->removeFromLegend();
    legend->setVisible(legend->itemCount() > 0);
}

void LossPlot::renameRun(const RunRecord& run) {
    if (auto it = graphs_.find(run.id); it != graphs_.end()) it->second.smoothed->setName(run.name);
}

void LossPlot::clearRuns() {
    for (auto& [id, graphs] : graphs_)
        for (auto* graph : {graphs.raw, graphs.smoothed, graphs.validation}) removeGraph(graph);
    graphs_.clear();
}

void LossPlot::setSmoothing(double weight) {
    smoothing_ = std::clamp(weight, 0.0, 0.999);
    rebuild();
}

QString LossPlot::describeStep(const RunRecord& run, std::size_t index) const {
    auto it = graphs_.find(run.id);
    QString text = tr("loss %1").arg(valueText(run.steps[index].loss));
    if (it != graphs_.end() && static_cast<int>(index) < it->second.smoothed->dataCount())
        text += tr(" · smoothed %1").arg(valueText(it->second.smoothed->data()->at(static_cast<int>(index))->value));
    // The last validation at or before this update, if any.
    const int64_t update = run.steps[index].update;
    for (auto epoch = run.epochs.rbegin(); epoch != run.epochs.rend(); ++epoch) {
        if (epoch->update > update) continue;
        if (std::isfinite(epoch->val_loss)) text += tr(" · val %1").arg(valueText(epoch->val_loss));
        if (std::isfinite(epoch->val_accuracy)) text += tr(" (acc %1%)").arg(epoch->val_accuracy * 100, 0, 'f', 1);
        break;
    }
    return text;
}

}  // namespace trainbench::ui
