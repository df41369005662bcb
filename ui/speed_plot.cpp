#include "speed_plot.hpp"

#include <algorithm>

namespace trainbench::ui {

SpeedPlot::SpeedPlot(const RunStore& store, QWidget* parent) : RunPlot(store, parent) {
    setObjectName(QStringLiteral("speedPlot"));
    yAxis->setLabel(tr("ms per update"));
    yAxis2->setLabel(tr("samples/s (thin)"));
    yAxis2->setTicks(true);
    yAxis2->setTickLabels(true);
}

SpeedPlot::Graphs& SpeedPlot::graphsFor(const RunRecord& run) {
    auto it = graphs_.find(run.id);
    if (it != graphs_.end()) return it->second;
    Graphs graphs{nullptr, nullptr, nullptr, DebiasedEma(smoothing_), DebiasedEma(smoothing_)};
    QColor faded = run.color;
    faded.setAlpha(35);
    graphs.update_ms_raw = addGraph();
    graphs.update_ms_raw->setPen(run_pen(faded, 1));
    graphs.update_ms = addGraph();
    graphs.update_ms->setPen(run_pen(run.color, 2));
    graphs.samples_per_second = addGraph(xAxis, yAxis2);
    // A dashed pen over thousands of segments costs Qt's raster engine hundreds of ms per
    // replot, so throughput is told apart by a thinner, lighter solid line instead.
    graphs.samples_per_second->setPen(run_pen(run.color.lighter(135), 1));
    for (auto* graph : {graphs.update_ms_raw, graphs.update_ms, graphs.samples_per_second}) {
        graph->setAdaptiveSampling(true);
        graph->removeFromLegend();
    }
    // Noisy raw data draws as a dense band; antialiasing it costs much and shows nothing more.
    graphs.update_ms_raw->setAntialiased(false);
    graphs.samples_per_second->setAntialiased(false);
    return graphs_.emplace(run.id, std::move(graphs)).first->second;
}

void SpeedPlot::appendRun(const RunRecord& run, qsizetype firstStep, qsizetype) {
    Graphs& graphs = graphsFor(run);
    RunBounds& bounds = boundsFor(run.id);
    const auto count = static_cast<qsizetype>(run.steps.size()) - firstStep;
    if (count <= 0) return;
    QVector<double> xs(count), raw(count), ms(count), throughput(count);
    for (qsizetype i = 0; i < count; ++i) {
        const auto& step = run.steps[static_cast<std::size_t>(firstStep + i)];
        xs[i] = stepX(step);
        raw[i] = step.update_ms;
        ms[i] = graphs.ms_ema.push(step.update_ms);
        throughput[i] = graphs.throughput_ema.push(step.samples_per_second);
        bounds.x.add(xs[i]);
        // Autoscale to the smoothed lines: one slow first update (page faults, thread start-up)
        // would otherwise squash every later point against the axis.
        bounds.y.add(ms[i]);
        bounds.y2.add(throughput[i]);
    }
    bounds.y.add(0.0);
    graphs.update_ms_raw->addData(xs, raw, true);
    graphs.update_ms->addData(xs, ms, true);
    graphs.samples_per_second->addData(xs, throughput, true);
}

void SpeedPlot::removeRun(int id) {
    auto it = graphs_.find(id);
    if (it == graphs_.end()) return;
    for (auto* graph : {it->second.update_ms_raw, it->second.update_ms, it->second.samples_per_second})
        removeGraph(graph);
    graphs_.erase(it);
    forgetBounds(id);
}

void SpeedPlot::setRunVisible(int id, bool visible) {
    auto it = graphs_.find(id);
    if (it == graphs_.end()) return;
    for (auto* graph : {it->second.update_ms_raw, it->second.update_ms, it->second.samples_per_second})
        graph->setVisible(visible);
}

void SpeedPlot::clearRuns() {
    for (auto& [id, graphs] : graphs_)
        for (auto* graph : {graphs.update_ms_raw, graphs.update_ms, graphs.samples_per_second}) removeGraph(graph);
    graphs_.clear();
}

void SpeedPlot::setSmoothing(double weight) {
    // Update times jitter far more than losses (scheduler, page faults, other processes), so
    // the drawn lines always get at least this much smoothing; the hover shows raw values.
    smoothing_ = std::clamp(std::max(weight, kMinimumSmoothing), 0.0, 0.999);
    rebuild();
}

QString SpeedPlot::describeStep(const RunRecord& run, std::size_t index) const {
    const auto& step = run.steps[index];
    return tr("%1 ms/update · %2 samples/s · %3 samples")
        .arg(step.update_ms, 0, 'f', 2)
        .arg(QLocale().toString(step.samples_per_second, 'f', 0))
        .arg(step.batch_samples);
}

}  // namespace trainbench::ui
