#pragma once
#include "debiased_ema.hpp"
#include "run_plot.hpp"

namespace trainbench::ui {

// Measured time per optimizer update (left axis; raw faded, smoothed solid) and throughput in
// samples/s (right axis, dashed) for every run.
class SpeedPlot : public RunPlot {
    Q_OBJECT
public:
    explicit SpeedPlot(const RunStore& store, QWidget* parent = nullptr);

    void setSmoothing(double weight);

    void appendRun(const RunRecord& run, qsizetype firstStep, qsizetype firstEpoch) override;
    void removeRun(int id) override;
    void setRunVisible(int id, bool visible) override;

protected:
    void clearRuns() override;
    QString describeStep(const RunRecord& run, std::size_t index) const override;

private:
    struct Graphs {
        QCPGraph* update_ms_raw = nullptr;
        QCPGraph* update_ms = nullptr;
        QCPGraph* samples_per_second = nullptr;
        DebiasedEma ms_ema;
        DebiasedEma throughput_ema;
    };
    Graphs& graphsFor(const RunRecord& run);
    static constexpr double kMinimumSmoothing = 0.9;
    std::map<int, Graphs> graphs_;
    double smoothing_ = kMinimumSmoothing;
};

}  // namespace trainbench::ui
