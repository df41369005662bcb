#include "plot_area.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSlider>
#include <QSplitter>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include "loss_plot.hpp"
#include "loss_scale_plot.hpp"
#include "pipeline_chart.hpp"
#include "memory_plot.hpp"
#include "run_store.hpp"
#include "speed_plot.hpp"

namespace trainbench::ui {

PlotArea::PlotArea(RunStore& store, QWidget* parent) : QWidget(parent), store_(store) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->setSpacing(4);

    auto* controls = new QHBoxLayout;
    controls->setContentsMargins(6, 2, 6, 0);
    auto* x_label = new QLabel(tr("x-axis"));
    x_axis_ = new QComboBox;
    x_axis_->setObjectName(QStringLiteral("xAxisCombo"));
    x_axis_->addItem(tr("update"), static_cast<int>(XAxisKind::update));
    x_axis_->addItem(tr("samples / tokens"), static_cast<int>(XAxisKind::samples_seen));
    x_axis_->addItem(tr("wall time"), static_cast<int>(XAxisKind::wall_time));
    x_axis_->setToolTip(tr("What every plot's horizontal axis measures. Samples seen (tokens seen for language "
                           "models: samples × context length) compares runs with different batch sizes fairly; "
                           "wall time shows which setting is really faster."));
    x_label->setToolTip(x_axis_->toolTip());
    auto* smoothing_label = new QLabel(tr("smoothing"));
    smoothing_ = new QSlider(Qt::Horizontal);
    smoothing_->setObjectName(QStringLiteral("smoothingSlider"));
    smoothing_->setRange(0, 99);
    smoothing_->setValue(60);
    smoothing_->setFixedWidth(160);
    smoothing_->setToolTip(tr("Weight of the exponential moving average drawn over the raw loss and update time "
                              "(debiased, as in TensorBoard). 0 shows the raw values."));
    smoothing_label->setToolTip(smoothing_->toolTip());
    smoothing_value_ = new QLabel(QStringLiteral("0.60"));
    smoothing_value_->setMinimumWidth(32);
    log_y_ = new QCheckBox(tr("log-scale loss"));
    log_y_->setObjectName(QStringLiteral("logYCheck"));
    log_y_->setToolTip(tr("Logarithmic y-axis for the loss plot, which shows late, small improvements."));
    auto* throughput_label = new QLabel(tr("throughput"));
    throughput_ = new QComboBox;
    throughput_->setObjectName(QStringLiteral("throughputCombo"));
    throughput_->addItem(tr("auto"), static_cast<int>(ThroughputUnit::automatic));
    throughput_->addItem(tr("samples/s"), static_cast<int>(ThroughputUnit::samples));
    throughput_->addItem(tr("tokens/s"), static_cast<int>(ThroughputUnit::tokens));
    throughput_->addItem(tr("MFU %"), static_cast<int>(ThroughputUnit::mfu));
    throughput_->setToolTip(
        tr("What the speed plot's thin lines and right axis show. auto: tokens/s when every shown run is a "
           "language model, samples/s otherwise. MFU (model FLOPs utilisation): the model's FLOPs per second "
           "as a % of the peak measured on the run's device (hover the plot for the peak and its source)."));
    throughput_label->setToolTip(throughput_->toolTip());
    hint_ = new QLabel(tr("drag to pan · wheel to zoom · double-click to reset"));
    hint_->setStyleSheet(QStringLiteral("color: palette(mid);"));
    // The hint never makes the plots wider than the controls need: it is left out when the row
    // has no room for it (resizeEvent) rather than drawn cut off.
    hint_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    controls->addWidget(x_label);
    controls->addWidget(x_axis_);
    controls->addSpacing(16);
    controls->addWidget(smoothing_label);
    controls->addWidget(smoothing_);
    controls->addWidget(smoothing_value_);
    controls->addSpacing(16);
    controls->addWidget(log_y_);
    controls->addSpacing(16);
    controls->addWidget(throughput_label);
    controls->addWidget(throughput_);
    controls->addStretch(1);
    controls->addWidget(hint_);
    controls_ = controls;
    layout->addLayout(controls);

    loss_ = new LossPlot(store_);
    memory_ = new MemoryPlot(store_);
    speed_ = new SpeedPlot(store_);
    loss_scale_ = new LossScalePlot(store_);
    loss_scale_->hide();
    pipeline_ = new PipelineChart(store_);
    pipeline_->hide();
    splitter_ = new QSplitter(Qt::Vertical);
    splitter_->setChildrenCollapsible(false);
    splitter_->addWidget(loss_);
    splitter_->addWidget(memory_);
    splitter_->addWidget(speed_);
    splitter_->addWidget(loss_scale_);
    splitter_->addWidget(pipeline_);
    splitter_->setStretchFactor(0, 5);
    splitter_->setStretchFactor(1, 3);
    splitter_->setStretchFactor(2, 3);
    splitter_->setStretchFactor(3, 2);
    splitter_->setStretchFactor(4, 2);
    // The memory plot's legend takes a row of its own above its axes, hence its larger share.
    splitter_->setSizes({420, 290, 210, 130, 170});
    layout->addWidget(splitter_, 1);
    alignAxes();

