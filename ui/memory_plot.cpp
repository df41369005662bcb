#include "memory_plot.hpp"

#include <algorithm>
#include <vector>

namespace trainbench::ui {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

QColor category_color(MemoryCategory category) {
    switch (category) {
        case MemoryCategory::parameters: return QColor(0x4e79a7);
        case MemoryCategory::master_weights: return QColor(0xa0cbe8);
        case MemoryCategory::gradients: return QColor(0xf28e2b);
        case MemoryCategory::optimizer_state: return QColor(0x59a14f);
        case MemoryCategory::activations: return QColor(0xe15759);
        case MemoryCategory::workspace: return QColor(0xb07aa1);
        case MemoryCategory::cache: return QColor(0xbab0ac);
        case MemoryCategory::count: break;
    }
    return Qt::gray;
}

QString category_name(MemoryCategory category) { return QString::fromStdString(category_label(category)); }

QString mib_text(double bytes) { return QString::number(bytes / kMiB, 'f', bytes < 10 * kMiB ? 2 : 1) + " MiB"; }

// What the stack shows for an update: the bytes held at the moment of its live peak, by
// category, so that the stack adds up to what was held then (its live part is the "held at
// once" line) and never passes the run's peak. Sessions saved before that composition was
// recorded have only each category's own peak within the update; they are stacked as they were.
const BytesByCategory& stacked_bytes(const MemoryReport& memory) {
    return sum_bytes(memory.update_peak_held) > 0 ? memory.update_peak_held : memory.update_peak;
}

}  // namespace

MemoryPlot::MemoryPlot(const RunStore& store, QWidget* parent) : RunPlot(store, parent) {
    setObjectName(QStringLiteral("memoryPlot"));
    yAxis->setLabel(tr("MiB"));
    // The stack fills the plot up to its top, so the legend gets its own row above the plot
    // (beside it, it would make this plot's x-axis shorter than the others').
    legend->setVisible(true);
    axisRect()->insetLayout()->take(legend);
    plotLayout()->insertRow(0);
    auto* header = new QCPLayoutGrid;
    plotLayout()->addElement(0, 0, header);
    plotLayout()->setRowStretchFactor(0, 0.001);
    plotLayout()->setRowSpacing(0);
    // Centred: the spacers either side take the width the legend does not need.
    header->addElement(0, 0, new QCPLayoutElement(this));
    header->addElement(0, 1, legend);
    header->addElement(0, 2, new QCPLayoutElement(this));
    header->setColumnStretchFactor(1, 0.001);
    header->setMargins(QMargins(0, 4, 0, 0));
    header->setAutoMargins(QCP::msNone);
    legend->setFillOrder(QCPLegend::foRowsFirst);
    legend->setBorderPen(Qt::NoPen);
    legend->setBrush(Qt::NoBrush);
    legend->setMargins(QMargins(0, 0, 0, 0));
    legend->setColumnSpacing(14);
    legend->setRowSpacing(0);
    QCPGraph* below = nullptr;
    for (std::size_t i = 0; i < kStackOrder.size(); ++i) {
        auto* graph = addGraph();
        const QColor color = category_color(kStackOrder[i]);
        QColor fill = color;
        fill.setAlpha(150);
        graph->setPen(run_pen(color.darker(115), 1));
        graph->setBrush(fill);
        if (below) graph->setChannelFillGraph(below);
        graph->setName(category_name(kStackOrder[i]));
        graph->setAdaptiveSampling(true);
        stack_[i] = graph;
        below = graph;
    }
    live_peak_ = addGraph();
    live_peak_->setPen(run_pen(QColor(30, 30, 30), 1.4));
    live_peak_->setName(tr("held at once"));
    live_peak_->setAdaptiveSampling(true);
    peak_ = addGraph();
    peak_->setPen(run_pen(QColor(30, 30, 30), 1.2, Qt::DashLine));
    updateLegendEntries();
    connect(this, &QCustomPlot::beforeReplot, this, &MemoryPlot::fitLegendToWidth);
}

std::unique_ptr<RunPlot::RunCurves> MemoryPlot::makeCurves(const RunRecord& run) {
    auto curves = std::make_unique<RunCurves>();
    auto* total = addRunGraph(*curves);
    total->setPen(run_pen(run.color, 1.6));
    total->setAdaptiveSampling(true);
    return curves;
}

