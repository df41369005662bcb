#include <string>
#include <unordered_map>

#include "trainbench/error.hpp"
#include "trainbench/weights.hpp"

namespace trainbench {

namespace {

std::string weight_name(size_t layer) { return "layers." + std::to_string(layer) + ".weight"; }
std::string bias_name(size_t layer) { return "layers." + std::to_string(layer) + ".bias"; }

std::string shape_text(int64_t out, int64_t in) {
    // Appended piecewise: GCC 12 warns falsely (-Wrestrict) on "[" + std::to_string(...) at -O3.
    std::string text = "[";
    text += std::to_string(out);
    text += ", ";
    text += std::to_string(in);
    text += "]";
    return text;
}

}  // namespace

void save_weights(const std::string& path, const ModelWeights& weights) {
    std::vector<NamedTensor> tensors;
    tensors.reserve(2 * weights.layers.size());
    for (size_t i = 0; i < weights.layers.size(); ++i) {
        const LinearWeights& layer = weights.layers[i];
        tensors.push_back({weight_name(i), {layer.out, layer.in}, layer.weight});
        tensors.push_back({bias_name(i), {layer.out}, layer.bias});
    }
    // "format": "pt" is what safetensors.torch writes; tools use it to pick the framework.
    write_safetensors(path, tensors, {{"format", "pt"}, {"producer", "trainbench"}});
}

ModelWeights load_weights(const std::string& path) {
    std::vector<NamedTensor> tensors = read_safetensors(path);
    std::unordered_map<std::string, NamedTensor*> by_name;
    for (auto& t : tensors) by_name[t.name] = &t;

    const std::string in_file = " in '" + path + "'";
    ModelWeights weights;
    for (size_t i = 0;; ++i) {
        const auto weight_it = by_name.find(weight_name(i));
        const auto bias_it = by_name.find(bias_name(i));
        if (weight_it == by_name.end() && bias_it == by_name.end()) break;
        if (weight_it == by_name.end())
            throw Error("missing tensor '" + weight_name(i) + "'" + in_file + " (it has " +
                        bias_name(i) + ")");
        if (bias_it == by_name.end())
            throw Error("missing tensor '" + bias_name(i) + "'" + in_file + " (it has " +
                        weight_name(i) + ")");
        NamedTensor& weight = *weight_it->second;
        NamedTensor& bias = *bias_it->second;
        if (weight.shape.size() != 2)
            throw Error("tensor '" + weight.name + "'" + in_file +
                        " must have shape [out, in] like torch.nn.Linear.weight");
        if (bias.shape.size() != 1 || bias.shape[0] != weight.shape[0])
            throw Error("tensor '" + bias.name + "'" + in_file + " must have shape [" +
                        std::to_string(weight.shape[0]) + "] to match " + weight.name);
        LinearWeights layer;
        layer.out = weight.shape[0];
        layer.in = weight.shape[1];
        if (!weights.layers.empty() && weights.layers.back().out != layer.in)
            throw Error("layer " + std::to_string(i) + in_file + " takes " +
                        std::to_string(layer.in) + " inputs but layer " + std::to_string(i - 1) +
                        " gives " + std::to_string(weights.layers.back().out) + " outputs");
        layer.weight = std::move(weight.data);
        layer.bias = std::move(bias.data);
        weights.layers.push_back(std::move(layer));
        by_name.erase(weight_it);
        by_name.erase(bias_it);
    }
    if (weights.layers.empty())
        throw Error("no tensor 'layers.0.weight'" + in_file +
                    ": expected tensors named layers.{i}.weight and layers.{i}.bias");
    // A leftover layers.* tensor means a gap in the numbering: loading silently would drop it.
    for (const auto& [name, tensor] : by_name)
        if (name.rfind("layers.", 0) == 0)
            throw Error("tensor '" + name + "'" + in_file + " does not follow layers 0.." +
                        std::to_string(weights.layers.size() - 1) + " (a layer is missing)");
    return weights;
}

void check_weights_shape(const ModelWeights& weights, const std::vector<int64_t>& layer_sizes) {
    const size_t needed_layers = layer_sizes.size() < 2 ? 0 : layer_sizes.size() - 1;
    if (weights.layers.size() != needed_layers)
        throw Error("weights file has " + std::to_string(weights.layers.size()) +
                    " layers but the model needs " + std::to_string(needed_layers) +
                    ": use the same --hidden as the run that saved it");
    for (size_t i = 0; i < needed_layers; ++i) {
        const LinearWeights& layer = weights.layers[i];
        const int64_t in = layer_sizes[i];
        const int64_t out = layer_sizes[i + 1];
        if (layer.in == in && layer.out == out) {
            if (layer.weight.size() != static_cast<size_t>(out * in) ||
                layer.bias.size() != static_cast<size_t>(out))
                throw Error("weights of layer " + std::to_string(i) + " hold " +
                            std::to_string(layer.weight.size()) + " + " +
                            std::to_string(layer.bias.size()) + " values but shape " +
                            shape_text(out, in) + " needs " + std::to_string(out * in) + " + " +
                            std::to_string(out));
            continue;
        }
        // The first layer's input and the last layer's output come from the data, the rest
        // from --hidden; say which one the user has to change.
        const bool data_mismatch = (i == 0 && layer.in != in) ||
                                   (i + 1 == needed_layers && layer.out != out);
        const std::string fix = data_mismatch
                                    ? "use a dataset with the same features and outputs as "
                                      "the run that saved it"
                                    : "use the same --hidden as the run that saved it";
        throw Error("weights file has layer " + std::to_string(i) + " of shape " +
                    shape_text(layer.out, layer.in) + " but the model needs " +
                    shape_text(out, in) + ": " + fix);
    }
}

}  // namespace trainbench
