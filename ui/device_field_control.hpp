#pragma once
#include <vector>

#include "field_control.hpp"
#include "trainbench/trainer.hpp"

class QComboBox;

namespace trainbench::ui {

// The device: the CPU and every CUDA device this build sees, with the GPU's memory; without
// one, a disabled "CUDA (unavailable)" entry whose tooltip says why.
class DeviceFieldControl : public FieldControl {
    Q_OBJECT
public:
    explicit DeviceFieldControl(const ConfigField& field);
    QWidget* widget() const override;
    void load(const RunConfig& config) override;
    QString store(RunConfig& config) const override;
    void setDevices(const std::vector<DeviceInfo>& devices, const QString& cudaUnavailableReason);

private:
    QComboBox* combo_;
    bool loading_ = false;
};

}  // namespace trainbench::ui
