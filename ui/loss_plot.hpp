#pragma once
#include "debiased_ema.hpp"
#include "run_plot.hpp"

namespace trainbench::ui {

// Training loss per update (faded raw line behind a TensorBoard-style smoothed one) and the
// validation loss at each evaluation (epoch ends, and every eval_every updates), for every run.
class LossPlot : public RunPlot {
    Q_OBJECT
public:
    explicit LossPlot(const RunStore& store, QWidget* parent = nullptr);

    void setSmoothing(double weight);  // 0 = raw, 0.99 = very smooth
    double smoothing() const { return smoothing_; }
    void setLogScale(bool log) { setLogY(log); }

    // Run `id`'s validation points (x, loss) as drawn, for tests.
    std::vector<std::pair<double, double>> validationPoints(int id) const;

protected:
    std::unique_ptr<RunCurves> makeCurves(const RunRecord& run) override;
    void addPoints(const RunRecord& run, RunCurves& curves, qsizetype firstStep, qsizetype firstEpoch) override;
    QString describeStep(const RunRecord& run, std::size_t index) const override;

private:
    struct Curves : RunCurves {
        QCPGraph* raw = nullptr;
        QCPGraph* smoothed = nullptr;
        QCPGraph* validation = nullptr;
        DebiasedEma ema;
    };
    void thinValidationMarkers();
    double evaluationX(const RunRecord& run, const EpochMetrics& epoch) const;

    double smoothing_ = 0.6;
};

}  // namespace trainbench::ui
