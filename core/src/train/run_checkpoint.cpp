#include "train/run_checkpoint.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

#include "model/param_layout.hpp"
#include "model/pipeline_stages.hpp"
#include "optim/optimizer_state_tensors.hpp"
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

std::vector<NamedTensor> checkpoint_tensors(const ComputeEngine& engine) {
    std::vector<NamedTensor> tensors = engine.weights().tensors;
    for (auto& t : engine.optimizer_state()) tensors.push_back(std::move(t));
    for (auto& t : engine.quantized_weights()) tensors.push_back(std::move(t));
    return tensors;
}

void write_checkpoint(const std::string& directory, std::vector<NamedTensor> tensors, const LoopState& state,
                      const std::string& config_json) {
    std::error_code error;
    std::filesystem::create_directories(directory, error);
    if (error) throw Error("cannot create checkpoint folder '" + directory + "': " + error.message());
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

LoopState read_checkpoint(const std::string& directory, ComputeEngine& engine, const ModelDesc& model,
                          const ModelDesc* stage) {
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
    std::vector<NamedTensor> optimizer_state;
    for (const auto& t : tensors) {
        if (t.name.rfind(kOptimizerStatePrefix, 0) == 0) optimizer_state.push_back(t);
        else if (t.name.rfind(kNf4StoragePrefix, 0) != 0) weights.tensors.push_back(t);
    }
    try {
        check_weights_shape(weights, model);
    } catch (const Error& e) {
        throw Error("checkpoint '" + path + "' does not match the model (" + e.what() + ")");
    }
    if (stage) {
        // The stage's tensors by name; each optimizer buffer cut from the whole model's store order
        // to the stage's (a size that is not the model's is left for the engine to refuse).
        weights = stage_weights(weights, *stage);
        const int64_t whole_n = make_param_layout(model).trainable_end;
        const int64_t stage_n = make_param_layout(*stage).trainable_end;
        for (NamedTensor& t : optimizer_state) {
            if (static_cast<int64_t>(t.data.size()) != whole_n) continue;
            std::vector<float> part(static_cast<size_t>(stage_n));
            whole_to_stage_store(model, t.data.data(), *stage, part.data());
            t.shape = {stage_n};
            t.data = std::move(part);
        }
    }
    engine.set_weights(weights);
    try {
        engine.set_quantized_weights(tensors);
    } catch (const Error& e) {
        throw Error("checkpoint '" + path + "': " + e.what());
    }
    engine.set_optimizer_state(optimizer_state);
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
