#pragma once
// Saved runs (--checkpoint-every, --resume; gradient checkpointing is another thing, in
// exec/gradient_checkpointing.*): one safetensors file, DIR/latest.safetensors, holding the
// model, the optimizer state and, in its metadata, the loop's counters (update, optimizer step,
// data position, loss scaler, skipped updates, elapsed time, seed). Written to a temporary file
// and renamed, so a crash mid-write leaves the previous checkpoint intact.
#include <cstdint>
#include <string>
#include <vector>

#include "backend/compute_engine.hpp"

namespace trainbench {

struct LoopState {
    int64_t update = 0;           // updates done
    int64_t optimizer_step = 0;   // updates applied (fp16 skips excluded)
    int64_t epoch = 1;            // position of the next global batch
    int64_t batch_in_epoch = 0;
    int64_t samples_seen = 0;
    int64_t skipped_updates = 0;
    double loss_scale = 1.0;
    int64_t clean_streak = 0;
    double wall_seconds = 0.0;
    uint64_t seed = 0;            // data order is a pure function of (seed, epoch)
    double epoch_loss_sum = 0.0;  // for the epoch's mean training loss
    int64_t epoch_samples = 0;
};

std::string checkpoint_path(const std::string& directory);
// Creates `directory` if needed and writes and removes a probe file in it, so that a folder
// checkpoints cannot be written to is refused before training (Error keyed checkpoint_dir).
void check_checkpoint_folder(const std::string& directory);
// What a checkpoint holds of one engine's model: its weights, its optimizer state (gathered
// from the ZeRO shards: every process of the engine's ZeRO group calls this together) and
// QLoRA's NF4 storage. A pipeline's stages gather theirs into the same tensors for the whole
// model (PipelineRunner::gather_checkpoint_tensors).
std::vector<NamedTensor> checkpoint_tensors(const ComputeEngine& engine);
void write_checkpoint(const std::string& directory, std::vector<NamedTensor> tensors, const LoopState& state,
                      const std::string& config_json);
// Loads the checkpoint of `model` into `engine` and returns the loop state. A pipeline's process
// passes its stage: the engine gets that stage's part of the model. Throws Error for a missing,
// truncated or incompatible checkpoint.
LoopState read_checkpoint(const std::string& directory, ComputeEngine& engine, const ModelDesc& model,
                          const ModelDesc* stage = nullptr);

}  // namespace trainbench
