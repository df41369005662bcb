#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <limits>
#include <string>
#include <vector>

#include "trainbench/dataset.hpp"
#include "trainbench/run_config.hpp"
#include "trainbench/trainer.hpp"

namespace trainbench {

// The efficiency techniques that training guides list, each as one knob changed against a
// baseline run. Guides claim an effect on speed and memory; the comparison measures it. Each is
// described once, in the technique table (technique_comparison.cpp): name, claim, how it runs
// and how it changes the baseline.
enum class Technique {
    baseline,
    batch_size,              // batch_size x2
    gradient_accumulation,   // step_size x4, same global batch
    gradient_checkpointing,  // toggled
    mixed_precision,         // bf16 (fp32 when the baseline already uses bf16)
    mixed_precision_fp16,    // fp16 with its loss scaler (fp32 when the baseline already uses fp16)
    empty_cache,             // release the allocator cache every N updates
    optimizer_choice,        // sgd against adam (adam when the baseline is not adam)
    data_preloading,         // prefetch 2 micro-batches on a loader thread (or off)
    fused_kernels,           // --fused toggled: what torch.compile does
    peft_lora,               // GPT only: LoRA rank 8 on attn and mlp, the base frozen (or LoRA off)
    peft_qlora,              // GPT only: the same with the adapted layers' base in NF4 (or in full)
    peft_dora,               // GPT only: the same as DoRA, a trainable magnitude per row (or LoRA)
    // Several processes (they need ComparisonOptions::run_processes):
    data_parallel,           // 2 processes sharing each global batch, the cores divided among them
    zero_1,                  // 2 processes, ZeRO-1 (optimizer state sharded)
    zero_2,                  // 2 processes, ZeRO-2 (+ gradients reduce-scattered)
    pipeline,                // 2 processes, the model cut into 2 pipeline stages (1F1B)
};
std::string to_string(Technique);
// Every single-process technique in table order, the baseline first (compare_techniques leaves
// out the PEFT rows for models other than the GPT).
std::vector<Technique> all_techniques();
// The rows that run in several processes (MPI), in table order.
std::vector<Technique> multi_process_techniques();

struct ComparisonOptions {
    // Updates each run makes; 0 = default_comparison_steps(). Every run makes the same number
    // of updates so that time and memory compare like for like.
    int64_t max_steps = 0;
    int64_t empty_cache_steps = 1;  // N of the empty-cache variant
    // Updates at the start of each run left out of the median: page faults, thread start-up.
    int64_t warmup_updates = 2;
    // An untimed short run before the baseline, so the baseline does not pay the process's
    // first-touch costs alone.
    bool warm_start = true;
    std::vector<Technique> techniques = all_techniques();
    // Runs a configuration of several processes elsewhere (trainbench-cli starts
    // `trainbench-cli train` under mpirun) and reports process 0's plan and updates to the
    // observer as train() would. Rows of several processes fail with a clear error without it.
    std::function<RunResult(const RunConfig&, const Dataset&, const Observer&, const std::atomic<bool>* stop)>
        run_processes;
};

// Adds the rows of several processes (multi_process_techniques) where they can run here (MPI
// built in, mpirun present) on the baseline's device, each run as a child `cli_program`
// (trainbench-cli) under mpirun (trainbench/process_runs.hpp). Elsewhere it leaves the options as
// they are and returns why, in one line for the user (the CUDA engine trains in one process).
std::string add_process_rows(ComparisonOptions& options, const std::string& cli_program, const RunConfig& base);

// The guides' claim, as in issue 4's table: "yes", "no", "maybe", "no (~10% slower)".
struct TechniqueClaim {
    std::string faster;
    std::string less_memory;
};
TechniqueClaim claimed_effect(Technique);

struct ComparisonRow {
    Technique technique = Technique::baseline;
    std::string change;                 // "batch_size 64 -> 128", "precision fp32 -> bf16"
    TechniqueClaim claim;
    RunConfig config;                   // exactly what ran
    std::string model_summary;          // from the run's plan, e.g. "MLP 784-256-10"
    bool ok = false;                    // false: the run failed; `error` says why
    std::string error;
    int64_t updates = 0;
    int64_t samples_per_update = 0;     // global batch
    double median_update_ms = 0.0;      // over updates after warmup_updates
    double samples_per_second = 0.0;    // samples_per_update / median update time
    int64_t tokens_per_sample = 0;      // language models: the context length; 0 otherwise
    double tokens_per_second() const { return samples_per_second * static_cast<double>(tokens_per_sample); }
    int64_t peak_memory_bytes = 0;      // engine allocator: largest total held (live + cache)
    int64_t peak_activation_bytes = 0;
    int64_t peak_rss_bytes = 0;
    double final_loss = 0.0;            // mean training loss of the last (up to) 10 updates
    // Relative to the baseline row, in percent (NaN for the baseline or a failed run).
    double update_time_change_pct = 0.0;
    double throughput_change_pct = 0.0;
    double peak_memory_change_pct = 0.0;
    // Pipeline rows: the stages' mean idle share in the last update, in percent (NaN elsewhere).
    double pipeline_bubble_pct = std::numeric_limits<double>::quiet_NaN();
    // The change, with what the run measured about it where that says more ("..., bubble 16%
    // measured").
    std::string change_measured() const;
};

struct ComparisonObserver {
    // Before each run: 0-based index among `total` runs (the warm start not counted).
    std::function<void(int index, int total, const ComparisonRow& row)> on_run_start;
    std::function<void(int index, int total, const ComparisonRow& row)> on_run_end;
};

// Updates per run when ComparisonOptions::max_steps is 0: sized so that the default
// comparison (`trainbench-cli compare` with no flags) finishes within 2 minutes on 2 cores.
int64_t default_comparison_steps();

// The baseline the CLI's `compare` uses when no flag changes it: Fashion-MNIST with a model
// large enough that compute, not overhead, dominates each update.
RunConfig default_comparison_config();

// The configuration the technique's run uses: `base` with that one knob changed. Also sets
// `change` to a readable description. Throws Error when the change cannot apply.
RunConfig technique_variant(const RunConfig& base, Technique technique,
                            const ComparisonOptions& options, std::string* change = nullptr);

// Runs the baseline and every technique's variant for the same number of updates on the same
// data (loaded once unless given). File outputs of `base` (metrics, weights, checkpoints) are
// ignored. Throws Error when the baseline cannot start; a variant that fails is reported in
// its row. A stop request ends the comparison after the current run's micro-batch; the rows
// measured so far are returned.
std::vector<ComparisonRow> compare_techniques(const RunConfig& base,
                                              const ComparisonOptions& options = {},
                                              const ComparisonObserver& observer = {},
                                              const std::atomic<bool>* stop = nullptr,
                                              std::shared_ptr<const Dataset> data = nullptr);

// The table as GitHub Markdown (with a line naming the dataset, model, device and updates) and
// as CSV (header + one row per run, full-precision numbers).
std::string comparison_to_markdown(const std::vector<ComparisonRow>& rows);
std::string comparison_to_csv(const std::vector<ComparisonRow>& rows);

}  // namespace trainbench
