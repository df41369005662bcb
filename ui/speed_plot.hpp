#pragma once
#include "debiased_ema.hpp"
#include "run_plot.hpp"

namespace trainbench::ui {

// What the speed plot's right axis (the thin lines) shows.
enum class ThroughputUnit {
    automatic,  // tokens/s when every shown run is a language model, samples/s otherwise
    samples,    // samples/s (a language model's sample is one context window)
    tokens,     // tokens/s; runs that are not language models have no thin line
    mfu,        // model FLOPs utilisation, % of the measured peak of each run's device
};

// Measured time per optimizer update (left axis; raw faded, smoothed solid) and throughput
// (right axis, thin: samples/s, tokens/s or MFU) for every run.
class SpeedPlot : public RunPlot {
    Q_OBJECT
public:
    explicit SpeedPlot(const RunStore& store, QWidget* parent = nullptr);

    void setSmoothing(double weight);
    ThroughputUnit throughputUnit() const { return unit_; }
    void setThroughputUnit(ThroughputUnit unit);
    // The unit the thin lines are drawn in now (never automatic).
    ThroughputUnit drawnThroughputUnit() const { return drawn_unit_; }
    // Run `id`'s throughput line (x, value) as drawn, smoothed, for tests.
    std::vector<std::pair<double, double>> throughputPoints(int id) const;

protected:
    std::unique_ptr<RunCurves> makeCurves(const RunRecord& run) override;
    void addPoints(const RunRecord& run, RunCurves& curves, qsizetype firstStep, qsizetype firstEpoch) override;
    bool drawingStale() const override { return resolvedUnit() != drawn_unit_; }
    void chooseDrawing() override;
    QString describeStep(const RunRecord& run, std::size_t index) const override;
    QString readoutNote(const std::vector<const RunRecord*>& described) const override;

private:
    struct Curves : RunCurves {
        QCPGraph* update_ms_raw = nullptr;
        QCPGraph* update_ms = nullptr;
        QCPGraph* throughput = nullptr;
        DebiasedEma ms_ema;
        DebiasedEma throughput_ema;
    };
    ThroughputUnit resolvedUnit() const;
    static constexpr double kMinimumSmoothing = 0.9;
    double smoothing_ = kMinimumSmoothing;
    ThroughputUnit unit_ = ThroughputUnit::automatic;
    ThroughputUnit drawn_unit_ = ThroughputUnit::samples;
};

QString to_display_string(ThroughputUnit unit);

}  // namespace trainbench::ui
