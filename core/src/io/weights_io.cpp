#include <string>

#include "trainbench/error.hpp"
#include "trainbench/weights.hpp"

namespace trainbench {

const NamedTensor* ModelWeights::find(const std::string& name) const {
    for (const auto& t : tensors)
        if (t.name == name) return &t;
    return nullptr;
}

void save_weights(const std::string& path, const ModelWeights& weights) {
    // "format": "pt" is what safetensors.torch writes; tools use it to pick the framework.
    write_safetensors(path, weights.tensors, {{"format", "pt"}, {"producer", "trainbench"}});
}

ModelWeights load_weights(const std::string& path) {
    ModelWeights weights{read_safetensors(path)};
    if (weights.empty()) throw Error("weights file '" + path + "' holds no tensors");
    return weights;
}

}  // namespace trainbench
