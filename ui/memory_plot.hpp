#pragma once
#include <array>

#include "run_plot.hpp"

namespace trainbench::ui {

// Engine memory per update. The focused run is drawn stacked by allocator category with its
// peak marked (graphs of the plot's own, not of a run); every other visible run shows its
// total as a line in its colour (the run's one graph).
class MemoryPlot : public RunPlot {
    Q_OBJECT
public:
    explicit MemoryPlot(const RunStore& store, QWidget* parent = nullptr);

    int focusRunId() const { return focus_id_; }
    void setFocusRun(int id);

    static constexpr std::array<MemoryCategory, kMemoryCategoryCount> kStackOrder = {
        MemoryCategory::parameters,  MemoryCategory::master_weights, MemoryCategory::gradients,
        MemoryCategory::optimizer_state, MemoryCategory::activations, MemoryCategory::workspace,
        MemoryCategory::cache};

protected:
    std::unique_ptr<RunCurves> makeCurves(const RunRecord& run) override;
    void addPoints(const RunRecord& run, RunCurves& curves, qsizetype firstStep, qsizetype firstEpoch) override;
    void showCurves(int id, RunCurves& curves, bool visible) override;
    void curvesRemoved(int id) override;
    void curvesCleared() override;
    QString describeStep(const RunRecord& run, std::size_t index) const override;
    bool boundsVisible(int id) const override;

private:
    void appendStack(const RunRecord& run, std::size_t firstStep);
    void updatePeakMarker(const RunRecord& run);
    void updateTotalVisibility(int id);
    void clearStack();
    void updateLegendEntries();
    void fitLegendToWidth();

    int focus_id_ = 0;
    std::array<QCPGraph*, kMemoryCategoryCount> stack_{};  // each category's peak within the update
    std::array<bool, kMemoryCategoryCount> category_used_{};  // listed in the legend only once used
    QCPGraph* live_peak_ = nullptr;                          // most bytes live at once in the update
    // The focused run's high-water mark as a dashed level across the run, named in the legend
    // (a text label inside the plot would sit on top of some run's line).
    QCPGraph* peak_ = nullptr;
};

}  // namespace trainbench::ui
