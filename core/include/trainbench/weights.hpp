#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace trainbench {

// A named float32 tensor, as stored in a safetensors file.
struct NamedTensor {
    std::string name;
    std::vector<int64_t> shape;
    std::vector<float> data;
};

// A model's parameters by torch state_dict name, in state_dict order (a tied tensor appears
// under each of its names, as torch's state_dict lists it). nn.Linear weights are [out, in].
struct ModelWeights {
    std::vector<NamedTensor> tensors;
    // Written into the file's __metadata__ beside format and producer, and read back: a language
    // model's "vocabulary" (vocabulary_metadata below).
    std::map<std::string, std::string> metadata;
    bool empty() const { return tensors.empty(); }
    const NamedTensor* find(const std::string& name) const;
};

// safetensors: 8-byte little-endian header length, JSON header, raw little-endian data.
// Writes go to PATH.tmp and are renamed into place, so a crash never leaves half a file.
void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});
// Throws Error for a missing, truncated or malformed file, or a dtype other than F32.
std::vector<NamedTensor> read_safetensors(const std::string& path,
                                          std::map<std::string, std::string>* metadata = nullptr);
// The same for a file's bytes held in memory; `path` only names it in messages.
std::vector<NamedTensor> parse_safetensors(std::string_view bytes, const std::string& path,
                                           std::map<std::string, std::string>* metadata = nullptr);
// A file's __metadata__ alone, reading only its header (empty when it has none).
std::map<std::string, std::string> read_safetensors_metadata(const std::string& path);

// Weights files are safetensors with the state_dict names (an MLP's i-th Linear layer is
// "layers.{i}.weight" and "layers.{i}.bias"), so they load in PyTorch and back.
void save_weights(const std::string& path, const ModelWeights& weights);
ModelWeights load_weights(const std::string& path);

// A character-level model's vocabulary (its token ids' bytes, in id order) as the metadata
// value "vocabulary" holds it: two lowercase hex digits per byte. Parsing throws Error naming
// the file on anything else.
inline constexpr const char* kVocabularyKey = "vocabulary";
std::string vocabulary_metadata(const std::vector<uint8_t>& vocabulary);
std::vector<uint8_t> parse_vocabulary_metadata(const std::string& text, const std::string& path);
// The vocabulary recorded in a weights file (the header alone is read); empty when it has none.
std::vector<uint8_t> read_weights_vocabulary(const std::string& path);

}  // namespace trainbench
