#include "optim/lr_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

#include "trainbench/error.hpp"

// The decay shapes equal torch.optim.lr_scheduler's closed forms for a scheduler created after
// warmup and stepped once after every update, so the k-th update after warmup (k = 1, 2, ...)
// runs at the scheduler's epoch e = k - 1 and the first one gets the full rate:
//   linear  LinearLR(start_factor=1, end_factor=min_lr/lr, total_iters=D)
//           lr + (min_lr - lr) * min(e, D) / D
//   cosine  CosineAnnealingLR(T_max=D, eta_min=min_lr)
//           min_lr + (lr - min_lr) * (1 + cos(pi * e / D)) / 2, held at min_lr for e >= D
//   step    StepLR(step_size=decay_every, gamma=decay_gamma)
//           lr * gamma^floor(e / decay_every)
// where D = total_updates - warmup_steps is the number of updates after warmup. The rate thus
// reaches min_lr once all total_updates updates are done, and the last update still learns.
// Warmup equals LinearLR(start_factor=1/W, total_iters=W-1): update u <= W runs at lr * u / W.

namespace trainbench {

double learning_rate_at(const ScheduleConfig& schedule, double base_lr, int64_t update,
                        int64_t total_updates) {
    if (update < 1) throw std::invalid_argument("learning_rate_at: update is 1-based");
    const int64_t warmup = std::max<int64_t>(schedule.warmup_steps, 0);
    if (update <= warmup) {
        return base_lr * static_cast<double>(update) / static_cast<double>(warmup);
    }
    const int64_t epoch = update - warmup - 1;
    const int64_t decay_updates = total_updates - warmup;
    switch (schedule.kind) {
        case ScheduleKind::constant: return base_lr;
        case ScheduleKind::linear: {
            if (decay_updates <= 0) return base_lr;
            const double progress =
                static_cast<double>(std::min(epoch, decay_updates)) / static_cast<double>(decay_updates);
            return base_lr + (schedule.min_lr - base_lr) * progress;
        }
        case ScheduleKind::cosine: {
            if (decay_updates <= 0) return base_lr;
            if (epoch >= decay_updates) return schedule.min_lr;
            const double angle = std::numbers::pi * static_cast<double>(epoch) /
                                 static_cast<double>(decay_updates);
            return schedule.min_lr + (base_lr - schedule.min_lr) * (1.0 + std::cos(angle)) / 2.0;
        }
        case ScheduleKind::step: {
            if (schedule.decay_every < 1) {
                throw Error("step schedule: decay_every must be at least 1; set it to the number "
                            "of updates between decays");
            }
            const double decays = static_cast<double>(epoch / schedule.decay_every);
            return base_lr * std::pow(schedule.decay_gamma, decays);
        }
    }
    throw std::logic_error("learning_rate_at: unknown ScheduleKind");
}

}  // namespace trainbench
