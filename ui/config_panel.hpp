#pragma once
#include <QScrollArea>
#include <QString>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "trainbench/run_config.hpp"
#include "trainbench/run_plan.hpp"
#include "trainbench/trainer.hpp"

class QLabel;

namespace trainbench {
struct ConfigField;
}

namespace trainbench::ui {

class DatasetCache;
class DeviceFieldControl;
class FitCheck;
class FieldControl;
class SettingsGroup;

// The form of every knob of a run, built from the engine's table of configuration fields
// (trainbench/config_fields.hpp): one SettingsGroup per group of the table, one control per
// field, only the rows that apply to the chosen model family. It owns no run: it turns the
// controls into a RunConfig, shows what that config resolves to (the model's size, the batch
// split, tokens per update, the memory plan by category) and puts the engine's objection to a
// config on the row of the field the objection names.
class ConfigPanel : public QScrollArea {
    Q_OBJECT
public:
    explicit ConfigPanel(DatasetCache& datasets, QWidget* parent = nullptr);
    ~ConfigPanel() override;

    RunConfig config() const;
    void setConfig(const RunConfig& config);
    bool isValid() const { return error_.isEmpty(); }
    QString validationError() const { return error_; }
    // The plan of the current settings once their data is loaded and they are valid.
    const std::optional<RunPlan>& plan() const { return plan_; }
    void setDevices(const std::vector<DeviceInfo>& devices, const QString& cudaUnavailableReason);
    // While a run is active: its measured update time turned into an estimate of its length.
    void showRunEstimate(const QString& text);

signals:
    void configChanged();
    void validityChanged(bool valid);

private:
    void buildGroups();
    void onFieldEdited(const ConfigField& field);
    void refresh();
    void revalidate(const RunConfig& config);
    void showError(const std::string& key, const QString& message);
    void updateDerivedText(const RunConfig& config);

    DatasetCache& datasets_;
    RunConfig base_;  // fields without a control (file outputs) pass through
    QString error_;
    std::optional<RunPlan> plan_;
    std::vector<SettingsGroup*> groups_;
    std::vector<FieldControl*> controls_;
    DeviceFieldControl* device_ = nullptr;
    QLabel* general_error_ = nullptr;
    QLabel* model_size_ = nullptr;
    QLabel* derived_ = nullptr;
    QLabel* memory_plan_ = nullptr;
    FitCheck* fit_check_ = nullptr;
    QLabel* run_estimate_ = nullptr;
};

}  // namespace trainbench::ui
