#pragma once
#include <qcustomplot.h>

namespace trainbench::ui {

class RunStore;
struct RunRecord;

// A pipeline run's last update as schedule visualisers draw it: a row per stage, its forward
// and backward passes as bars over time (each labelled with its micro-batch), the gaps between
// them the stage's idle time, the bubble. The title sets the bubble measured beside GPipe's
// (P-1)/(m+P-1); each row names its stage's memory peak. It shows the focused run, or the newest
// run with a pipeline, and is visible only while the session holds one.
class PipelineChart : public QCustomPlot {
    Q_OBJECT
public:
    explicit PipelineChart(const RunStore& store, QWidget* parent = nullptr);

    void setFocusRun(int id);
    int shownRun() const { return shown_; }
    bool hasPipelineRuns() const;
    // What is drawn, for tests: the bars (stage, forward, micro-batch) and the title.
    struct Bar {
        int stage;
        bool forward;
        int64_t micro_batch;
        double start_ms, end_ms;
    };
    const std::vector<Bar>& bars() const { return bars_; }
    QString title() const;

private:
    void onMetricsAppended(int id);
    void render();

    const RunStore& store_;
    int focus_ = 0;
    int shown_ = 0;
    std::vector<Bar> bars_;
    QCPTextElement* title_ = nullptr;
};

}  // namespace trainbench::ui
