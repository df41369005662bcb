#pragma once
#include <array>

#include "run_plot.hpp"

namespace trainbench::ui {

// Engine memory per update. The focused run is drawn stacked by allocator category with its
// peak marked; every other visible run shows its total as a line in its colour.
class MemoryPlot : public RunPlot {
    Q_OBJECT
public:
    explicit MemoryPlot(const RunStore& store, QWidget* parent = nullptr);

    int focusRunId() const { return focus_id_; }
    void setFocusRun(int id);

    void appendRun(const RunRecord& run, qsizetype firstStep, qsizetype firstEpoch) override;
    void removeRun(int id) override;
    void setRunVisible(int id, bool visible) override;

    static constexpr std::array<MemoryCategory, kMemoryCategoryCount> kStackOrder = {
        MemoryCategory::parameters,  MemoryCategory::master_weights, MemoryCategory::gradients,
        MemoryCategory::optimizer_state, MemoryCategory::activations, MemoryCategory::workspace,
        MemoryCategory::cache};

protected:
    void clearRuns() override;
    QString describeStep(const RunRecord& run, std::size_t index) const override;
    bool boundsVisible(int id) const override;

private:
    QCPGraph* totalGraphFor(const RunRecord& run);
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
    std::map<int, QCPGraph*> totals_;
};

}  // namespace trainbench::ui