bool MemoryPlot::boundsVisible(int id) const {
    return RunPlot::boundsVisible(id) || id == focus_id_;
}

void MemoryPlot::appendStack(const RunRecord& run, std::size_t firstStep) {
    const auto count = static_cast<qsizetype>(run.steps.size() - firstStep);
    if (count <= 0) return;
    const RunX step_x = runX(run);
    QVector<double> xs(count);
    std::array<QVector<double>, kMemoryCategoryCount> levels;
    for (auto& level : levels) level.resize(count);
    for (qsizetype i = 0; i < count; ++i) {
        const auto& step = run.steps[firstStep + static_cast<std::size_t>(i)];
        xs[i] = step_x(step);
        double level = 0.0;
        for (std::size_t c = 0; c < kStackOrder.size(); ++c) {
            level += static_cast<double>(stacked_bytes(step.memory)[static_cast<std::size_t>(kStackOrder[c])]) / kMiB;
            levels[c][i] = level;
        }
    }
    QVector<double> held(count);
    for (qsizetype i = 0; i < count; ++i)
        held[i] = static_cast<double>(run.steps[firstStep + static_cast<std::size_t>(i)].memory.update_live_peak) / kMiB;
    for (std::size_t c = 0; c < kStackOrder.size(); ++c) stack_[c]->addData(xs, levels[c], true);
    live_peak_->addData(xs, held, true);
    bool newly_used = false;
    for (std::size_t c = 0; c < kStackOrder.size(); ++c) {
        if (category_used_[c]) continue;
        for (qsizetype i = 0; i < count && !category_used_[c]; ++i)
            category_used_[c] =
                stacked_bytes(run.steps[firstStep + static_cast<std::size_t>(i)].memory)[static_cast<std::size_t>(kStackOrder[c])] > 0;
        newly_used = newly_used || category_used_[c];
    }
    if (newly_used) updateLegendEntries();
}

void MemoryPlot::clearStack() {
    for (auto* graph : stack_) graph->data()->clear();
    live_peak_->data()->clear();
    peak_->data()->clear();
    category_used_.fill(false);
    updateLegendEntries();
}

// The two black lines first (they share the widest column), then the categories the focused
// run uses (an fp32 run has no master weights), bottom of the stack first; rebuilt rather than
// toggled so the order never changes.
void MemoryPlot::updateLegendEntries() {
    legend->clearItems();
    if (!peak_->data()->isEmpty()) peak_->addToLegend();
    if (!live_peak_->data()->isEmpty()) live_peak_->addToLegend();
    for (std::size_t c = 0; c < kStackOrder.size(); ++c)
        if (category_used_[c]) stack_[c]->addToLegend();
    legend->setVisible(legend->itemCount() > 0);
}

// The legend fills column by column; use as few rows as the plot's width allows.
void MemoryPlot::fitLegendToWidth() {
    // A wrapped grid has empty cells, so collect the items' widths in their fill order first.
    std::vector<int> widths;
    for (int cell = 0; cell < legend->elementCount(); ++cell)
        if (auto* item = legend->item(cell)) widths.push_back(item->minimumOuterSizeHint().width());
    const int count = static_cast<int>(widths.size());
    if (count == 0) return;
    const int available = axisRect()->width() > 0 ? axisRect()->width() : width() - 120;
    for (int rows = 1; rows <= count; ++rows) {
        int needed = 0;
        for (int first = 0; first < count; first += rows) {
            const auto begin = widths.begin() + first;
            const int widest = *std::max_element(begin, begin + std::min(rows, count - first));
            needed += widest + (first > 0 ? legend->columnSpacing() : 0);
        }
        if (needed <= available || rows == count) {
            if (legend->wrap() != rows) {
                legend->setWrap(rows);
                legend->setFillOrder(legend->fillOrder(), true);  // re-flow the existing items
            }
            return;
        }
    }
}

