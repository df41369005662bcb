#pragma once
#include <QScrollArea>
#include <QString>
#include <map>
#include <optional>

#include "trainbench/run_config.hpp"
#include "trainbench/trainer.hpp"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QFormLayout;
class QLabel;
class QLineEdit;
class QSlider;
class QSpinBox;
class QVBoxLayout;

namespace trainbench::ui {

class DatasetCache;

// The form of every knob of a run. It owns no run: it turns controls into a RunConfig, shows
// what that config resolves to (global batch, micro-batch, updates) and explains, next to the
// offending control, why a config cannot run.
class ConfigPanel : public QScrollArea {
    Q_OBJECT
public:
    explicit ConfigPanel(DatasetCache& datasets, QWidget* parent = nullptr);

    RunConfig config() const;
    void setConfig(const RunConfig& config);
    bool isValid() const { return error_.isEmpty(); }
    QString validationError() const { return error_; }
    void setDevices(const std::vector<DeviceInfo>& devices, const QString& cudaUnavailableReason);
    // While a run is active: its measured update time turned into an estimate of its length.
    void showRunEstimate(const QString& text);

signals:
    void configChanged();
    void validityChanged(bool valid);

private:
    QWidget* buildDataGroup();
    QWidget* buildModelGroup();
    QWidget* buildBatchingGroup();
    QWidget* buildOptimizerGroup();
    QWidget* buildDeviceGroup();
    QWidget* buildTechniquesGroup();
    // Adds a labelled row with its tooltip and the (hidden) error line beneath it.
    void addRow(QFormLayout* form, const QString& label, QWidget* field, const QString& tooltip,
                const QString& errorKey);
    void onControlsChanged();
    void onDatasetChosen(int index);
    void revalidate();
    void updateDerivedText();
    void showError(const QString& key, const QString& message);
    QString errorKeyFor(const QString& message) const;
    void selectDataset(const std::string& spec);

    DatasetCache& datasets_;
    RunConfig base_;  // fields without a control (optimizer betas, file outputs) pass through
    bool updating_ = false;
    QString error_;

    QComboBox* dataset_ = nullptr;
    QSpinBox* synthetic_samples_ = nullptr;
    QDoubleSpinBox* val_fraction_ = nullptr;
    QSpinBox* seed_ = nullptr;
    QLineEdit* hidden_ = nullptr;
    QComboBox* activation_ = nullptr;
    QSlider* batch_slider_ = nullptr;
    QSpinBox* batch_ = nullptr;
    QSlider* step_slider_ = nullptr;
    QSpinBox* step_ = nullptr;
    QLabel* derived_ = nullptr;
    QLabel* run_estimate_ = nullptr;
    QSpinBox* epochs_ = nullptr;
    QSpinBox* max_steps_ = nullptr;
    QComboBox* optimizer_ = nullptr;
    QSlider* lr_slider_ = nullptr;
    QDoubleSpinBox* lr_ = nullptr;
    QComboBox* schedule_ = nullptr;
    QSpinBox* warmup_ = nullptr;
    QDoubleSpinBox* clip_ = nullptr;
    QComboBox* precision_ = nullptr;
    QComboBox* device_ = nullptr;
    QSpinBox* threads_ = nullptr;
    QLineEdit* memory_budget_ = nullptr;
    QCheckBox* auto_fit_ = nullptr;
    QCheckBox* checkpointing_ = nullptr;
    QSpinBox* empty_cache_ = nullptr;
    QSpinBox* prefetch_ = nullptr;
    QCheckBox* preload_device_ = nullptr;
    QSpinBox* checkpoint_every_ = nullptr;
    QLabel* general_error_ = nullptr;
    std::map<QString, QLabel*> error_labels_;
};

}  // namespace trainbench::ui
