#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace trainbench {

// Parameters of the MLP as torch.nn.Linear stores them: weight [out, in] row-major, bias [out].
struct LinearWeights {
    int64_t in = 0;
    int64_t out = 0;
    std::vector<float> weight;  // out * in
    std::vector<float> bias;    // out
};

struct ModelWeights {
    std::vector<LinearWeights> layers;
};

// A named float32 tensor, as stored in a safetensors file.
struct NamedTensor {
    std::string name;
    std::vector<int64_t> shape;
    std::vector<float> data;
};

// safetensors: 8-byte little-endian header length, JSON header, raw little-endian data.
// Writes go to PATH.tmp and are renamed into place, so a crash never leaves half a file.
void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});
// Throws Error for a missing, truncated or malformed file, or a dtype other than F32.
std::vector<NamedTensor> read_safetensors(const std::string& path,
                                          std::map<std::string, std::string>* metadata = nullptr);

// The i-th Linear layer's tensors are named "layers.{i}.weight" and "layers.{i}.bias".
void save_weights(const std::string& path, const ModelWeights& weights);
ModelWeights load_weights(const std::string& path);
// Throws Error when `weights` does not have the layer sizes `layer_sizes` (in, h1, ..., out).
void check_weights_shape(const ModelWeights& weights, const std::vector<int64_t>& layer_sizes);

}  // namespace trainbench
