#include "precision/loss_scaler.hpp"

#include <cmath>
#include <string>

#include "trainbench/error.hpp"

namespace trainbench {
namespace {

void check_scale(double scale) {
    if (!(scale > 0.0) || !std::isfinite(scale)) {
        throw Error("loss scaler: scale must be a positive finite number, got " +
                    std::to_string(scale) + "; use the default 65536");
    }
}

}  // namespace

DynamicLossScaler::DynamicLossScaler(double initial_scale, double growth_factor,
                                     double backoff_factor, int64_t growth_interval)
    : scale_(initial_scale),
      growth_factor_(growth_factor),
      backoff_factor_(backoff_factor),
      growth_interval_(growth_interval) {
    check_scale(initial_scale);
    // The same constraints GradScaler asserts.
    if (!(growth_factor > 1.0)) {
        throw Error("loss scaler: growth_factor must be above 1, got " +
                    std::to_string(growth_factor));
    }
    if (!(backoff_factor > 0.0 && backoff_factor < 1.0)) {
        throw Error("loss scaler: backoff_factor must lie in (0, 1), got " +
                    std::to_string(backoff_factor));
    }
    if (growth_interval < 1) {
        throw Error("loss scaler: growth_interval must be at least 1 update, got " +
                    std::to_string(growth_interval));
    }
}

bool DynamicLossScaler::update(bool found_inf) {
    if (found_inf) {
        scale_ *= backoff_factor_;
        clean_streak_ = 0;
        return true;
    }
    ++clean_streak_;
    if (clean_streak_ == growth_interval_) {
        // Like torch's _amp_update_scale: a growth that would overflow keeps the old scale.
        const double grown = scale_ * growth_factor_;
        if (std::isfinite(static_cast<float>(grown))) scale_ = grown;
        clean_streak_ = 0;
    }
    return false;
}

void DynamicLossScaler::restore(double scale, int64_t clean_streak) {
    check_scale(scale);
    if (clean_streak < 0 || clean_streak >= growth_interval_) {
        throw Error("loss scaler: checkpoint clean streak " + std::to_string(clean_streak) +
                    " is outside [0, " + std::to_string(growth_interval_) +
                    "); the checkpoint does not match this run's scaler settings");
    }
    scale_ = scale;
    clean_streak_ = clean_streak;
}

}  // namespace trainbench
