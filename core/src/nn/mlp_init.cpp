#include "nn/mlp_init.hpp"

#include <cmath>
#include <random>

namespace trainbench {

ModelWeights init_mlp_weights(const std::vector<int64_t>& layer_sizes, uint64_t seed) {
    // A stream of its own (seed mixed with a constant) so weights do not correlate with the
    // data shuffle drawn from the same user seed.
    std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
    auto uniform = [&rng](float bound) {
        // 24 random bits -> [0,1): identical on every standard library.
        const float unit = static_cast<float>(rng() >> 40) * (1.0f / 16777216.0f);
        return (2.0f * unit - 1.0f) * bound;
    };
    ModelWeights weights;
    for (size_t i = 0; i + 1 < layer_sizes.size(); ++i) {
        LinearWeights layer;
        layer.in = layer_sizes[i];
        layer.out = layer_sizes[i + 1];
        const float bound = 1.0f / std::sqrt(static_cast<float>(layer.in));
        layer.weight.resize(static_cast<size_t>(layer.in * layer.out));
        layer.bias.resize(static_cast<size_t>(layer.out));
        for (auto& w : layer.weight) w = uniform(bound);
        for (auto& b : layer.bias) b = uniform(bound);
        weights.layers.push_back(std::move(layer));
    }
    return weights;
}

}  // namespace trainbench
