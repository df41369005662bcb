#include "device_field_control.hpp"

#include <QComboBox>
#include <QStandardItemModel>
#include <utility>

namespace trainbench::ui {

DeviceFieldControl::DeviceFieldControl(const ConfigField& field) : FieldControl(field), combo_(new QComboBox) {
    combo_->setObjectName(QString::fromStdString(field.key));
    connect(combo_, &QComboBox::currentIndexChanged, this, [this] {
        if (!loading_) emit edited();
    });
}

QWidget* DeviceFieldControl::widget() const { return combo_; }

void DeviceFieldControl::setDevices(const std::vector<DeviceInfo>& devices, const QString& cudaUnavailableReason) {
    const QString current = combo_->currentData().toString();
    const bool was_loading = std::exchange(loading_, true);
    combo_->clear();
    bool has_cpu = false, has_cuda = false;
    for (const auto& device : devices) {
        QString label = QString::fromStdString(device.name.empty() ? device.id : device.name);
        if (device.id != "cpu" && device.memory_bytes > 0)
            label += QStringLiteral(" · %1").arg(QString::fromStdString(format_bytes(device.memory_bytes)));
        combo_->addItem(label, QString::fromStdString(device.id));
        has_cpu = has_cpu || device.id == "cpu";
        has_cuda = has_cuda || device.id.rfind("cuda", 0) == 0;
    }
    if (!has_cpu) combo_->insertItem(0, tr("CPU"), QStringLiteral("cpu"));
    if (!has_cuda) {
        combo_->addItem(tr("CUDA (unavailable)"), QStringLiteral("cuda"));
        const int index = combo_->count() - 1;
        if (auto* model = qobject_cast<QStandardItemModel*>(combo_->model())) model->item(index)->setEnabled(false);
        combo_->setItemData(index, cudaUnavailableReason.isEmpty() ? tr("No CUDA device found.") : cudaUnavailableReason,
                            Qt::ToolTipRole);
    }
    const int index = combo_->findData(current);
    combo_->setCurrentIndex(index >= 0 ? index : 0);
    loading_ = was_loading;
}

void DeviceFieldControl::load(const RunConfig& config) {
    const bool was_loading = std::exchange(loading_, true);
    const int index = combo_->findData(QString::fromStdString(config.device));
    combo_->setCurrentIndex(index >= 0 ? index : 0);
    loading_ = was_loading;
}

QString DeviceFieldControl::store(RunConfig& config) const {
    config.device = combo_->currentData().toString().toStdString();
    return {};
}

}  // namespace trainbench::ui
