#pragma once
#include <cmath>

namespace trainbench::ui {

// TensorBoard's scalar smoothing: an exponential moving average whose start-up bias towards
// zero is divided out, so the smoothed curve begins at the first value instead of near 0.
class DebiasedEma {
public:
    explicit DebiasedEma(double weight = 0.6) : weight_(weight) {}
    double weight() const { return weight_; }
    void reset() {
        accumulated_ = 0.0;
        weight_power_ = 1.0;
    }
    double push(double value) {
        if (!std::isfinite(value)) return value;  // a NaN step must not poison the rest
        accumulated_ = accumulated_ * weight_ + (1.0 - weight_) * value;
        // weight^count kept as a running product: a pow() per point costs a visible share of
        // redrawing a million points when the smoothing slider moves.
        weight_power_ *= weight_;
        const double debias = weight_ >= 1.0 ? 1.0 : 1.0 - weight_power_;
        return debias > 0.0 ? accumulated_ / debias : value;
    }

private:
    double weight_;
    double accumulated_ = 0.0;
    double weight_power_ = 1.0;
};

}  // namespace trainbench::ui
