#pragma once
// Reading PyTorch fixture files (safetensors written by tests/fixtures/make_*_fixtures.py) and
// comparing the engine's tensors with them.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "trainbench/run_config.hpp"
#include "trainbench/weights.hpp"

namespace testing {

// The AdamW that make_gpt_fixtures.py trains with (LR, BETAS, WEIGHT_DECAY there), which
// make_lora_fixtures.py reuses for the adapters.
inline trainbench::OptimizerConfig gpt_fixture_adamw() {
    trainbench::OptimizerConfig optimizer;
    optimizer.kind = trainbench::OptimizerKind::adamw;
    optimizer.lr = 3e-3;
    optimizer.beta1 = 0.9;
    optimizer.beta2 = 0.95;
    optimizer.weight_decay = 0.1;
    return optimizer;
}

// Every tensor of the file, by name.
inline std::map<std::string, trainbench::NamedTensor> read_fixture_tensors(const std::string& path) {
    std::map<std::string, trainbench::NamedTensor> out;
    for (auto& t : trainbench::read_safetensors(path)) out[t.name] = t;
    return out;
}

// count token ids or class labels from element `first` of a fixture tensor, which stores them as
// F32 holding exact small integers (the safetensors reader reads F32 only).
inline std::vector<int32_t> fixture_ids(const trainbench::NamedTensor& t, int64_t first, int64_t count) {
    std::vector<int32_t> out;
    for (int64_t i = first; i < first + count; ++i) out.push_back(static_cast<int32_t>(t.data[static_cast<size_t>(i)]));
    return out;
}

// max|got - want| / max|want|: the error relative to the reference tensor's scale.
inline double max_relative_error(const std::vector<float>& got, const std::vector<float>& want) {
    double diff = 0.0, scale = 0.0;
    for (size_t i = 0; i < want.size(); ++i) {
        diff = std::max(diff, std::abs(double(got[i]) - double(want[i])));
        scale = std::max(scale, std::abs(double(want[i])));
    }
    return diff / std::max(scale, 1e-30);
}

}  // namespace testing
