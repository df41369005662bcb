#pragma once
#include <cstdint>

#include "trainbench/run_config.hpp"

namespace trainbench {

// Learning rate for 1-based update `update` of `total_updates`. Warmup (if any) ramps
// linearly: lr * update / warmup_steps for update <= warmup_steps; the decay (linear, cosine
// to min_lr; step: x gamma every decay_every updates) runs over the updates after warmup.
// It equals torch's LinearLR / CosineAnnealingLR / StepLR stepped once after every update:
// the first update after warmup runs at lr, and min_lr is reached once total_updates are done
// (held there beyond). Exact formulas in lr_schedule.cpp.
double learning_rate_at(const ScheduleConfig& schedule, double base_lr, int64_t update,
                        int64_t total_updates);

}  // namespace trainbench
