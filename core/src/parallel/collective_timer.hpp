#pragma once
// Adds the wall time of its scope to a running total: the collectives' share of an update
// (StepMetrics::comm_ms), waiting for the slower processes included.
#include <chrono>

namespace trainbench {

class CollectiveTimer {
public:
    explicit CollectiveTimer(double& total_ms) : total_ms_(total_ms), start_(std::chrono::steady_clock::now()) {}
    ~CollectiveTimer() {
        total_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
    }
    CollectiveTimer(const CollectiveTimer&) = delete;
    CollectiveTimer& operator=(const CollectiveTimer&) = delete;

private:
    double& total_ms_;
    std::chrono::steady_clock::time_point start_;
};

}  // namespace trainbench
