#pragma once
#include <limits>
#include <QElapsedTimer>
#include <QTimer>
#include <map>
#include <memory>
#include <vector>
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
// what all plots share: it owns each run's graphs (made when the run first has metrics, shown,
// hidden, removed and redrawn together, keyed by run id), mouse zoom/pan with double-click
// reset, autoscale that follows new data until the user zooms, and a hover read-out of every
// visible run at the cursor's x. A plot only says which graphs a run has (makeCurves) and what
// points they get (addPoints).
class RunPlot : public QCustomPlot {
    Q_OBJECT
public:
    RunPlot(const RunStore& store, QWidget* parent = nullptr);
    ~RunPlot() override;

    XAxisKind xAxisKind() const { return x_kind_; }
    void setXAxisKind(XAxisKind kind);

    // Kept in step with the RunStore (by PlotArea). Steps [firstStep, end) and epochs
    // [firstEpoch, end) of `run` are new; a run seen for the first time gets its curves and
    // all of its points.
    void appendRun(const RunRecord& run, qsizetype firstStep, qsizetype firstEpoch);
    void removeRun(int id);
    void setRunVisible(int id, bool visible);
    void renameRun(const RunRecord& run);
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

    // The runs that have curves on this plot, and one run's graphs (empty when it has none).
    int runCount() const { return static_cast<int>(runs_.size()); }
    bool hasRun(int id) const { return runs_.count(id) > 0; }
    std::vector<QCPGraph*> runGraphs(int id) const;

protected:
    // Data bounds of one run's curves; addPoints extends them as it adds points.
    struct RunBounds {
        AxisBounds x, y, y2;
    };
    // One run's curves. A plot derives its own (which graph is which, smoothing state) and
    // makes each graph with addRunGraph(), so that RunPlot can show, hide and remove them.
    struct RunCurves {
        virtual ~RunCurves() = default;
        std::vector<QCPGraph*> graphs;     // every graph of the run
        QCPGraph* legend_entry = nullptr;  // the graph named after the run in the legend, if any
        RunBounds bounds;
    };
    // The curves `run` has on this plot, or nullptr when it has none (asked again at its next
    // metrics).
    virtual std::unique_ptr<RunCurves> makeCurves(const RunRecord& run) = 0;
    // Adds steps [firstStep, end) and epochs [firstEpoch, end) of `run` to `curves`.
    virtual void addPoints(const RunRecord& run, RunCurves& curves, qsizetype firstStep, qsizetype firstEpoch) = 0;
    // Shows or hides a run's graphs; by default every graph follows the run's visibility and
    // the legend entry is listed while the run is shown.
    virtual void showCurves(int id, RunCurves& curves, bool visible);
    virtual void curvesRemoved(int /*id*/) {}
    virtual void curvesCleared() {}
    // A plot whose drawing depends on which runs are shown (the speed plot's throughput unit)
    // answers true once that choice changed; every run is then redrawn after chooseDrawing().
    virtual bool drawingStale() const { return false; }
    virtual void chooseDrawing() {}
    virtual QString describeStep(const RunRecord& run, std::size_t index) const = 0;
    // A last line under the read-out of `described` runs (e.g. what a percentage is relative to).
    virtual QString readoutNote(const std::vector<const RunRecord*>& /*described*/) const { return {}; }

    // A new graph of `curves` against xAxis and `valueAxis` (yAxis by default), not in the legend.
    QCPGraph* addRunGraph(RunCurves& curves, QCPAxis* valueAxis = nullptr);
    RunCurves* curvesOf(int id);
    const RunCurves* curvesOf(int id) const;
    const std::map<int, std::unique_ptr<RunCurves>>& allCurves() const { return runs_; }
    void setLogY(bool log);
    bool logY() const { return log_y_; }
    virtual bool boundsVisible(int id) const;
    RunX runX(const RunRecord& run) const { return run_x(run, x_kind_); }
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
    void redraw(bool resetView);
    void clearRuns();
    void updateLegendVisibility();
    void updateXAxisLabel();
    void scheduleReplot();
    void replotNow();
    void redrawCursor();
    void applyAutoscale();
    void onMouseMove(QMouseEvent* event);
    void applyRange(QCPAxis* axis, const AxisBounds& bounds, bool log, bool fromZero) const;

    XAxisKind x_kind_ = XAxisKind::update;
    bool following_ = true;
    bool log_y_ = false;
    bool redrawing_ = false;
    std::map<int, std::unique_ptr<RunCurves>> runs_;
    QCPItemStraightLine* cursor_ = nullptr;
    QTimer replot_timer_;
};

QPen run_pen(const QColor& color, double width, Qt::PenStyle style = Qt::SolidLine);

}  // namespace trainbench::ui
