#pragma once
#include <QTableWidget>
#include <cstdint>
#include <map>

namespace trainbench::ui {

class RunStore;
struct RunRecord;

// One row per run: visibility checkbox with the run's colour, editable name, state, key
// settings and the measured results. Selecting rows picks the run the memory plot focuses on
// and the pair "Compare settings" diffs.
class RunsTable : public QTableWidget {
    Q_OBJECT
public:
    enum Column {
        kShown, kName, kState, kSettings, kUpdates, kFinalLoss, kValAccuracy, kTime,
        kTokensPerSecond, kMfu, kPeakMemory, kColumnCount
    };

    explicit RunsTable(RunStore& store, QWidget* parent = nullptr);

    std::vector<int> selectedRunIds() const;
    int rowOf(int id) const;

signals:
    void focusRunChanged(int id);
    void selectionSizeChanged(int selected);
    void deleteRequested(const std::vector<int>& ids);

protected:
    void keyPressEvent(QKeyEvent* event) override;

private:
    // Sums over the later half of a run's updates (the first half, with its warm-up, left
    // out), moved along as updates arrive so a row costs the same however long the run.
    struct LaterHalf {
        std::size_t begin = 0, end = 0;
        int64_t tokens_per_sample = 0;
        double seconds = 0.0;       // update time
        double tokens = 0.0;        // tokens trained on
        double mfu_seconds = 0.0;   // MFU x update time, where MFU is known
        double mfu_covered = 0.0;   // update time where MFU is known
    };
    LaterHalf& laterHalf(const RunRecord& run);
    void addRow(int id);
    void updateRow(int id);
    void onItemChanged(QTableWidgetItem* item);

    RunStore& store_;
    bool updating_ = false;
    std::map<int, LaterHalf> later_half_;
};

}  // namespace trainbench::ui
