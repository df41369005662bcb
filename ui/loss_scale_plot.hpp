#pragma once
#include "run_plot.hpp"

namespace trainbench::ui {

// fp16 runs' dynamic loss scale per update (log scale) with skipped updates marked: where the
// scaler halved after an overflow, and where it grew after a stretch of clean updates. Runs in
// other precisions have no curves here.
class LossScalePlot : public RunPlot {
    Q_OBJECT
public:
    explicit LossScalePlot(const RunStore& store, QWidget* parent = nullptr);

    bool hasFp16Runs() const { return runCount() > 0; }

protected:
    std::unique_ptr<RunCurves> makeCurves(const RunRecord& run) override;
    void addPoints(const RunRecord& run, RunCurves& curves, qsizetype firstStep, qsizetype firstEpoch) override;
    QString describeStep(const RunRecord& run, std::size_t index) const override;

private:
    struct Curves : RunCurves {
        QCPGraph* scale = nullptr;
        QCPGraph* skipped = nullptr;
    };
};

}  // namespace trainbench::ui
