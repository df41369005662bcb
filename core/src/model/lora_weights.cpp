#include "trainbench/lora_weights.hpp"

#include "model/build_model.hpp"
#include "nn/dora.hpp"
#include "trainbench/error.hpp"

namespace trainbench {
namespace {

const NamedTensor& tensor_named(const ModelWeights& weights, const std::string& name) {
    const NamedTensor* t = weights.find(name);
    if (!t) throw Error("LoRA weights lack '" + name + "'");
    return *t;
}

}  // namespace

ModelWeights merge_lora_adapters(const ModelWeights& weights, double scale) {
    ModelWeights merged;
    merged.metadata = weights.metadata;
    for (const NamedTensor& t : weights.tensors)
        if (!is_lora_adapter(t.name)) merged.tensors.push_back(t);
    for (const NamedTensor& a : weights.tensors) {
        if (!a.name.ends_with(kLoraASuffix)) continue;
        const std::string module = a.name.substr(0, a.name.size() - kLoraASuffix.size());
        const NamedTensor& b = tensor_named(weights, module + kLoraBSuffix);
        NamedTensor* w = nullptr;
        for (NamedTensor& t : merged.tensors)
            if (t.name == module + ".weight") w = &t;
        if (!w) throw Error("LoRA weights lack '" + module + ".weight'");
        const int64_t rank = a.shape.at(0), in = a.shape.at(1), out = b.shape.at(0);
        if (b.shape.at(1) != rank || w->shape != std::vector<int64_t>{out, in})
            throw Error("LoRA adapter of '" + module + "' does not fit its weight");
        // In double, then rounded once: W + scale * B A.
        for (int64_t o = 0; o < out; ++o)
            for (int64_t i = 0; i < in; ++i) {
                double sum = 0.0;
                for (int64_t k = 0; k < rank; ++k)
                    sum += static_cast<double>(b.data[static_cast<size_t>(o * rank + k)]) * a.data[static_cast<size_t>(k * in + i)];
                float& value = w->data[static_cast<size_t>(o * in + i)];
                value = static_cast<float>(value + scale * sum);
            }
        // DoRA: each row scaled by m / ||W + scale B A||, as PEFT's merge does.
        const NamedTensor* magnitude = weights.find(module + kDoraMagnitudeSuffix);
        if (!magnitude) continue;
        if (magnitude->data.size() != static_cast<size_t>(out))
            throw Error("DoRA magnitude of '" + module + "' does not fit its weight");
        for (int64_t o = 0; o < out; ++o) {
            float* row = w->data.data() + o * in;
            const float factor = magnitude->data[static_cast<size_t>(o)] / dora_row_norm(row, in);
            for (int64_t i = 0; i < in; ++i) row[i] *= factor;
        }
    }
    return merged;
}

ModelWeights peft_adapters(const ModelWeights& weights) {
    ModelWeights adapters;
    for (const NamedTensor& t : weights.tensors)
        if (is_lora_adapter(t.name)) adapters.tensors.push_back({kPeftPrefix + t.name, t.shape, t.data});
    return adapters;
}

void save_lora_adapters(const std::string& path, const ModelWeights& weights, int64_t rank, double alpha,
                        const std::string& targets) {
    ModelWeights adapters = peft_adapters(weights);
    if (adapters.empty()) throw Error("there are no LoRA adapters to save to '" + path + "'");
    bool dora = false;
    for (const NamedTensor& t : weights.tensors) dora = dora || t.name.ends_with(kDoraMagnitudeSuffix);
    adapters.metadata = {{"lora_rank", std::to_string(rank)},
                         {"lora_alpha", std::to_string(alpha)},
                         {"lora_targets", targets},
                         {"use_dora", dora ? "true" : "false"}};
    save_weights(path, adapters);
}

}  // namespace trainbench
