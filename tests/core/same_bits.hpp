#pragma once
// Bit-for-bit equality of weights, for the tests that promise identical results (checkpointing,
// reruns, resuming): memcmp, so that even NaNs and signed zeros must match.
#include <cstring>
#include <vector>

#include "trainbench/weights.hpp"

namespace {

[[maybe_unused]] bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

[[maybe_unused]] bool same_bits(const trainbench::ModelWeights& a, const trainbench::ModelWeights& b) {
    if (a.tensors.size() != b.tensors.size()) return false;
    for (size_t i = 0; i < a.tensors.size(); ++i)
        if (a.tensors[i].data.size() != b.tensors[i].data.size() ||
            std::memcmp(a.tensors[i].data.data(), b.tensors[i].data.data(), a.tensors[i].data.size() * sizeof(float)) != 0)
            return false;
    return true;
}

}  // namespace
