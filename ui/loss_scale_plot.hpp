#pragma once
#include "run_plot.hpp"

namespace trainbench::ui {

// fp16 runs' dynamic loss scale per update (log scale) with skipped updates marked: where the
// scaler halved after an overflow, and where it grew after a stretch of clean updates.
class LossScalePlot : public RunPlot {
    Q_OBJECT
public:
    explicit LossScalePlot(const RunStore& store, QWidget* parent = nullptr);

    bool hasFp16Runs() const { return !graphs_.empty(); }

    void appendRun(const RunRecord& run, qsizetype firstStep, qsizetype firstEpoch) override;
    void removeRun(int id) override;
    void setRunVisible(int id, bool visible) override;

protected:
    void clearRuns() override;
    QString describeStep(const RunRecord& run, std::size_t index) const override;

private:
    struct Graphs {
        QCPGraph* scale = nullptr;
        QCPGraph* skipped = nullptr;
    };
    std::map<int, Graphs> graphs_;
};

}  // namespace trainbench::ui
