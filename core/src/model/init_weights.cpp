#include "model/init_weights.hpp"

#include <cmath>
#include <random>

#include "model/build_model.hpp"

namespace trainbench {

ModelWeights init_weights(const ModelDesc& model, uint64_t seed) {
    // A stream of its own (seed mixed with a constant) so weights do not correlate with the
    // data shuffle drawn from the same user seed.
    std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
    // 24 random bits -> [0,1): identical on every standard library, unlike std distributions.
    auto unit = [&rng] { return static_cast<float>(rng() >> 40) * (1.0f / 16777216.0f); };
    auto normal = [&] {
        // Box-Muller over two portable uniforms; 1 - u keeps the logarithm finite.
        const double u1 = 1.0 - static_cast<double>(unit());
        const double u2 = static_cast<double>(unit());
        return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    };
    ModelWeights weights;
    for (const ParamDesc& p : model.params) {
        NamedTensor t{p.name, p.shape, std::vector<float>(static_cast<size_t>(p.numel()))};
        for (float& v : t.data) {
            switch (p.init) {
                case InitRule::uniform: v = (2.0f * unit() - 1.0f) * p.init_scale; break;
                case InitRule::normal: v = static_cast<float>(normal() * p.init_scale); break;
                case InitRule::zeros: v = 0.0f; break;
                case InitRule::ones: v = 1.0f; break;
            }
        }
        weights.tensors.push_back(std::move(t));
    }
    return weights;
}

ModelWeights with_initial_adapters(ModelWeights base, const ModelDesc& model, uint64_t seed) {
    bool missing = false;
    for (const ParamDesc& p : model.params) missing = missing || (is_lora_adapter(p.name) && !base.find(p.name));
    if (!missing) return base;
    const ModelWeights initial = init_weights(model, seed);
    for (const ParamDesc& p : model.params)
        if (is_lora_adapter(p.name) && !base.find(p.name)) base.tensors.push_back(*initial.find(p.name));
    return base;
}

}  // namespace trainbench
