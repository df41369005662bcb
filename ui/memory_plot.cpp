#include "memory_plot.hpp"

#include <algorithm>

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

QString category_label(MemoryCategory category) {
    QString name = QString::fromUtf8(to_string(category).data(), static_cast<int>(to_string(category).size()));
    return name.replace('_', ' ');
}

QString mib_text(double bytes) { return QString::number(bytes / kMiB, 'f', bytes < 10 * kMiB ? 2 : 1) + " MiB"; }

}  // namespace

MemoryPlot::MemoryPlot(const RunStore& store, QWidget* parent) : RunPlot(store, parent) {
    setObjectName(QStringLiteral("memoryPlot"));
    yAxis->setLabel(tr("MiB"));
    // The stack fills the plot up to its top, so the legend sits in its own column on the right.
    legend->setVisible(true);
    axisRect()->insetLayout()->take(legend);
    auto* side = new QCPLayoutGrid;
    plotLayout()->addElement(0, 1, side);
    plotLayout()->setColumnStretchFactor(1, 0.001);
    side->setMargins(QMargins(0, 10, 6, 0));
    side->addElement(0, 0, legend);
    side->addElement(1, 0, new QCPLayoutElement(this));  // takes the height the legend does not need
    side->setRowStretchFactor(0, 0.001);
    legend->setMargins(QMargins(6, 4, 6, 4));
    QCPGraph* below = nullptr;
    for (std::size_t i = 0; i < kStackOrder.size(); ++i) {
        auto* graph = addGraph();
        const QColor color = category_color(kStackOrder[i]);
        QColor fill = color;
        fill.setAlpha(150);
        graph->setPen(run_pen(color.darker(115), 1));
        graph->setBrush(fill);
        if (below) graph->setChannelFillGraph(below);
        graph->setName(category_label(kStackOrder[i]));
        graph->setAdaptiveSampling(true);
        stack_[i] = graph;
        below = graph;
    }
    live_peak_ = addGraph();
    live_peak_->setPen(run_pen(QColor(30, 30, 30), 1.4));
    live_peak_->setName(tr("held at once"));
    live_peak_->setAdaptiveSampling(true);
    peak_line_ = new QCPItemStraightLine(this);
    peak_line_->setPen(QPen(QColor(30, 30, 30), 1.0, Qt::DashLine));
    peak_line_->setVisible(false);
    peak_label_ = new QCPItemText(this);
    peak_label_->setPositionAlignment(Qt::AlignRight | Qt::AlignBottom);
    peak_label_->position->setTypeX(QCPItemPosition::ptAxisRectRatio);
    peak_label_->position->setTypeY(QCPItemPosition::ptPlotCoords);
    peak_label_->setColor(QColor(30, 30, 30));
    peak_label_->setPadding(QMargins(2, 0, 4, 2));
    peak_label_->setVisible(false);
}

QCPGraph* MemoryPlot::totalGraphFor(const RunRecord& run) {
    auto it = totals_.find(run.id);
    if (it != totals_.end()) return it->second;
    auto* graph = addGraph();
    graph->setPen(run_pen(run.color, 1.6));
    graph->removeFromLegend();
    graph->setAdaptiveSampling(true);
    totals_[run.id] = graph;
    return graph;
}

bool MemoryPlot::boundsVisible(int id) const {
    return RunPlot::boundsVisible(id) || id == focus_id_;
}

void MemoryPlot::appendStack(const RunRecord& run, std::size_t firstStep) {
    const auto count = static_cast<qsizetype>(run.steps.size() - firstStep);
    if (count <= 0) return;
    QVector<double> xs(count);
    std::array<QVector<double>, kMemoryCategoryCount> levels;
    for (auto& level : levels) level.resize(count);
    for (qsizetype i = 0; i < count; ++i) {
        const auto& step = run.steps[firstStep + static_cast<std::size_t>(i)];
        xs[i] = stepX(step);
        double level = 0.0;
        for (std::size_t c = 0; c < kStackOrder.size(); ++c) {
            level += static_cast<double>(step.memory.update_peak_bytes(kStackOrder[c])) / kMiB;
            levels[c][i] = level;
        }
    }
    QVector<double> held(count);
    for (qsizetype i = 0; i < count; ++i)
        held[i] = static_cast<double>(run.steps[firstStep + static_cast<std::size_t>(i)].memory.update_live_peak) / kMiB;
    for (std::size_t c = 0; c < kStackOrder.size(); ++c) stack_[c]->addData(xs, levels[c], true);
    live_peak_->addData(xs, held, true);
}

