#pragma once
#include <limits>
#include <QElapsedTimer>
#include <QTimer>
#include <map>
#include <qcustomplot.h>

#include "run_store.hpp"
#include "x_axis.hpp"

namespace trainbench::ui {

// Running extent of one axis's data, so autoscaling never rescans 100,000-point graphs.
struct AxisBounds {
    double low = std::numeric_limits<double>::infinity();
    double high = -std::numeric_limits<double>::infinity();
    double lowest_positive = std::numeric_limits<double>::infinity();
    void add(double value);
    void merge(const AxisBounds& other);
    bool valid() const { return low <= high; }
};

// A QCustomPlot showing one aspect of every run against the shared x-axis. The base class does
// what all plots share: mouse zoom/pan with double-click reset, autoscale that follows new data
// until the user zooms, and a hover read-out of every visible run at the cursor's x.
class RunPlot : public QCustomPlot {
    Q_OBJECT
public:
    RunPlot(const RunStore& store, QWidget* parent = nullptr);

    XAxisKind xAxisKind() const { return x_kind_; }
    void setXAxisKind(XAxisKind kind);

    virtual void appendRun(const RunRecord& run, qsizetype firstStep, qsizetype firstEpoch) = 0;
    virtual void removeRun(int id) = 0;
    virtual void setRunVisible(int id, bool visible) = 0;
    virtual void renameRun(const RunRecord&) {}
    // Redraws every run from its stored metrics (x-axis or smoothing changed).
    void rebuild();
    // Schedules one coalesced replot, autoscaled unless the user zoomed. Replots are spaced by
    // a multiple of their own measured cost, so however fast updates arrive, drawing never
    // takes more than a fraction of the GUI thread.
    void refresh();
    void resetView();
    int dataPointCount() const;
    // The hover read-out for plot x coordinate `x` (what the tooltip shows), for tests too.
    QString readoutAt(double x) const;

protected:
    virtual void clearRuns() = 0;
    virtual QString describeStep(const RunRecord& run, std::size_t index) const = 0;
    // Data bounds of run `id`; subclasses extend them as they add points.
    struct RunBounds {
        AxisBounds x, y, y2;
    };
    RunBounds& boundsFor(int id) { return bounds_[id]; }
    void forgetBounds(int id) { bounds_.erase(id); }
    void setLogY(bool log);
    bool logY() const { return log_y_; }
    virtual bool boundsVisible(int id) const;
    double stepX(const StepMetrics& step) const { return x_value(step, x_kind_); }
    QString valueText(double value) const;

    const RunStore& store_;

    void leaveEvent(QEvent* event) override;

private:
    // After any plot's replot, every plot waits this many times that replot's cost before it
    // draws, so with all plots busy drawing still takes at most a quarter of the GUI thread and
    // no two replots run back to back (which would freeze input for their sum).
    static constexpr double kReplotCostFactor = 3.0;
    static constexpr qint64 kMinimumReplotGapNs = 8'000'000;
    static qint64 next_replot_allowed_ns_;
    static qint64 nowNs();
    void scheduleReplot();
    void replotNow();
    void redrawCursor();
    void applyAutoscale();
    void onMouseMove(QMouseEvent* event);
    void applyRange(QCPAxis* axis, const AxisBounds& bounds, bool log, bool fromZero) const;

    XAxisKind x_kind_ = XAxisKind::update;
    bool following_ = true;
    bool log_y_ = false;
    std::map<int, RunBounds> bounds_;
    QCPItemStraightLine* cursor_ = nullptr;
    QTimer replot_timer_;
};

QPen run_pen(const QColor& color, double width, Qt::PenStyle style = Qt::SolidLine);

}  // namespace trainbench::ui
