#pragma once
#include <QWidget>

#include "plot_view.hpp"
#include "speed_plot.hpp"
#include "x_axis.hpp"

class QCheckBox;
class QComboBox;
class QHBoxLayout;
class QLabel;
class QSlider;
class QSplitter;

namespace trainbench::ui {

class LossPlot;
class LossScalePlot;
class MemoryPlot;
class PipelineChart;
class RunPlot;
class RunStore;

// The centre of the window: the view controls (x-axis, smoothing, log y, speed unit) above
// the stacked plots, kept in step with the RunStore.
class PlotArea : public QWidget {
    Q_OBJECT
public:
    explicit PlotArea(RunStore& store, QWidget* parent = nullptr);

    LossPlot* lossPlot() const { return loss_; }
    MemoryPlot* memoryPlot() const { return memory_; }
    SpeedPlot* speedPlot() const { return speed_; }
    LossScalePlot* lossScalePlot() const { return loss_scale_; }
    PipelineChart* pipelineChart() const { return pipeline_; }
    std::vector<RunPlot*> plots() const;

    void setXAxisKind(XAxisKind kind);
    void setSmoothing(double weight);
    // What the speed plot's right axis shows (samples/s, tokens/s, MFU or automatic).
    void setThroughputUnit(ThroughputUnit unit);
    void setFocusRun(int id);
    // All four controls at once (what the app restores at start and saves at exit).
    PlotView view() const;
    void setView(const PlotView& view);

protected:
    void resizeEvent(QResizeEvent* event) override;

private:
    void onMetricsAppended(int id, qsizetype firstStep, qsizetype firstEpoch);
    void onRunRemoved(int id);
    void refreshAll();
    void alignAxes();

    RunStore& store_;
    QComboBox* x_axis_ = nullptr;
    QSlider* smoothing_ = nullptr;
    QLabel* smoothing_value_ = nullptr;
    QCheckBox* log_y_ = nullptr;
    QComboBox* throughput_ = nullptr;
    QHBoxLayout* controls_ = nullptr;
    QLabel* hint_ = nullptr;
    QSplitter* splitter_ = nullptr;
    LossPlot* loss_ = nullptr;
    MemoryPlot* memory_ = nullptr;
    SpeedPlot* speed_ = nullptr;
    LossScalePlot* loss_scale_ = nullptr;
    PipelineChart* pipeline_ = nullptr;
};

}  // namespace trainbench::ui
