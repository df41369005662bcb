#pragma once
// "Will it fit?" answered from the planner, before anything runs: a configuration's planned bytes
// against a device's memory (one this machine has or not), and the what-if table of the
// efficiency knobs. The plan is what TrainBench's engines allocate, to the byte (plan ==
// allocation is tested for both engines), not what another framework would.
#include <cstdint>
#include <string>
#include <vector>

#include "trainbench/dataset.hpp"
#include "trainbench/run_config.hpp"
#include "trainbench/run_plan.hpp"

namespace trainbench {

// What a CUDA process holds before the engine allocates anything (context, cuBLAS, the module
// images): the driver's used memory minus the allocator's peak, measured on an NVIDIA H200
// (driver 580.159.04, CUDA 13.0) on 2026-11-27 at 607-608 MiB for GPT and MLP runs alike
// (540 MiB on 2026-11-22, with fewer kernels in the binary), docs/BENCHMARKS.md. Other GPUs,
// drivers, CUDA versions and builds differ by tens of MiB.
inline constexpr int64_t kMeasuredCudaContextBytes = int64_t{608} << 20;
inline constexpr const char* kCudaContextSource =
    "context, cuBLAS and kernel images as measured on an NVIDIA H200 with CUDA 13.0, docs/BENCHMARKS.md";

// The memory one plans against.
struct DeviceBudget {
    bool cuda = false;
    int64_t memory_bytes = 0;  // 0: unknown, the plan is shown without a verdict
    int64_t fixed_bytes = 0;   // held before the engine allocates (CUDA: kMeasuredCudaContextBytes)
    std::string description;   // "a CUDA GPU with 24 GiB", "this machine's 23.4 GiB of RAM"

    // Whether there is a memory to judge plans against; whether `needed` bytes fit it.
    bool known() const { return memory_bytes > 0; }
    bool fits(int64_t needed) const { return known() && needed <= memory_bytes; }
};

// The budget for config.device: device_memory_bytes when given (> 0), else this machine's RAM
// (CPU) or its first GPU's memory (CUDA; unknown when there is none).
DeviceBudget device_budget(const RunConfig& config, int64_t device_memory_bytes);

// Bytes the run needs from the device: the plan of each process that shares it (on the CPU all
// of the run's processes are on this machine, each counted at its own plan: process 0's, the
// largest, or a pipeline stage's; a CUDA process has a GPU of its own), plus the fixed cost.
int64_t needed_bytes(const RunConfig& config, const RunPlan& plan, const DeviceBudget& budget);

// One row of the what-if table: the configured run with some knobs changed.
struct WhatIfRow {
    std::string change;             // "as configured", "bf16 + checkpointing", ...
    RunConfig config;
    bool same_update = true;        // false for LoRA and QLoRA: they train adapters, not the model
    std::string error;              // why the row does not apply (then nothing else is set)
    BytesByCategory bytes{};        // planned, per process (a pipeline's: its largest stage)
    int64_t planned_bytes = 0;      // their sum
    int64_t needed = 0;             // needed_bytes of the row
    int64_t micro_batch = 0;
    bool fits = false;              // needed <= device memory (false when the memory is unknown)
    // The largest micro-batch that fits with this row's knobs and global batch, and the
    // step_size that gives it; 0 when not even micro-batch 1 fits (or the memory is unknown).
    int64_t largest_fitting_micro_batch = 0;
    int64_t step_size_for_largest = 0;
    bool smallest = false;          // the least memory of the rows with the same update
};

// The configured run, then each knob alone and the useful combinations: step_size x2 and x4,
// gradient checkpointing, bf16, data parallelism over max(processes, 2) processes without and
// with ZeRO 1 and 2, LoRA (where the model family has it), bf16 with checkpointing, with
// ZeRO-2 and with step_size x4, and 2 pipeline stages (from one process). Knobs the
// configuration already has are not repeated.
std::vector<WhatIfRow> what_if_table(const RunConfig& config, const Dataset& data, const DeviceBudget& budget);

// The smallest step_size (so the largest micro-batch) at which config's plan fits `budget`; 0 if
// none does (not even micro-batch 1) or the budget's memory is unknown.
int64_t smallest_step_size_that_fits(RunConfig config, const Dataset& data, const DeviceBudget& budget);

// One line for a plan that does not fit: by how much, the category that dominates, and the
// what-if row that would help (the first that fits as it is, else the first that fits at a
// larger step_size, else, when nothing fits even at the smallest micro-batch, what dominates there
// and the row that needs least).
std::string does_not_fit_advice(const RunConfig& config, const Dataset& data, const RunPlan& plan,
                                const DeviceBudget& budget, const std::vector<WhatIfRow>& rows);

}  // namespace trainbench
