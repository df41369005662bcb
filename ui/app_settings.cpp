#include "app_settings.hpp"

#include <QDir>
#include <QStandardPaths>

#include "trainbench/config_json.hpp"

namespace trainbench::ui {

AppSettings::AppSettings()
    : AppSettings(QDir(QStandardPaths::writableLocation(QStandardPaths::AppConfigLocation))
                      .filePath(QStringLiteral("trainbench.ini"))) {}

AppSettings::AppSettings(const QString& path) : settings_(std::make_unique<QSettings>(path, QSettings::IniFormat)) {}

RunConfig AppSettings::lastConfig() const {
    const QString json = settings_->value(QStringLiteral("run/last_config")).toString();
    if (json.isEmpty()) return default_example_config();
    try {
        return config_from_json(json.toStdString());
    } catch (const std::exception&) {
        return default_example_config();  // written by another version; start from the example
    }
}

void AppSettings::saveConfig(const RunConfig& config) {
    settings_->setValue(QStringLiteral("run/last_config"), QString::fromStdString(config_to_json(config, -1)));
}

namespace {
const QString kXAxisKey = QStringLiteral("view/x_axis");
const QString kSmoothingKey = QStringLiteral("view/smoothing");
const QString kLogScaleLossKey = QStringLiteral("view/log_scale_loss");
const QString kThroughputKey = QStringLiteral("view/throughput");
}  // namespace

PlotView AppSettings::lastView() const {
    PlotView view;
    bool ok = false;
    const int x_axis = settings_->value(kXAxisKey).toInt(&ok);
    if (ok && x_axis >= static_cast<int>(XAxisKind::update) && x_axis <= static_cast<int>(XAxisKind::wall_time))
        view.x_axis = static_cast<XAxisKind>(x_axis);
    const double smoothing = settings_->value(kSmoothingKey).toDouble(&ok);
    if (ok && smoothing >= 0.0 && smoothing <= 0.99) view.smoothing = smoothing;
    view.log_scale_loss = settings_->value(kLogScaleLossKey, false).toBool();
    const int throughput = settings_->value(kThroughputKey).toInt(&ok);
    if (ok && throughput >= static_cast<int>(ThroughputUnit::automatic) && throughput <= static_cast<int>(ThroughputUnit::mfu))
        view.throughput = static_cast<ThroughputUnit>(throughput);
    return view;
}

void AppSettings::saveView(const PlotView& view) {
    settings_->setValue(kXAxisKey, static_cast<int>(view.x_axis));
    settings_->setValue(kSmoothingKey, view.smoothing);
    settings_->setValue(kLogScaleLossKey, view.log_scale_loss);
    settings_->setValue(kThroughputKey, static_cast<int>(view.throughput));
}

}  // namespace trainbench::ui