void MemoryPlot::addPoints(const RunRecord& run, RunCurves& curves, qsizetype firstStep, qsizetype) {
    if (focus_id_ == 0) focus_id_ = run.id;
    const auto count = static_cast<qsizetype>(run.steps.size()) - firstStep;
    if (count <= 0) return;
    const RunX step_x = runX(run);
    QVector<double> xs(count), totals(count);
    for (qsizetype i = 0; i < count; ++i) {
        const auto& step = run.steps[static_cast<std::size_t>(firstStep + i)];
        xs[i] = step_x(step);
        totals[i] = static_cast<double>(sum_bytes(stacked_bytes(step.memory))) / kMiB;
        curves.bounds.x.add(xs[i]);
        curves.bounds.y.add(totals[i]);
    }
    curves.bounds.y.add(0.0);
    curves.graphs.front()->addData(xs, totals, true);
    if (run.id == focus_id_) {
        appendStack(run, static_cast<std::size_t>(firstStep));
        updatePeakMarker(run);
    }
    updateTotalVisibility(run.id);
}

void MemoryPlot::updatePeakMarker(const RunRecord& run) {
    if (run.steps.empty()) return;
    // The engine's own high-water mark: the most bytes it held at one moment (live + cache).
    const int64_t peak = run.steps.back().memory.reserved_peak;
    if (peak <= 0) return;
    const bool was_listed = !peak_->data()->isEmpty();
    const double peak_mib = static_cast<double>(peak) / kMiB;
    const RunX step_x = runX(run);
    peak_->data()->clear();
    peak_->addData(step_x(run.steps.front()), peak_mib);
    peak_->addData(step_x(run.steps.back()), peak_mib);
    peak_->setName(tr("%1 peak %2 (live + cache)").arg(run.name, mib_text(static_cast<double>(peak))));
    if (!was_listed) updateLegendEntries();
    if (auto* curves = curvesOf(run.id)) curves->bounds.y.add(peak_mib);
}

void MemoryPlot::updateTotalVisibility(int id) {
    const auto* run = store_.find(id);
    if (auto* curves = curvesOf(id)) showCurves(id, *curves, run && run->visible);
}

// The focused run's total is the top of its stack; a separate line would hide the fill edge.
void MemoryPlot::showCurves(int id, RunCurves& curves, bool visible) {
    RunPlot::showCurves(id, curves, visible && id != focus_id_);
}

void MemoryPlot::setFocusRun(int id) {
    if (id == focus_id_ || !store_.find(id)) return;
    const int previous = focus_id_;
    focus_id_ = id;
    clearStack();
    const RunRecord& run = *store_.find(id);
    appendStack(run, 0);
    updatePeakMarker(run);
    updateTotalVisibility(previous);
    updateTotalVisibility(id);
    refresh();
}

void MemoryPlot::curvesRemoved(int id) {
    if (id != focus_id_) return;
    focus_id_ = 0;
    clearStack();
    if (store_.latestRunId() != 0 && store_.latestRunId() != id) setFocusRun(store_.latestRunId());
}

void MemoryPlot::curvesCleared() { clearStack(); }

QString MemoryPlot::describeStep(const RunRecord& run, std::size_t index) const {
    const auto& step = run.steps[index];
    QString text = tr("held at once %1 (most live in the update), reserved now %2")
                       .arg(mib_text(static_cast<double>(step.memory.update_live_peak)),
                            mib_text(static_cast<double>(step.memory.reserved)));
    if (step.rss_bytes > 0) text += tr(" · process RSS %1").arg(mib_text(static_cast<double>(step.rss_bytes)));
    if (step.device_total_bytes > 0)
        text += tr(" · device %1 of %2").arg(mib_text(static_cast<double>(step.device_used_bytes)),
                                             mib_text(static_cast<double>(step.device_total_bytes)));
    if (run.id == focus_id_) {
        QStringList parts;
        for (auto category : kStackOrder) {
            const auto bytes = stacked_bytes(step.memory)[static_cast<std::size_t>(category)];
            if (bytes > 0) parts << QStringLiteral("%1 %2").arg(category_name(category), mib_text(static_cast<double>(bytes)));
        }
        // The breakdown on a line of its own keeps the hover box narrower than the plot.
        text += QStringLiteral("<br>&nbsp;&nbsp;&nbsp;") + tr("then: ") + parts.join(QStringLiteral(", "));
    }
    return text;
}

}  // namespace trainbench::ui
