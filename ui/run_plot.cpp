#include "run_plot.hpp"

#include <QToolTip>
#include <algorithm>
#include <cmath>
#include <utility>

#include "run_throughput.hpp"

namespace trainbench::ui {

void AxisBounds::add(double value) {
    if (!std::isfinite(value)) return;
    low = std::min(low, value);
    high = std::max(high, value);
    if (value > 0) lowest_positive = std::min(lowest_positive, value);
}

void AxisBounds::merge(const AxisBounds& other) {
    low = std::min(low, other.low);
    high = std::max(high, other.high);
    lowest_positive = std::min(lowest_positive, other.lowest_positive);
}

namespace {

// x tick labels of 10,000 and more with a suffix: "250k", "1.5M" (a language model's tokens
// reach millions, whose digits would run into each other).
class CompactTicker : public QCPAxisTicker {
protected:
    QString getTickLabel(double tick, const QLocale& locale, QChar formatChar, int precision) override {
        const double size = std::abs(tick);
        if (size < 1e4) return QCPAxisTicker::getTickLabel(tick, locale, formatChar, precision);
        if (size < 1e6) return QString::number(tick / 1e3, 'g', 4) + QLatin1Char('k');
        if (size < 1e9) return QString::number(tick / 1e6, 'g', 4) + QLatin1Char('M');
        return QString::number(tick / 1e9, 'g', 4) + QLatin1Char('G');
    }
};

}  // namespace

QPen run_pen(const QColor& color, double width, Qt::PenStyle style) {
    QPen pen(color, width, style);
    pen.setCosmetic(true);
    return pen;
}

RunPlot::RunPlot(const RunStore& store, QWidget* parent) : QCustomPlot(parent), store_(store) {
    setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
    setMouseTracking(true);
    setNoAntialiasingOnDrag(true);
    setPlottingHint(QCP::phFastPolylines, true);
    replot_timer_.setSingleShot(true);
    connect(&replot_timer_, &QTimer::timeout, this, &RunPlot::replotNow);
    setMinimumHeight(150);
    QFont tick_font = font();
    tick_font.setPointSizeF(std::max(8.0, tick_font.pointSizeF() - 1));
    for (auto* axis : {xAxis, yAxis, yAxis2}) {
        axis->setTickLabelFont(tick_font);
        axis->setLabelFont(font());
        axis->grid()->setPen(QPen(QColor(0, 0, 0, 28), 1, Qt::SolidLine));
        axis->grid()->setSubGridVisible(false);
        axis->setBasePen(QPen(QColor(90, 90, 90)));
        axis->setTickPen(QPen(QColor(90, 90, 90)));
        axis->setSubTickPen(QPen(QColor(150, 150, 150)));
    }
    xAxis->setTicker(QSharedPointer<CompactTicker>::create());
    updateXAxisLabel();
    axisRect()->setupFullAxesBox(false);
    xAxis2->setVisible(true);
    xAxis2->setTicks(false);
    xAxis2->setTickLabels(false);
    yAxis2->setVisible(true);
    yAxis2->setTicks(false);
    yAxis2->setTickLabels(false);
    legend->setFont(tick_font);
    legend->setBrush(QColor(255, 255, 255, 215));
    legend->setBorderPen(QPen(QColor(0, 0, 0, 40)));
    legend->setIconSize(16, 8);

    cursor_ = new QCPItemStraightLine(this);
    cursor_->setPen(QPen(QColor(0, 0, 0, 90), 1, Qt::DashLine));
    cursor_->setVisible(false);
    cursor_->setSelectable(false);
    cursor_->setLayer(QStringLiteral("overlay"));

    connect(this, &QCustomPlot::mouseMove, this, &RunPlot::onMouseMove);
    connect(this, &QCustomPlot::mouseWheel, this, [this] { following_ = false; });
    connect(this, &QCustomPlot::mouseDoubleClick, this, [this] { resetView(); });
}

RunPlot::~RunPlot() = default;

void RunPlot::setXAxisKind(XAxisKind kind) {
    if (kind == x_kind_) return;
    x_kind_ = kind;
    rebuild();
}

QCPGraph* RunPlot::addRunGraph(RunCurves& curves, QCPAxis* valueAxis) {
    auto* graph = addGraph(xAxis, valueAxis ? valueAxis : yAxis);
    graph->removeFromLegend();
    curves.graphs.push_back(graph);
    return graph;
}

RunPlot::RunCurves* RunPlot::curvesOf(int id) {
    const auto it = runs_.find(id);
    return it == runs_.end() ? nullptr : it->second.get();
}

const RunPlot::RunCurves* RunPlot::curvesOf(int id) const {
    const auto it = runs_.find(id);
    return it == runs_.end() ? nullptr : it->second.get();
}

std::vector<QCPGraph*> RunPlot::runGraphs(int id) const {
    const auto* curves = curvesOf(id);
    return curves ? curves->graphs : std::vector<QCPGraph*>{};
}

void RunPlot::appendRun(const RunRecord& run, qsizetype firstStep, qsizetype firstEpoch) {
    if (!redrawing_ && drawingStale()) {
        redraw(false);  // draws this run's new points too
        return;
    }
    if (auto it = runs_.find(run.id); it != runs_.end()) {
        addPoints(run, *it->second, firstStep, firstEpoch);
        return;
    }
    auto made = makeCurves(run);
    if (!made) return;
    RunCurves& curves = *runs_.emplace(run.id, std::move(made)).first->second;
    addPoints(run, curves, 0, 0);
    showCurves(run.id, curves, run.visible);
}

void RunPlot::removeRun(int id) {
    if (auto it = runs_.find(id); it != runs_.end()) {
        const bool listed = it->second->legend_entry != nullptr;
        for (auto* graph : it->second->graphs) removeGraph(graph);
        runs_.erase(it);
        if (listed) updateLegendVisibility();
    }
    curvesRemoved(id);
    if (!redrawing_ && drawingStale()) redraw(false);
}

void RunPlot::setRunVisible(int id, bool visible) {
    if (!redrawing_ && drawingStale()) {
        redraw(false);
        return;
    }
    if (auto* curves = curvesOf(id)) showCurves(id, *curves, visible);
}

void RunPlot::showCurves(int, RunCurves& curves, bool visible) {
    for (auto* graph : curves.graphs) graph->setVisible(visible);
    if (!curves.legend_entry) return;
    if (visible)
        curves.legend_entry->addToLegend();
    else
        curves.legend_entry->removeFromLegend();
    updateLegendVisibility();
}

void RunPlot::renameRun(const RunRecord& run) {
    if (auto* curves = curvesOf(run.id); curves && curves->legend_entry) curves->legend_entry->setName(run.name);
}

void RunPlot::updateLegendVisibility() { legend->setVisible(legend->itemCount() > 0); }

void RunPlot::clearRuns() {
    for (auto& [id, curves] : runs_)
        for (auto* graph : curves->graphs) removeGraph(graph);
    runs_.clear();
    curvesCleared();
}

void RunPlot::rebuild() { redraw(true); }

void RunPlot::redraw(bool resetView) {
    const bool was_redrawing = std::exchange(redrawing_, true);
    clearRuns();
    chooseDrawing();
    for (const auto& run : store_.runs()) appendRun(*run, 0, 0);
    redrawing_ = was_redrawing;
    if (resetView) following_ = true;
    refresh();
}

void RunPlot::resetView() {
    following_ = true;
    refresh();
}

bool RunPlot::boundsVisible(int id) const {
    const auto* run = store_.find(id);
    return run && run->visible;
}

void RunPlot::applyRange(QCPAxis* axis, const AxisBounds& bounds, bool log, bool fromZero) const {
    if (!bounds.valid()) return;
    if (log) {
        if (!std::isfinite(bounds.lowest_positive)) return;
        axis->setRange(bounds.lowest_positive / 1.25, std::max(bounds.high, bounds.lowest_positive) * 1.25);
        return;
    }
    double low = fromZero ? std::min(0.0, bounds.low) : bounds.low;
    double high = bounds.high;
    const double span = high - low;
    const double margin = span > 0 ? span * 0.06 : std::max(std::abs(high) * 0.1, 0.5);
    axis->setRange(fromZero && low >= 0 ? low : low - margin, high + margin);
}

void RunPlot::applyAutoscale() {
    if (!following_) return;
    RunBounds all;
    for (const auto& [id, curves] : runs_) {
        if (!boundsVisible(id)) continue;
        all.x.merge(curves->bounds.x);
        all.y.merge(curves->bounds.y);
        all.y2.merge(curves->bounds.y2);
    }
    if (all.x.valid()) {
        const double span = all.x.high - all.x.low;
        xAxis->setRange(all.x.low, span > 0 ? all.x.high : all.x.low + 1.0);
    }
    applyRange(yAxis, all.y, log_y_, false);
    if (yAxis2->tickLabels()) applyRange(yAxis2, all.y2, false, true);
}

qint64 RunPlot::next_replot_allowed_ns_ = 0;

qint64 RunPlot::nowNs() {
    static QElapsedTimer clock = [] {
        QElapsedTimer started;
        started.start();
        return started;
    }();
    return clock.nsecsElapsed();
}

void RunPlot::refresh() {
    updateXAxisLabel();
    if (!replot_timer_.isActive()) scheduleReplot();
}

void RunPlot::scheduleReplot() {
    const qint64 wait_ns = std::max<qint64>(0, next_replot_allowed_ns_ - nowNs());
    replot_timer_.start(static_cast<int>((wait_ns + 999'999) / 1'000'000));
}

void RunPlot::replotNow() {
    // Another plot may have drawn since this one was scheduled: wait for the shared turn.
    if (nowNs() < next_replot_allowed_ns_) {
        scheduleReplot();
        return;
    }
    applyAutoscale();
    const qint64 started = nowNs();
    replot();
    const qint64 finished = nowNs();
    const auto spacing = static_cast<qint64>(static_cast<double>(finished - started) * kReplotCostFactor);
    next_replot_allowed_ns_ = finished + std::max(kMinimumReplotGapNs, spacing);
}

// "tokens seen" only when every shown run is a language model, "samples seen" when none is.
void RunPlot::updateXAxisLabel() {
    bool language_models = false, other_models = false;
    for (const auto& run : store_.runs()) {
        if (!run->visible) continue;
        (is_language_model(*run) ? language_models : other_models) = true;
    }
    if (!language_models && !other_models) other_models = true;
    const QString label = x_axis_label(x_kind_, language_models, other_models);
    if (xAxis->label() != label) xAxis->setLabel(label);
}

// The hover cursor lives on QCustomPlot's buffered overlay layer, so moving it redraws only
// that layer instead of every graph (a full replot of a million points takes tens of ms).
void RunPlot::redrawCursor() { layer(QStringLiteral("overlay"))->replot(); }

void RunPlot::leaveEvent(QEvent* event) {
    cursor_->setVisible(false);
    redrawCursor();
    QCustomPlot::leaveEvent(event);
}

void RunPlot::setLogY(bool log) {
    log_y_ = log;
    if (log) {
        yAxis->setScaleType(QCPAxis::stLogarithmic);
        yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>::create());
    } else {
        yAxis->setScaleType(QCPAxis::stLinear);
        yAxis->setTicker(QSharedPointer<QCPAxisTicker>::create());
    }
    refresh();
}

int RunPlot::dataPointCount() const {
    int total = 0;
    for (int i = 0; i < graphCount(); ++i) total += graph(i)->dataCount();
    return total;
}

QString RunPlot::valueText(double value) const {
    if (!std::isfinite(value)) return QStringLiteral("–");
    return QString::number(value, 'g', 4);
}

QString RunPlot::readoutAt(double x) const {
    QStringList lines;
    std::vector<const RunRecord*> described;
    for (const auto& run : store_.runs()) {
        if (!run->visible || run->steps.empty()) continue;
        const auto& steps = run->steps;
        const RunX step_x = runX(*run);
        auto it = std::lower_bound(steps.begin(), steps.end(), x,
                                   [&step_x](const StepMetrics& step, double value) { return step_x(step) < value; });
        std::size_t index = static_cast<std::size_t>(std::distance(steps.begin(), it));
        if (index == steps.size()) {
            // Past a run's last point: only read it out when the cursor is still close to it.
            const double tolerance = xAxis->range().size() * 0.02;
            if (x - step_x(steps.back()) > tolerance) continue;
            index = steps.size() - 1;
        } else if (index > 0 && (x - step_x(steps[index - 1])) < (step_x(steps[index]) - x)) {
            --index;
        }
        const QString text = describeStep(*run, index);
        if (text.isEmpty()) continue;
        lines << QStringLiteral("<span style='color:%1'>&#9632;</span> <b>%2</b> · update %3 · %4")
                     .arg(run->color.name(), run->name.toHtmlEscaped())
                     .arg(steps[index].update)
                     .arg(text);
        described.push_back(run.get());
    }
    if (const QString note = readoutNote(described); !note.isEmpty())
        lines << QStringLiteral("<span style='color:#555'>%1</span>").arg(note);
    return lines.join(QStringLiteral("<br>"));
}

void RunPlot::onMouseMove(QMouseEvent* event) {
    if (event->buttons() != Qt::NoButton) {
        following_ = false;  // the user is panning; stop autoscaling under their hand
        QToolTip::hideText();
        return;
    }
    if (!axisRect()->rect().contains(event->pos())) {
        cursor_->setVisible(false);
        QToolTip::hideText();
        redrawCursor();
        return;
    }
    const double x = xAxis->pixelToCoord(event->pos().x());
    cursor_->point1->setCoords(x, 0);
    cursor_->point2->setCoords(x, 1);
    cursor_->setVisible(true);
    const QString text = readoutAt(x);
    if (text.isEmpty())
        QToolTip::hideText();
    else
        // One line per run: Qt would otherwise wrap rich-text tooltips into a narrow column.
        QToolTip::showText(event->globalPosition().toPoint() + QPoint(14, 10),
                           QStringLiteral("<p style='white-space:pre'>%1</p>").arg(text), this);
    redrawCursor();
}

}  // namespace trainbench::ui
