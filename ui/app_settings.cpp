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

}  // namespace trainbench::ui