void MemoryPlot::appendRun(const RunRecord& run, qsizetype firstStep, qsizetype) {
    if (focus_id_ == 0) focus_id_ = run.id;
    QCPGraph* total = totalGraphFor(run);
    RunBounds& bounds = boundsFor(run.id);
    const auto count = static_cast<qsizetype>(run.steps.size()) - firstStep;
    if (count <= 0) return;
    QVector<double> xs(count), totals(count);
    for (qsizetype i = 0; i < count; ++i) {
        const auto& step = run.steps[static_cast<std::size_t>(firstStep + i)];
        xs[i] = stepX(step);
        totals[i] = static_cast<double>(sum_bytes(step.memory.update_peak)) / kMiB;
        bounds.x.add(xs[i]);
        bounds.y.add(totals[i]);
    }
    bounds.y.add(0.0);
    total->addData(xs, totals, true);
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
    peak_mib_ = static_cast<double>(peak) / kMiB;
    peak_line_->point1->setCoords(0, peak_mib_);
    peak_line_->point2->setCoords(1, peak_mib_);
    peak_line_->setVisible(true);
    peak_label_->setText(tr("%1 peak: %2 held at once (live + cache)").arg(run.name, mib_text(static_cast<double>(peak))));
    peak_label_->position->setCoords(0.995, peak_mib_);
    peak_label_->setVisible(true);
    boundsFor(run.id).y.add(peak_mib_ * 1.15);  // room above the line for its label
}

void MemoryPlot::updateTotalVisibility(int id) {
    auto it = totals_.find(id);
    if (it == totals_.end()) return;
    const auto* run = store_.find(id);
    // The focused run's total is the top of its stack; a separate line would hide the fill edge.
    it->second->setVisible(run && run->visible && id != focus_id_);
}

void MemoryPlot::setFocusRun(int id) {
    if (id == focus_id_ || !store_.find(id)) return;
    const int previous = focus_id_;
    focus_id_ = id;
    for (auto* graph : stack_) graph->data()->clear();
    live_peak_->data()->clear();
    peak_line_->setVisible(false);
    peak_label_->setVisible(false);
    const RunRecord& run = *store_.find(id);
    appendStack(run, 0);
    updatePeakMarker(run);
    updateTotalVisibility(previous);
    updateTotalVisibility(id);
    refresh();
}

void MemoryPlot::removeRun(int id) {
    if (auto it = totals_.find(id); it != totals_.end()) {
        removeGraph(it->second);
        totals_.erase(it);
    }
    forgetBounds(id);
    if (id == focus_id_) {
        focus_id_ = 0;
        for (auto* graph : stack_) graph->data()->clear();
        live_peak_->data()->clear();
        peak_line_->setVisible(false);
        peak_label_->setVisible(false);
        if (store_.latestRunId() != 0 && store_.latestRunId() != id) setFocusRun(store_.latestRunId());
    }
}

void MemoryPlot::setRunVisible(int id, bool) { updateTotalVisibility(id); }

void MemoryPlot::clearRuns() {
    for (auto& [id, graph] : totals_) removeGraph(graph);
    totals_.clear();
    for (auto* graph : stack_) graph->data()->clear();
    live_peak_->data()->clear();
    peak_line_->setVisible(false);
    peak_label_->setVisible(false);
}

QString MemoryPlot::describeStep(const RunRecord& run, std::size_t index) const {
    const auto& step = run.steps[index];
    QString text = tr("held at once %1 (most live in the update), reserved now %2")
                       .arg(mib_text(static_cast<double>(step.memory.update_live_peak)),
                            mib_text(static_cast<double>(step.memory.reserved)));
    if (run.id == focus_id_) {
        QStringList parts;
        for (auto category : kStackOrder) {
            const auto bytes = step.memory.update_peak_bytes(category);
            if (bytes > 0) parts << QStringLiteral("%1 %2").arg(category_label(category), mib_text(static_cast<double>(bytes)));
        }
        text += QStringLiteral(" (") + parts.join(QStringLiteral(", ")) + QStringLiteral(")");
    }
    if (step.rss_bytes > 0) text += tr(" · process RSS %1").arg(mib_text(static_cast<double>(step.rss_bytes)));
    if (step.device_total_bytes > 0)
        text += tr(" · device %1 of %2").arg(mib_text(static_cast<double>(step.device_used_bytes)),
                                             mib_text(static_cast<double>(step.device_total_bytes)));
    return text;
}

}  // namespace trainbench::ui
