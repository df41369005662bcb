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
    std::map<std::string, std::string> metadata = weights.metadata;
    metadata["format"] = "pt";
    metadata["producer"] = "trainbench";
    write_safetensors(path, weights.tensors, metadata);
}

ModelWeights load_weights(const std::string& path) {
    ModelWeights weights;
    weights.tensors = read_safetensors(path, &weights.metadata);
    if (weights.empty()) throw Error("weights file '" + path + "' holds no tensors");
    return weights;
}

std::string vocabulary_metadata(const std::vector<uint8_t>& vocabulary) {
    static const char digits[] = "0123456789abcdef";
    std::string text;
    for (uint8_t byte : vocabulary) {
        text += digits[byte >> 4];
        text += digits[byte & 15];
    }
    return text;
}

std::vector<uint8_t> parse_vocabulary_metadata(const std::string& text, const std::string& path) {
    auto value = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; };
    std::vector<uint8_t> vocabulary;
    bool valid = text.size() % 2 == 0;
    for (size_t i = 0; valid && i < text.size(); i += 2) {
        const int high = value(text[i]), low = value(text[i + 1]);
        valid = high >= 0 && low >= 0 && (vocabulary.empty() || vocabulary.back() < high * 16 + low);
        vocabulary.push_back(static_cast<uint8_t>(high * 16 + low));
    }
    if (!valid)
        throw Error("weights file '" + path + "' has a malformed \"vocabulary\" in its metadata (expected sorted "
                    "distinct bytes as hex digits); save the weights again or remove that entry");
    return vocabulary;
}

std::vector<uint8_t> read_weights_vocabulary(const std::string& path) {
    const std::map<std::string, std::string> metadata = read_safetensors_metadata(path);
    const auto found = metadata.find(kVocabularyKey);
    return found == metadata.end() ? std::vector<uint8_t>{} : parse_vocabulary_metadata(found->second, path);
}

}  // namespace trainbench
