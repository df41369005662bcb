#pragma once
#include <QDialog>
#include <atomic>
#include <memory>
#include <vector>

#include "trainbench/dataset.hpp"
#include "trainbench/technique_comparison.hpp"

class QCPItemLine;
class QCPItemText;
class QCustomPlot;
class QLabel;
class QPushButton;
class QTableWidget;
class QThread;

namespace trainbench::ui {

// The app's "measure the table" action: runs the baseline and one variant per efficiency
// technique (trainbench::compare_techniques) on a worker thread, filling a table of measured
// changes and a scatter plot of time per update against peak memory as each run ends.
class TechniqueComparisonDialog : public QDialog {
    Q_OBJECT
public:
    // `cliProgram` runs the rows of several processes (data parallelism, ZeRO) under mpirun.
    TechniqueComparisonDialog(const RunConfig& base, std::shared_ptr<const Dataset> data, QString cliProgram,
                              QWidget* parent = nullptr);
    ~TechniqueComparisonDialog() override;

    void start();
    bool isRunning() const { return thread_ != nullptr; }
    const std::vector<ComparisonRow>& rows() const { return rows_; }
    // The table and the plot for `rows`, as they are shown when a comparison has ended.
    void showRows(std::vector<ComparisonRow> rows);

signals:
    void finished();

protected:
    void closeEvent(QCloseEvent* event) override;

private:
    void onRunStarted(int index, int total, const ComparisonRow& row);
    void onRunEnded(int index, int total, const ComparisonRow& row);
    void onAllDone();
    void refreshPlot();
    // Places the point labels (ui/scatter_labels.hpp) once the plot's layout is known.
    void placeLabels();
    void exportTable();

    RunConfig base_;
    std::shared_ptr<const Dataset> data_;
    QString cli_program_;
    QString left_out_;  // why the rows of several processes are missing, if they are
    std::shared_ptr<std::atomic<bool>> stop_ = std::make_shared<std::atomic<bool>>(false);
    QThread* thread_ = nullptr;
    std::shared_ptr<std::vector<ComparisonRow>> result_ = std::make_shared<std::vector<ComparisonRow>>();
    std::shared_ptr<QString> error_ = std::make_shared<QString>();
    std::vector<ComparisonRow> rows_;
    QLabel* status_ = nullptr;
    QTableWidget* table_ = nullptr;
    QCustomPlot* plot_ = nullptr;
    struct PointLabel {
        double x, y;  // the point, in plot coordinates
        QCPItemText* text;
        QCPItemLine* leader;
    };
    std::vector<PointLabel> labels_;
    QPushButton* stop_button_ = nullptr;
    QPushButton* export_button_ = nullptr;
};

}  // namespace trainbench::ui
