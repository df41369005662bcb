#include <algorithm>
#include <cassert>

#include "data/text_corpus.hpp"
#include "trainbench/dataset.hpp"

namespace trainbench {

void gather_samples(const DataSplit& split, const int64_t* indices, int64_t n, float* x_out,
                    int32_t* labels_out, float* targets_out) {
    const int64_t features = split.features;
    const bool from_pixels = !split.pixels_u8.empty();
    constexpr float pixel_scale = 1.0f / 255.0f;
    for (int64_t column = 0; column < n; ++column) {
        const int64_t sample = indices[column];
        assert(sample >= 0 && sample < split.count);
        float* destination = x_out + column * features;
        if (from_pixels) {
            const uint8_t* source = split.pixels_u8.data() + sample * features;
            for (int64_t f = 0; f < features; ++f) destination[f] = source[f] * pixel_scale;
        } else {
            const float* source = split.values_f32.data() + sample * features;
            std::copy(source, source + features, destination);
        }
        if (labels_out && !split.labels.empty()) labels_out[column] = split.labels[sample];
        if (targets_out && !split.targets.empty()) targets_out[column] = split.targets[sample];
    }
}

void gather_token_windows(const DataSplit& split, int64_t block_size, const int64_t* indices, int64_t n,
                          int32_t* tokens_out, int32_t* targets_out) {
    data::gather_windows(split.tokens, block_size, indices, n, tokens_out, targets_out);
}

}  // namespace trainbench
