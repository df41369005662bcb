#pragma once
#include <cstdint>

namespace trainbench {

// torch.cuda.amp.GradScaler's dynamic loss scaling: start at 65536, halve and skip the update
// when gradients overflow, double after growth_interval consecutive clean updates.
class DynamicLossScaler {
public:
    explicit DynamicLossScaler(double initial_scale = 65536.0, double growth_factor = 2.0,
                               double backoff_factor = 0.5, int64_t growth_interval = 2000);
    double scale() const { return scale_; }
    // Records one update's outcome; returns true when the update must be skipped.
    bool update(bool found_inf);
    int64_t clean_streak() const { return clean_streak_; }
    // Checkpoint state.
    void restore(double scale, int64_t clean_streak);

private:
    double scale_;
    double growth_factor_;
    double backoff_factor_;
    int64_t growth_interval_;
    int64_t clean_streak_ = 0;
};

}  // namespace trainbench