    connect(x_axis_, &QComboBox::currentIndexChanged, this,
            [this] { setXAxisKind(static_cast<XAxisKind>(x_axis_->currentData().toInt())); });
    connect(smoothing_, &QSlider::valueChanged, this, [this](int value) {
        smoothing_value_->setText(QString::number(value / 100.0, 'f', 2));
        setSmoothing(value / 100.0);
    });
    connect(log_y_, &QCheckBox::toggled, this, [this](bool log) { loss_->setLogScale(log); });
    connect(throughput_, &QComboBox::currentIndexChanged, this,
            [this] { setThroughputUnit(static_cast<ThroughputUnit>(throughput_->currentData().toInt())); });

    connect(&store_, &RunStore::metricsAppended, this, &PlotArea::onMetricsAppended);
    connect(&store_, &RunStore::runRemoved, this, &PlotArea::onRunRemoved);
    connect(&store_, &RunStore::visibilityChanged, this, [this](int id, bool visible) {
        for (auto* plot : plots()) plot->setRunVisible(id, visible);
        refreshAll();
    });
    connect(&store_, &RunStore::runChanged, this, [this](int id) {
        if (const auto* run = store_.find(id)) {
            for (auto* plot : plots()) plot->renameRun(*run);
            loss_->refresh();
        }
    });
    connect(&store_, &RunStore::runAdded, this, [this](int id) { setFocusRun(id); });
}

void PlotArea::resizeEvent(QResizeEvent* event) {
    QWidget::resizeEvent(event);
    const int needed = controls_->minimumSize().width() + controls_->spacing() + hint_->sizeHint().width();
    hint_->setVisible(width() >= needed);
}

std::vector<RunPlot*> PlotArea::plots() const { return {loss_, memory_, speed_, loss_scale_}; }

void PlotArea::onMetricsAppended(int id, qsizetype firstStep, qsizetype firstEpoch) {
    const auto* run = store_.find(id);
    if (!run) return;
    for (auto* plot : plots()) {
        plot->appendRun(*run, firstStep, firstEpoch);
        plot->setRunVisible(id, run->visible);
    }
    loss_scale_->setVisible(loss_scale_->hasFp16Runs());
    refreshAll();
}

void PlotArea::onRunRemoved(int id) {
    for (auto* plot : plots()) plot->removeRun(id);
    loss_scale_->setVisible(loss_scale_->hasFp16Runs());
    refreshAll();
}

// The plots are separate QCustomPlots stacked above each other; one margin group gives all of
// them the widest plot's left and right margins, so their x-axes start and end at the same
// pixel and one moment lines up across loss, memory and speed. A plot whose margin changed
// (longer tick labels) asks the others to redraw with it.
void PlotArea::alignAxes() {
    auto* group = new QCPMarginGroup(loss_);
    for (auto* plot : plots()) {
        plot->axisRect()->setMarginGroup(QCP::msLeft | QCP::msRight, group);
        connect(plot, &QCustomPlot::afterReplot, this, [this, plot, last = QMargins()]() mutable {
            const QMargins now = plot->axisRect()->margins();
            if (now.left() == last.left() && now.right() == last.right()) return;
            last = now;
            for (auto* other : plots())
                if (other != plot && other->isVisible()) other->refresh();
        });
    }
}

void PlotArea::refreshAll() {
    for (auto* plot : plots())
        if (plot->isVisible() || plot != loss_scale_) plot->refresh();
}

PlotView PlotArea::view() const {
    return {.x_axis = static_cast<XAxisKind>(x_axis_->currentData().toInt()),
            .smoothing = smoothing_->value() / 100.0,
            .log_scale_loss = log_y_->isChecked(),
            .throughput = static_cast<ThroughputUnit>(throughput_->currentData().toInt())};
}

void PlotArea::setView(const PlotView& view) {
    setXAxisKind(view.x_axis);
    setSmoothing(view.smoothing);
    log_y_->setChecked(view.log_scale_loss);
    setThroughputUnit(view.throughput);
}

void PlotArea::setXAxisKind(XAxisKind kind) {
    const int index = x_axis_->findData(static_cast<int>(kind));
    if (index != x_axis_->currentIndex()) {
        x_axis_->setCurrentIndex(index);  // re-enters through the combo's signal
        return;
    }
    for (auto* plot : plots()) plot->setXAxisKind(kind);
}

void PlotArea::setSmoothing(double weight) {
    const int position = static_cast<int>(std::lround(weight * 100));
    if (position != smoothing_->value()) {
        smoothing_->setValue(position);
        return;
    }
    loss_->setSmoothing(weight);
    speed_->setSmoothing(weight);
}

void PlotArea::setThroughputUnit(ThroughputUnit unit) {
    const int index = throughput_->findData(static_cast<int>(unit));
    if (index != throughput_->currentIndex()) {
        throughput_->setCurrentIndex(index);  // re-enters through the combo's signal
        return;
    }
    speed_->setThroughputUnit(unit);
}

void PlotArea::setFocusRun(int id) {
    memory_->setFocusRun(id);
    pipeline_->setFocusRun(id);
}

}  // namespace trainbench::ui
