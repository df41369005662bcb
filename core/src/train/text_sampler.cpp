#include "train/text_sampler.hpp"

#include <algorithm>
#include <cmath>

#include "trainbench/error.hpp"

namespace trainbench {
namespace {

int32_t prompt_token_of(const Dataset& data) {
    const auto newline = std::find(data.vocabulary.begin(), data.vocabulary.end(), static_cast<uint8_t>('\n'));
    return newline == data.vocabulary.end() ? 0 : static_cast<int32_t>(newline - data.vocabulary.begin());
}

}  // namespace

TextSampler::TextSampler(const Dataset& data, int64_t characters, double temperature)
    : data_(data), characters_(characters), temperature_(temperature), prompt_token_(prompt_token_of(data)) {
    if (data.task != Task::language_model) throw Error("internal: text samples need a language model's data set");
    const auto T = static_cast<size_t>(data.features);
    tokens_.reserve(static_cast<size_t>(characters) + 1);
    window_.assign(T, 0);
    targets_.assign(T, 0);
    logits_.assign(static_cast<size_t>(data.num_classes), 0.0f);
    weights_.assign(static_cast<size_t>(data.num_classes), 0.0);
    text_.reserve(static_cast<size_t>(characters) + 1);
}

int64_t TextSampler::next_token(TokenLogits& source, int64_t length, data::PortableRandom& random) {
    const int64_t T = data_.features;
    const int64_t context = std::min(length, T);
    std::copy(tokens_.begin() + (length - context), tokens_.begin() + length, window_.begin());
    std::fill(window_.begin() + context, window_.end(), 0);  // after the last position read: no effect
    MicroBatch batch;
    batch.tokens = window_.data();
    batch.labels = targets_.data();
    batch.count = 1;
    if (!source.logits_row(batch, context - 1, logits_.data())) return 0;

    // softmax(logits / temperature), shifted by the maximum for range; then one draw.
    const float largest = *std::max_element(logits_.begin(), logits_.end());
    double total = 0.0;
    for (size_t v = 0; v < logits_.size(); ++v) {
        weights_[v] = std::exp((static_cast<double>(logits_[v]) - largest) / temperature_);
        total += weights_[v];
    }
    double draw = random.uniform01() * total;
    for (size_t v = 0; v < weights_.size(); ++v) {
        draw -= weights_[v];
        if (draw < 0.0) return static_cast<int64_t>(v);
    }
    return static_cast<int64_t>(weights_.size()) - 1;  // rounding left the draw at the very end
}

namespace {
struct EngineLogits final : TokenLogits {
    explicit EngineLogits(ComputeEngine& engine) : engine(engine) {}
    bool logits_row(const MicroBatch& window, int64_t row, float* out) override {
        engine.logits_row(window, row, out);
        return true;
    }
    ComputeEngine& engine;
};
}  // namespace

const std::string& TextSampler::generate(ComputeEngine& engine, uint64_t seed) {
    EngineLogits source(engine);
    return generate(source, seed);
}

const std::string& TextSampler::generate(TokenLogits& source, uint64_t seed) {
    data::PortableRandom random(seed);
    tokens_.clear();
    tokens_.push_back(prompt_token_);
    for (int64_t i = 0; i < characters_; ++i)
        tokens_.push_back(static_cast<int32_t>(next_token(source, static_cast<int64_t>(tokens_.size()), random)));
    text_.clear();
    for (const int32_t token : tokens_) text_.push_back(static_cast<char>(data_.vocabulary[static_cast<size_t>(token)]));
    return text_;
}

}  // namespace trainbench
