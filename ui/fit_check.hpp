#pragma once
#include <QWidget>
#include <memory>
#include <optional>

#include "trainbench/dataset.hpp"
#include "trainbench/memory_fit.hpp"
#include "trainbench/run_config.hpp"

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QPushButton;

namespace trainbench::ui {

// "Will it fit?" under the memory plan: the current settings planned for a device the machine
// may not have (this machine's RAM, or a CUDA GPU of any size), judged without running anything,
// and the what-if table of the efficiency knobs (trainbench/memory_fit.hpp) in a dialog. Run
// stays limited to the devices present: this only plans.
class FitCheck : public QWidget {
    Q_OBJECT
public:
    explicit FitCheck(QWidget* parent = nullptr);

    // The settings to judge and their data; no data (still loading, or settings not valid)
    // clears the verdict.
    void setRun(const RunConfig& config, std::shared_ptr<const Dataset> data);
    // The settings as this widget plans them: the chosen target device in place of config's.
    RunConfig plannedConfig() const;
    QString verdict() const;

    // The what-if table for the chosen target as text rows (also what the dialog shows).
    void showWhatIf();

private:
    void refresh();
    // Whether a device other than the configured one is chosen, and the memory planned against.
    bool otherDevice() const;
    DeviceBudget budgetFor(const RunConfig& planned) const;

    QComboBox* target_ = nullptr;
    QDoubleSpinBox* memory_ = nullptr;
    QLabel* verdict_ = nullptr;
    QPushButton* what_if_ = nullptr;
    std::optional<RunConfig> config_;
    std::shared_ptr<const Dataset> data_;
};

}  // namespace trainbench::ui
