#pragma once
#include <QWidget>

#include "x_axis.hpp"

class QCheckBox;
class QComboBox;
class QLabel;
class QSlider;
class QSplitter;

namespace trainbench::ui {

class LossPlot;
class LossScalePlot;
class MemoryPlot;
class RunPlot;
class RunStore;
class SpeedPlot;

// The centre of the window: the view controls (x-axis, smoothing, log y) above the stacked
// plots, kept in step with the RunStore.
class PlotArea : public QWidget {
    Q_OBJECT
public:
    explicit PlotArea(RunStore& store, QWidget* parent = nullptr);

    LossPlot* lossPlot() const { return loss_; }
    MemoryPlot* memoryPlot() const { return memory_; }
    SpeedPlot* speedPlot() const { return speed_; }
    LossScalePlot* lossScalePlot() const { return loss_scale_; }
    std::vector<RunPlot*> plots() const;

    void setXAxisKind(XAxisKind kind);
    void setSmoothing(double weight);
    void setFocusRun(int id);

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
    QSplitter* splitter_ = nullptr;
    LossPlot* loss_ = nullptr;
    MemoryPlot* memory_ = nullptr;
    SpeedPlot* speed_ = nullptr;
    LossScalePlot* loss_scale_ = nullptr;
};

}  // namespace trainbench::ui
