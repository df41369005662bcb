#include "model/init_weights.hpp"

#include <algorithm>
#include <cmath>
#include <random>

#include "model/build_model.hpp"
#include "nn/dora.hpp"
#include "precision/half_float.hpp"

namespace trainbench {
namespace {

// InitRule::row_norms: the norms of the rows of `weight` as `working` precision holds it.
std::vector<float> row_norms(const NamedTensor& weight, Precision working) {
    const int64_t rows = weight.shape.at(0), width = static_cast<int64_t>(weight.data.size()) / rows;
    std::vector<float> row(static_cast<size_t>(width)), norms;
    for (int64_t r = 0; r < rows; ++r) {
        std::copy(weight.data.begin() + r * width, weight.data.begin() + (r + 1) * width, row.begin());
        if (working != Precision::fp32) round_to_16bit_serial(working, row.data(), width);
        norms.push_back(dora_row_norm(row.data(), width));
    }
    return norms;
}

}  // namespace

ModelWeights init_weights(const ModelDesc& model, uint64_t seed, Precision working) {
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
                case InitRule::row_norms: break;  // below, once every tensor is drawn
            }
        }
        weights.tensors.push_back(std::move(t));
    }
    for (size_t p = 0; p < model.params.size(); ++p)
        if (model.params[p].init == InitRule::row_norms)
            weights.tensors[p].data = row_norms(weights.tensors[static_cast<size_t>(model.params[p].norm_of)], working);
    return weights;
}

ModelWeights with_initial_adapters(ModelWeights base, const ModelDesc& model, uint64_t seed, Precision working) {
    bool missing = false;
    for (const ParamDesc& p : model.params) missing = missing || (is_lora_adapter(p.name) && !base.find(p.name));
    if (!missing) return base;
    const ModelWeights initial = init_weights(model, seed, working);
    for (const ParamDesc& p : model.params) {
        if (!is_lora_adapter(p.name) || base.find(p.name)) continue;
        if (p.init != InitRule::row_norms) {
            base.tensors.push_back(*initial.find(p.name));
            continue;
        }
        const NamedTensor* weight = base.find(model.params[static_cast<size_t>(p.norm_of)].name);
        if (!weight) {  // check_weights_shape names what the file lacks
            base.tensors.push_back(*initial.find(p.name));
            continue;
        }
        base.tensors.push_back({p.name, p.shape, row_norms(*weight, working)});
    }
    return base;
}

}  // namespace trainbench
