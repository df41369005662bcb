#pragma once
#include <QDialog>
#include <QString>
#include <vector>

#include "trainbench/run_config.hpp"

class QCheckBox;
class QTableWidget;

namespace trainbench::ui {

struct RunRecord;

struct SettingDifference {
    QString key;  // dotted path as in the config JSON, e.g. "optimizer.lr"
    QString first;
    QString second;
};

// Every config key (from the config JSON, so the keys match files and the CLI) with its value
// in both runs; `onlyDifferent` keeps the keys whose values differ.
std::vector<SettingDifference> compare_settings(const RunConfig& first, const RunConfig& second,
                                                bool onlyDifferent = true);

// Shows two runs' settings side by side, the differing keys first and highlighted.
class SettingsDiffDialog : public QDialog {
    Q_OBJECT
public:
    SettingsDiffDialog(const RunRecord& first, const RunRecord& second, QWidget* parent = nullptr);

private:
    void fill();
    const RunRecord& first_;
    const RunRecord& second_;
    QCheckBox* show_all_ = nullptr;
    QTableWidget* table_ = nullptr;
};

}  // namespace trainbench::ui
