#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "trainbench/memory.hpp"

namespace trainbench {

struct RunConfig;
struct Dataset;

// What a configuration resolves to before any training: the numbers the app shows beside
// the sliders and the memory the engine will allocate, by category.
struct RunPlan {
    int64_t global_batch = 0;          // batch_size (samples per update)
    int64_t step_size = 0;             // micro-batches per update
    int64_t processes = 1;             // data-parallel processes sharing each global batch
    int64_t zero = 0;                  // ZeRO stage over those processes
    // Model parallelism: the model's stages (a process each), the schedule ("gpipe", "1f1b") and
    // GPipe's bubble for step_size micro-batches, (stages - 1) / (step_size + stages - 1).
    int64_t pipeline_stages = 1;
    std::string pipeline_schedule;
    double pipeline_bubble = 0.0;
    int threads = 0;                   // CPU threads of each process (0 on CUDA)
    int64_t micro_batch = 0;           // largest micro-batch = ceil(ceil(batch / processes) / step_size)
    int64_t train_samples = 0;
    int64_t tokens_per_sample = 0;     // language models: the context length; 0 otherwise
    int64_t updates_per_epoch = 0;     // ceil(train_samples / global_batch)
    int64_t total_updates = 0;         // epochs * updates_per_epoch, capped by max_steps
    std::string model_summary;         // "MLP 2-128-128-3", "GPT L4 H4 C128 T128 V65"
    int64_t parameter_count = 0;
    int64_t trainable_parameter_count = 0;  // less than parameter_count when LoRA freezes the base
    int64_t nf4_parameter_count = 0;  // QLoRA: base weights stored as NF4, and their bytes
    int64_t nf4_bytes = 0;
    BytesByCategory planned_bytes{};  // engine allocation by category (peak of an update), per process (a pipeline's: process 0's stage)
    // A pipeline: each stage's (its processes', in stage order; planned_bytes is the first's).
    std::vector<BytesByCategory> stage_planned_bytes;
    // The most one process holds: planned_total(), or a pipeline's largest stage.
    int64_t largest_process_total() const;
    // Every process of the run together.
    int64_t all_processes_total() const;
    int64_t planned_total() const { return sum_bytes(planned_bytes); }
    std::string auto_fit_note;         // what --auto-fit chose, empty otherwise
    // With gradient checkpointing: the activations the same run plans without it (for the same
    // process as planned_bytes), so that what checkpointing frees is shown before it runs, and
    // how many segments rerun their forward in every backward; -1 and 0 without checkpointing.
    int64_t activations_without_checkpointing = -1;
    int rebuilt_segments = 0;
    // On CUDA in 16 bits: the attention probabilities that the tile kernels compute again in the
    // backward instead of keeping them from the forward (the CPU engine keeps them); 0 otherwise.
    int64_t recomputed_attention_bytes = 0;
    // What the CPU engine multiplies with (--cpu-products made concrete for this CPU and
    // precision): "oneDNN bf16 (avx512_core_amx)", "Eigen fp32", ...; empty on CUDA.
    std::string products;
    // Bytes the CPU executor moves through memory in one update (plan/memory_traffic.hpp), with
    // its element-wise ops fused (--fused on) and run one by one (--fused off); 0 on CUDA.
    int64_t fused_traffic_bytes = 0;
    int64_t eager_traffic_bytes = 0;
    // MFU's terms: the model's FLOPs per training sample (forward + backward) and the measured
    // peak of the device (0 when none is known; set when the run starts, train/peak_flops.hpp).
    double flops_per_sample = 0.0;
    double peak_flops = 0.0;
    std::string peak_source;
};

// Sizes of the micro-batches of one update: contiguous, as even as possible, larger first
// (10 samples, step_size 4 -> 3,3,2,2). Used by the engine and shown by the app.
std::vector<int64_t> split_micro_batches(int64_t batch_samples, int64_t step_size);

int64_t updates_per_epoch(int64_t samples, int64_t global_batch);

// The largest micro-batch of an update: process 0's share of the batch (the largest) cut into
// step_size parts. What the engine is planned for (RunPlan::micro_batch).
int64_t largest_micro_batch(int64_t batch, int64_t step_size, int64_t processes);

// With gradient checkpointing, one line on what it frees in this plan and what it recomputes:
// "gradient checkpointing: activations 3.78 MiB instead of 5.9 MiB without it (36% less), for a
// second forward pass of 3 segments in every backward", or that it frees nothing here (and whether
// it still recomputes); empty without checkpointing. A pipeline's figures are its first stage's.
std::string checkpointing_note(const RunPlan& plan);

// Where the GPU computes the attention probabilities again instead of keeping them, one line on
// what that saves: "attention: the probabilities (288 MiB) are computed again in the backward
// instead of kept (the CPU engine keeps them)"; empty otherwise.
std::string recomputed_attention_note(const RunPlan& plan);

// QLoRA: ", 786432 in 4-bit NF4 at 4.13 bits each" for the plan's parameters line;
// empty without an NF4 base.
std::string nf4_parameters_note(const RunPlan& plan);

}  // namespace trainbench
