#pragma once
#include <string>

#include "trainbench/run_config.hpp"

namespace trainbench {

// The JSON form of a RunConfig, shared by `trainbench-cli --config`, `--print-config` and the
// app's config export. Keys and their order come from config_fields(): the RunConfig field
// names, "optimizer.*" and "schedule.*" nested in objects.
std::string config_to_json(const RunConfig& config, int indent = 2);
// Applies the keys present in `json_text` on top of `base`; a "model" other than base's starts
// from that family's default_config(). Unknown keys and wrong types throw Error naming the key;
// for a field's value its key() is the field's key.
RunConfig config_from_json(const std::string& json_text, const RunConfig& base = {});
RunConfig load_config_file(const std::string& path, const RunConfig& base = {});

}  // namespace trainbench
