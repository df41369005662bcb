#pragma once
// A LoRA run's weights as files see them. The engine holds the base tensors under their
// nanoGPT names and each adapter as "<module>.lora_A.weight" [rank, in] and
// "<module>.lora_B.weight" [out, rank] beside "<module>.weight"; these turn that into what a
// user saves: the base with the adapters merged in, or the adapters alone as PEFT saves them.
#include <cstdint>
#include <string>

#include "trainbench/weights.hpp"

namespace trainbench {

// PEFT's save_pretrained names an adapter tensor after the wrapped model's path:
// "base_model.model." + the name inside the model.
inline constexpr const char* kPeftPrefix = "base_model.model.";

// The base tensors with W + scale * B A in place of each adapted W (DoRA: each row of that then
// scaled by m / its norm) and no adapter tensors: a plain model file that --init-weights (and
// nanoGPT) load without LoRA. scale = alpha / rank.
ModelWeights merge_lora_adapters(const ModelWeights& weights, double scale);

// The adapter tensors alone, under PEFT's names.
ModelWeights peft_adapters(const ModelWeights& weights);

// Writes peft_adapters(weights) with metadata naming the rank, alpha, targets and whether
// they are DoRA's (use_dora).
void save_lora_adapters(const std::string& path, const ModelWeights& weights, int64_t rank, double alpha,
                        const std::string& targets);

}  // namespace trainbench
