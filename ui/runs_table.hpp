#pragma once
#include <QTableWidget>

namespace trainbench::ui {

class RunStore;
struct RunRecord;

// One row per run: visibility checkbox with the run's colour, editable name, state, key
// settings and the measured results. Selecting rows picks the run the memory plot focuses on
// and the pair "Compare settings" diffs.
class RunsTable : public QTableWidget {
    Q_OBJECT
public:
    enum Column { kShown, kName, kState, kSettings, kUpdates, kFinalLoss, kValAccuracy, kTime, kPeakMemory, kColumnCount };

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
    void addRow(int id);
    void updateRow(int id);
    void onItemChanged(QTableWidgetItem* item);

    RunStore& store_;
    bool updating_ = false;
};

}  // namespace trainbench::ui
