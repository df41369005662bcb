#include "train/checkpoint.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

#include "model/param_layout.hpp"
#include "trainbench/error.hpp"

namespace trainbench {
namespace {

constexpr const char* kFormat = "trainbench-checkpoint-1";

std::string exact(double value) {
    char text[40];
    std::snprintf(text, sizeof text, "%.17g", value);
    return text;
}

const std::string& field(const std::map<std::string, std::string>& metadata, const std::string& key,
                         const std::string& path) {
    auto it = metadata.find(key);
    if (it == metadata.end()) throw Error("checkpoint '" + path + "' has no '" + key + "' entry: it is not a TrainBench checkpoint");
    return it->second;
}

}  // namespace

std::string checkpoint_path(const std::string& directory) {
    return (std::filesystem::path(directory) / "latest.safetensors").string();
}

void check_checkpoint_folder(const std::string& directory) {
    auto refuse = [&](const std::string& why) {
        throw Error("cannot write checkpoints to '" + directory + "': " + why +
                        "; choose a folder you can write with --checkpoint-dir",
                    "checkpoint_dir");
    };
    std::error_code error;
    std::filesystem::create_directories(directory, error);
    if (error) refuse(error.message());
    const std::string probe = (std::filesystem::path(directory) / ".trainbench-write-probe").string();
    std::FILE* file = std::fopen(probe.c_str(), "wb");
    if (!file) refuse(std::strerror(errno));
    std::fclose(file);
    std::remove(probe.c_str());
}

void write_checkpoint(const std::string& directory, const ComputeEngine& engine, const LoopState& state,
                      const std::string& config_json) {
    std::error_code error;
    std::filesystem::create_directories(directory, error);
    if (error) throw Error("cannot create checkpoint folder '" + directory + "': " + error.message());
    std::vector<NamedTensor> tensors = engine.weights().tensors;
    for (auto& t : engine.optimizer_state()) tensors.push_back(std::move(t));
    for (auto& t : engine.quantized_weights()) tensors.push_back(std::move(t));
    const std::map<std::string, std::string> metadata{
        {"format", kFormat},
        {"update", std::to_string(state.update)},
        {"optimizer_step", std::to_string(state.optimizer_step)},
        {"epoch", std::to_string(state.epoch)},
        {"batch_in_epoch", std::to_string(state.batch_in_epoch)},
        {"samples_seen", std::to_string(state.samples_seen)},
        {"skipped_updates", std::to_string(state.skipped_updates)},
        {"loss_scale", exact(state.loss_scale)},
        {"clean_streak", std::to_string(state.clean_streak)},
        {"wall_seconds", exact(state.wall_seconds)},
        {"seed", std::to_string(state.seed)},
        {"epoch_loss_sum", exact(state.epoch_loss_sum)},
        {"epoch_samples", std::to_string(state.epoch_samples)},
        {"config", config_json},
    };
    write_safetensors(checkpoint_path(directory), tensors, metadata);
}

LoopState read_checkpoint(const std::string& directory, ComputeEngine& engine,
                          const ModelDesc& model) {
    const std::string path = checkpoint_path(directory);
    if (!std::filesystem::exists(path))
        throw Error("no checkpoint in '" + directory + "' (expected " + path + "); check --resume");
    std::map<std::string, std::string> metadata;
    const auto tensors = read_safetensors(path, &metadata);
    if (field(metadata, "format", path) != kFormat)
        throw Error("checkpoint '" + path + "' has format '" + metadata["format"] + "', expected " + kFormat);
    // The model's tensors by name; the optimizer state ("optimizer.*") and QLoRA's NF4 storage
    // are read separately.
    ModelWeights weights;
    for (const auto& t : tensors)
        if (t.name.rfind("optimizer.", 0) != 0 && t.name.rfind(kNf4StoragePrefix, 0) != 0) weights.tensors.push_back(t);
    try {
        check_weights_shape(weights, model);
    } catch (const Error& e) {
        throw Error("checkpoint '" + path + "' does not match the model (" + e.what() + ")");
    }
    engine.set_weights(weights);
    try {
        engine.set_quantized_weights(tensors);
    } catch (const Error& e) {
        throw Error("checkpoint '" + path + "': " + e.what());
    }
    engine.set_optimizer_state(tensors);
    LoopState state;
    auto integer = [&](const char* key) { return std::stoll(field(metadata, key, path)); };
    auto real = [&](const char* key) { return std::stod(field(metadata, key, path)); };
    try {
        state.update = integer("update");
        state.optimizer_step = integer("optimizer_step");
        state.epoch = integer("epoch");
        state.batch_in_epoch = integer("batch_in_epoch");
        state.samples_seen = integer("samples_seen");
        state.skipped_updates = integer("skipped_updates");
        state.loss_scale = real("loss_scale");
        state.clean_streak = integer("clean_streak");
        state.wall_seconds = real("wall_seconds");
        state.seed = std::stoull(field(metadata, "seed", path));
        state.epoch_loss_sum = real("epoch_loss_sum");
        state.epoch_samples = integer("epoch_samples");
    } catch (const std::logic_error&) {
        throw Error("checkpoint '" + path + "' has a malformed counter: the file is damaged");
    }
    return state;
}

}  // namespace trainbench
