#pragma once
#include "debiased_ema.hpp"
#include "run_plot.hpp"

namespace trainbench::ui {

// Training loss per update (faded raw line behind a TensorBoard-style smoothed one) and the
// validation loss at each epoch end, for every run.
class LossPlot : public RunPlot {
    Q_OBJECT
public:
    explicit LossPlot(const RunStore& store, QWidget* parent = nullptr);

    void setSmoothing(double weight);  // 0 = raw, 0.99 = very smooth
    double smoothing() const { return smoothing_; }
    void setLogScale(bool log) { setLogY(log); }

    void appendRun(const RunRecord& run, qsizetype firstStep, qsizetype firstEpoch) override;
    void removeRun(int id) override;
    void setRunVisible(int id, bool visible) override;
    void renameRun(const RunRecord& run) override;

protected:
    void clearRuns() override;
    QString describeStep(const RunRecord& run, std::size_t index) const override;

private:
    struct Graphs {
        QCPGraph* raw = nullptr;
        QCPGraph* smoothed = nullptr;
        QCPGraph* validation = nullptr;
        DebiasedEma ema;
    };
    Graphs& graphsFor(const RunRecord& run);
    void thinValidationMarkers();
    double epochX(const RunRecord& run, const EpochMetrics& epoch) const;

    std::map<int, Graphs> graphs_;
    double smoothing_ = 0.6;
};

}  // namespace trainbench::ui
