#pragma once
#include <QStatusBar>

class QLabel;
class QProgressBar;

namespace trainbench::ui {

struct RunRecord;

// Progress, ETA, throughput, loss and memory of the run being watched, from its last update.
class RunStatusBar : public QStatusBar {
    Q_OBJECT
public:
    explicit RunStatusBar(QWidget* parent = nullptr);
    void showRun(const RunRecord& run);
    void showIdle(const QString& text);
    // Seconds left for `run`, from its plan and the mean of its recent update times; NaN when
    // unknown.
    static double estimatedSecondsLeft(const RunRecord& run);

private:
    QLabel* state_ = nullptr;
    QProgressBar* progress_ = nullptr;
    QLabel* eta_ = nullptr;
    QLabel* throughput_ = nullptr;
    QLabel* loss_ = nullptr;
    QLabel* memory_ = nullptr;
};

}  // namespace trainbench::ui
