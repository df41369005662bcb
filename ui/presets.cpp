#include "presets.hpp"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include "trainbench/config_json.hpp"
#include "trainbench/error.hpp"

namespace trainbench::ui {
namespace {

// `base` with every key of `overlay` replaced, nested objects merged key by key.
QJsonObject merged(QJsonObject base, const QJsonObject& overlay) {
    for (auto it = overlay.begin(); it != overlay.end(); ++it) {
        if (it->isObject() && base.value(it.key()).isObject())
            base[it.key()] = merged(base.value(it.key()).toObject(), it->toObject());
        else
            base[it.key()] = *it;
    }
    return base;
}

RunConfig config_of(const QJsonObject& object) {
    return config_from_json(QJsonDocument(object).toJson().toStdString());
}

}  // namespace

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
            const QJsonObject config = root["config"].toObject();
            preset.config = config_of(config);
            for (const auto& variant : root["variants"].toArray())
                preset.variants.push_back(config_of(merged(config, variant.toObject())));
        } catch (const Error& error) {
            throw Error("preset " + file_name.toStdString() + ": " + error.what());
        }
        presets.push_back(std::move(preset));
    }
    return presets;
}

}  // namespace trainbench::ui
