#include "optim/optimizer_state_tensors.hpp"

#include <algorithm>
#include <string>

#include "optim/optimizer_step.hpp"
#include "trainbench/error.hpp"

namespace trainbench {
namespace {
std::string tensor_name(const OptimizerConfig& config, int slot) {
    return kOptimizerStatePrefix + optimizer_state_name(config, slot);
}
}  // namespace

std::vector<NamedTensor> optimizer_state_tensors(const OptimizerConfig& config, const float* state, int64_t n) {
    std::vector<NamedTensor> tensors;
    for (int s = 0; s < optimizer_state_slots(config); ++s) {
        const float* slot = state + s * n;
        tensors.push_back({tensor_name(config, s), {n}, std::vector<float>(slot, slot + n)});
    }
    return tensors;
}

void load_optimizer_state_tensors(const OptimizerConfig& config, const std::vector<NamedTensor>& tensors, float* state,
                                  int64_t n, ShardRange shard) {
    if (shard.end < 0) shard = {0, n};
    for (int s = 0; s < optimizer_state_slots(config); ++s) {
        const std::string name = tensor_name(config, s);
        auto it = std::find_if(tensors.begin(), tensors.end(), [&](const NamedTensor& t) { return t.name == name; });
        if (it == tensors.end() || static_cast<int64_t>(it->data.size()) != n)
            throw Error("checkpoint has no optimizer state '" + name + "' of " + std::to_string(n) +
                        " values: it was saved by a different optimizer or model");
        std::copy(it->data.begin() + shard.begin, it->data.begin() + shard.end, state + s * shard.size());
    }
}

}  // namespace trainbench
