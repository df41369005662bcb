#pragma once
// How far two runs' weights are apart, for the tests that pin "the same update up to float
// rounding" (several processes, ZeRO stages).
#include <algorithm>
#include <cmath>

#include "trainbench/weights.hpp"

namespace testing {

// The largest |a - b| / (1e-6 + 1e-6 * max|a|) over each tensor: torch.allclose's rule with
// rtol = atol = 1e-6, rtol against the tensor's scale; 1 is the edge of the tolerance. The
// absolute part is for tensors that stay near zero: the GPT's attention key bias has a true
// gradient of exactly zero (a constant added to every score of a query does not change its
// softmax), so AdamW turns float noise into steps.
inline double difference_in_tolerances(const trainbench::ModelWeights& a, const trainbench::ModelWeights& b) {
    double worst = 0.0;
    for (const auto& tensor : a.tensors) {
        const trainbench::NamedTensor* other = b.find(tensor.name);
        if (!other || other->data.size() != tensor.data.size()) return INFINITY;
        double scale = 0.0, difference = 0.0;
        for (size_t i = 0; i < tensor.data.size(); ++i) {
            scale = std::max(scale, static_cast<double>(std::fabs(tensor.data[i])));
            difference = std::max(difference, static_cast<double>(std::fabs(tensor.data[i] - other->data[i])));
        }
        worst = std::max(worst, difference / (1e-6 + 1e-6 * scale));
    }
    return worst;
}

}  // namespace testing
