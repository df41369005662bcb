#pragma once
#include <QString>
#include <vector>

#include "trainbench/run_config.hpp"

namespace trainbench::ui {

// A named starting point from resources/presets/*.json:
// {"name": ..., "description": ..., "config": {<config JSON keys, as trainbench-cli --config>},
//  "variants": [{<keys that differ>}, ...]}. A preset with variants is a comparison: choosing
// it runs the config and then each variant (the config with the variant's keys replaced).
struct Preset {
    QString name;
    QString description;
    RunConfig config;
    std::vector<RunConfig> variants;
};

// Reads every preset compiled into the app's resources, sorted by file name. Throws Error naming
// the file when one does not parse (a broken preset is a build defect, and tests catch it).
std::vector<Preset> load_presets(const QString& folder = QStringLiteral(":/presets"));

}  // namespace trainbench::ui
