#include "loss_plot.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>

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
    for (const auto& [id, curves] : allCurves()) {
        QCPGraph* validation = static_cast<const Curves&>(*curves).validation;
        const auto data = validation->data();
        const auto shown = std::distance(data->findBegin(range.lower), data->findEnd(range.upper));
        const double per_marker_px = width_px / std::max<double>(1.0, static_cast<double>(shown));
        validation->setScatterSkip(
            per_marker_px >= kMarkerSpacingPx ? 0 : static_cast<int>(std::ceil(kMarkerSpacingPx / per_marker_px)) - 1);
    }
}

std::unique_ptr<RunPlot::RunCurves> LossPlot::makeCurves(const RunRecord& run) {
    auto curves = std::make_unique<Curves>();
    curves->ema = DebiasedEma(smoothing_);
    QColor faded = run.color;
    faded.setAlpha(70);
    curves->raw = addRunGraph(*curves);
    curves->raw->setPen(run_pen(faded, 1));
    // Noisy raw data draws as a dense band; antialiasing it costs much and shows nothing more.
    curves->raw->setAntialiased(false);
    curves->smoothed = addRunGraph(*curves);
    curves->smoothed->setPen(run_pen(run.color, 2));
    curves->smoothed->setName(run.name);
    curves->legend_entry = curves->smoothed;
    curves->validation = addRunGraph(*curves);
    curves->validation->setLineStyle(QCPGraph::lsNone);
    curves->validation->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, Qt::white, run.color, 8));
    curves->validation->setPen(run_pen(run.color, 2));
    for (auto* graph : curves->graphs) graph->setAdaptiveSampling(true);
    return curves;
}

// An evaluation sits at the x of the update it followed (EpochMetrics::update): the engine
// reports update N's metrics before validating after it, at epoch ends and every eval_every
// updates alike.
double LossPlot::evaluationX(const RunRecord& run, const EpochMetrics& epoch) const {
    if (xAxisKind() == XAxisKind::update) return static_cast<double>(epoch.update);
    // The last update at or before the evaluation: normally the very update it followed.
    auto it = std::upper_bound(run.steps.begin(), run.steps.end(), epoch.update,
                               [](int64_t update, const StepMetrics& step) { return update < step.update; });
    const StepMetrics* step = it == run.steps.begin() ? nullptr : &*std::prev(it);
    if (xAxisKind() == XAxisKind::wall_time)
        return step && step->update == epoch.update ? step->wall_seconds : epoch.wall_seconds;
    return step ? runX(run)(*step) : 0.0;
}

void LossPlot::addPoints(const RunRecord& run, RunCurves& base, qsizetype firstStep, qsizetype firstEpoch) {
    auto& curves = static_cast<Curves&>(base);
    const RunX step_x = runX(run);
    const auto count = static_cast<qsizetype>(run.steps.size()) - firstStep;
    if (count > 0) {
        QVector<double> xs(count), raw(count), smoothed(count);
        for (qsizetype i = 0; i < count; ++i) {
            const auto& step = run.steps[static_cast<std::size_t>(firstStep + i)];
            xs[i] = step_x(step);
            raw[i] = step.loss;
            smoothed[i] = curves.ema.push(step.loss);
            curves.bounds.x.add(xs[i]);
            curves.bounds.y.add(raw[i]);
        }
        curves.raw->addData(xs, raw, true);
        curves.smoothed->addData(xs, smoothed, true);
    }
    for (auto i = static_cast<std::size_t>(firstEpoch); i < run.epochs.size(); ++i) {
        const auto& epoch = run.epochs[i];
        if (!std::isfinite(epoch.val_loss)) continue;
        const double x = evaluationX(run, epoch);
        curves.validation->addData(x, epoch.val_loss);
        curves.bounds.x.add(x);
        curves.bounds.y.add(epoch.val_loss);
    }
}

std::vector<std::pair<double, double>> LossPlot::validationPoints(int id) const {
    std::vector<std::pair<double, double>> points;
    if (const auto* curves = static_cast<const Curves*>(curvesOf(id)))
        for (const auto& point : *curves->validation->data()) points.emplace_back(point.key, point.value);
    return points;
}

void LossPlot::setSmoothing(double weight) {
    smoothing_ = std::clamp(weight, 0.0, 0.999);
    rebuild();
}

QString LossPlot::describeStep(const RunRecord& run, std::size_t index) const {
    const auto* curves = static_cast<const Curves*>(curvesOf(run.id));
    QString text = tr("loss %1").arg(valueText(run.steps[index].loss));
    if (curves && static_cast<int>(index) < curves->smoothed->dataCount())
        text += tr(" · smoothed %1").arg(valueText(curves->smoothed->data()->at(static_cast<int>(index))->value));
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
