#include "presets.hpp"

#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>

#include "trainbench/config_json.hpp"
#include "trainbench/error.hpp"

namespace trainbench::ui {

std::vector<Preset> load_presets(const QString& folder) {
    std::vector<Preset> presets;
    const QDir dir(folder);
    for (const QString& file_name : dir.entryList({QStringLiteral("*.json")}, QDir::Files, QDir::Name)) {
        QFile file(dir.filePath(file_name));
        if (!file.open(QIODevice::ReadOnly)) throw Error("cannot read preset " + file_name.toStdString());
        QJsonParseError parse_error;
        const auto document = QJsonDocument::fromJson(file.readAll(), &parse_error);
        if (!document.isObject())
            throw Error("preset " + file_name.toStdString() + " is not a JSON object: " +
                        parse_error.errorString().toStdString());
        const QJsonObject root = document.object();
        Preset preset;
        preset.name = root["name"].toString(QFileInfo(file_name).completeBaseName());
        preset.description = root["description"].toString();
        try {
            preset.config = config_from_json(QJsonDocument(root["config"].toObject()).toJson().toStdString());
        } catch (const Error& error) {
            throw Error("preset " + file_name.toStdString() + ": " + error.what());
        }
        presets.push_back(std::move(preset));
    }
    return presets;
}

}  // namespace trainbench::ui
