#include "speed_plot.hpp"

#include <algorithm>
#include <cmath>

#include "run_throughput.hpp"

namespace trainbench::ui {

QString to_display_string(ThroughputUnit unit) {
    switch (unit) {
        case ThroughputUnit::automatic: return QStringLiteral("auto");
        case ThroughputUnit::samples: return QStringLiteral("samples/s");
        case ThroughputUnit::tokens: return QStringLiteral("tokens/s");
        case ThroughputUnit::mfu: return QStringLiteral("MFU %");
    }
    return {};
}

SpeedPlot::SpeedPlot(const RunStore& store, QWidget* parent) : RunPlot(store, parent) {
    setObjectName(QStringLiteral("speedPlot"));
    yAxis->setLabel(tr("ms per update"));
    yAxis2->setTicks(true);
    yAxis2->setTickLabels(true);
    chooseDrawing();
}

// Automatic: tokens/s once every shown run reads tokens; with no run shown, whatever is drawn.
ThroughputUnit SpeedPlot::resolvedUnit() const {
    if (unit_ != ThroughputUnit::automatic) return unit_;
    bool any = false, all_language_models = true;
    for (const auto& run : store_.runs()) {
        if (!run->visible) continue;
        any = true;
        all_language_models = all_language_models && is_language_model(*run);
    }
    if (!any) return drawn_unit_;
    return all_language_models ? ThroughputUnit::tokens : ThroughputUnit::samples;
}

void SpeedPlot::chooseDrawing() {
    drawn_unit_ = resolvedUnit();
    switch (drawn_unit_) {
        case ThroughputUnit::tokens: yAxis2->setLabel(tr("tokens/s (thin)")); break;
        // The peak and its source are in the hover read-out: the plot is too short for them.
        case ThroughputUnit::mfu: yAxis2->setLabel(tr("MFU % (thin)")); break;
        default: yAxis2->setLabel(tr("samples/s (thin)")); break;
    }
}

void SpeedPlot::setThroughputUnit(ThroughputUnit unit) {
    if (unit == unit_) return;
    const ThroughputUnit drawn = drawn_unit_;
    unit_ = unit;
    if (resolvedUnit() != drawn) rebuild();
}

std::unique_ptr<RunPlot::RunCurves> SpeedPlot::makeCurves(const RunRecord& run) {
    auto curves = std::make_unique<Curves>();
    curves->ms_ema = DebiasedEma(smoothing_);
    curves->throughput_ema = DebiasedEma(smoothing_);
    QColor faded = run.color;
    faded.setAlpha(35);
    curves->update_ms_raw = addRunGraph(*curves);
    curves->update_ms_raw->setPen(run_pen(faded, 1));
    curves->update_ms = addRunGraph(*curves);
    curves->update_ms->setPen(run_pen(run.color, 2));
    curves->throughput = addRunGraph(*curves, yAxis2);
    // A dashed pen over thousands of segments costs Qt's raster engine hundreds of ms per
    // replot, so throughput is told apart by a thinner, lighter solid line instead.
    curves->throughput->setPen(run_pen(run.color.lighter(135), 1));
    for (auto* graph : curves->graphs) graph->setAdaptiveSampling(true);
    // Noisy raw data draws as a dense band; antialiasing it costs much and shows nothing more.
    curves->update_ms_raw->setAntialiased(false);
    curves->throughput->setAntialiased(false);
    return curves;
}

void SpeedPlot::addPoints(const RunRecord& run, RunCurves& base, qsizetype firstStep, qsizetype) {
    auto& curves = static_cast<Curves&>(base);
    const auto count = static_cast<qsizetype>(run.steps.size()) - firstStep;
    if (count <= 0) return;
    const RunX step_x = runX(run);
    const int64_t tokens_per_sample = run_tokens_per_sample(run);
    // A run without this unit (tokens/s of an MLP, MFU with no known peak) has no thin line.
    const bool has_throughput = drawn_unit_ == ThroughputUnit::samples ||
                                (drawn_unit_ == ThroughputUnit::tokens && tokens_per_sample > 0) ||
                                (drawn_unit_ == ThroughputUnit::mfu && std::isfinite(run.steps.back().mfu));
    auto throughput_of = [&](const StepMetrics& step) {
        switch (drawn_unit_) {
            case ThroughputUnit::tokens: return step_tokens_per_second(step, tokens_per_sample);
            case ThroughputUnit::mfu: return step.mfu * 100.0;
            default: return step.samples_per_second;
        }
    };
    QVector<double> xs(count), raw(count), ms(count), throughput(has_throughput ? count : 0);
    for (qsizetype i = 0; i < count; ++i) {
        const auto& step = run.steps[static_cast<std::size_t>(firstStep + i)];
        xs[i] = step_x(step);
        raw[i] = step.update_ms;
        ms[i] = curves.ms_ema.push(step.update_ms);
        curves.bounds.x.add(xs[i]);
        // Autoscale to the smoothed lines: one slow first update (page faults, thread start-up)
        // would otherwise squash every later point against the axis.
        curves.bounds.y.add(ms[i]);
        if (has_throughput) {
            throughput[i] = curves.throughput_ema.push(throughput_of(step));
            curves.bounds.y2.add(throughput[i]);
        }
    }
    curves.bounds.y.add(0.0);
    curves.update_ms_raw->addData(xs, raw, true);
    curves.update_ms->addData(xs, ms, true);
    if (has_throughput) curves.throughput->addData(xs, throughput, true);
}

std::vector<std::pair<double, double>> SpeedPlot::throughputPoints(int id) const {
    std::vector<std::pair<double, double>> points;
    if (const auto* curves = static_cast<const Curves*>(curvesOf(id)))
        for (const auto& point : *curves->throughput->data()) points.emplace_back(point.key, point.value);
    return points;
}

void SpeedPlot::setSmoothing(double weight) {
    // Update times jitter far more than losses (scheduler, page faults, other processes), so
    // the drawn lines always get at least this much smoothing; the hover shows raw values.
    smoothing_ = std::clamp(std::max(weight, kMinimumSmoothing), 0.0, 0.999);
    rebuild();
}

QString SpeedPlot::describeStep(const RunRecord& run, std::size_t index) const {
    const auto& step = run.steps[index];
    const QLocale locale;
    QString text = tr("%1 ms/update").arg(step.update_ms, 0, 'f', 2);
    const int64_t tokens_per_sample = run_tokens_per_sample(run);
    if (tokens_per_sample > 0)
        text += tr(" · %1 tokens/s").arg(locale.toString(step_tokens_per_second(step, tokens_per_sample), 'f', 0));
    text += tr(" · %1 samples/s").arg(
        locale.toString(step.samples_per_second, 'f', step.samples_per_second < 100 ? 1 : 0));
    if (std::isfinite(step.mfu)) text += tr(" · MFU %1").arg(mfu_text(step.mfu));
    text += tokens_per_sample > 0 ? tr(" · %1 samples of %2 tokens").arg(step.batch_samples).arg(tokens_per_sample)
                                  : tr(" · %1 samples").arg(step.batch_samples);
    return text;
}

// What MFU is a percentage of: the measured peak of each run's device, with its source. Runs
// with the same peak share a line (their sources differ only in how the figure was looked up:
// "measured now", "measured earlier").
QString SpeedPlot::readoutNote(const std::vector<const RunRecord*>& described) const {
    std::vector<double> peaks;
    QStringList sources, names;
    for (const auto* run : described) {
        if (!run->plan || run->plan->peak_flops <= 0.0 || run->steps.empty() || !std::isfinite(run->steps.back().mfu))
            continue;
        const auto at = std::find(peaks.begin(), peaks.end(), run->plan->peak_flops);
        if (at != peaks.end()) {
            names[at - peaks.begin()] += QStringLiteral(", ") + run->name.toHtmlEscaped();
            continue;
        }
        peaks.push_back(run->plan->peak_flops);
        sources << peak_source_text(*run).toHtmlEscaped();
        names << run->name.toHtmlEscaped();
    }
    if (peaks.size() == 1) return tr("MFU against the peak of %1").arg(sources.front());
    QStringList lines;
    for (qsizetype i = 0; i < sources.size(); ++i)
        lines << tr("MFU of %1 against the peak of %2").arg(names[i], sources[i]);
    return lines.join(QStringLiteral("<br>"));
}

}  // namespace trainbench::ui
