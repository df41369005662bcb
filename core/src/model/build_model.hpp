#pragma once
// The builders of each model family. Each returns the whole description: parameters in
// state_dict order, the forward ops in execution order, checkpoint segments.
#include <cstdint>
#include <string>
#include <vector>

#include "model/model_desc.hpp"
#include "trainbench/dataset.hpp"
#include "trainbench/run_config.hpp"

namespace trainbench {

// Linear layers of widths sizes[0] -> sizes[1] -> ... with `activation` between them, named
// layers.{i}.weight / layers.{i}.bias; classes 0 means one regression output (MSE).
ModelDesc build_mlp(const std::vector<int64_t>& sizes, Activation activation, int64_t classes);

// The Linear layers of a GPT block that get LoRA adapters, by the module names PEFT's
// target_modules match: "c_attn", "c_proj" (both projections, as PEFT matches a name's end),
// "c_fc", or the groups "attn" (c_attn, attn.c_proj) and "mlp" (c_fc, mlp.c_proj).
struct LoraTargets {
    bool c_attn = false, attn_c_proj = false, c_fc = false, mlp_c_proj = false;
    bool any() const { return c_attn || attn_c_proj || c_fc || mlp_c_proj; }
};
// A comma-separated list as above; throws Error naming the unknown entry.
LoraTargets parse_lora_targets(const std::string& list);

// rank 0: full training. Otherwise every base weight is frozen and each target gets a trainable
// adapter: A [rank, in] (Kaiming-uniform as PEFT, torch.nn.Linear's default), B [out, rank]
// (zeros), scaled by alpha / rank.
struct LoraShape {
    int64_t rank = 0;
    double alpha = 8.0;
    LoraTargets targets;
    bool nf4_base = false;  // QLoRA: the adapted layers' frozen W stored as NF4 (ParamDesc::nf4)
    bool dora = false;      // DoRA: a trainable magnitude per output row (nn/dora.hpp)
};

struct GptShape {
    int64_t n_layer = 4, n_head = 4, n_embd = 128, block_size = 128, vocab = 65;
    LoraShape lora;
};
// nanoGPT's GPT (model.py): token + position embeddings, n_layer pre-LayerNorm blocks of
// causal self-attention and a 4x GELU MLP, final LayerNorm, LM head tied to the embedding.
// LoRA adapters are named as PEFT names them inside the model ("<module>.lora_A.weight",
// "<module>.lora_B.weight") and listed after the base tensors, so a seed draws the same base
// weights with and without them.
ModelDesc build_gpt(const GptShape& shape);
// A LoRA adapter's tensors are its module's name + these suffixes, as PEFT names them.
inline const std::string kLoraASuffix = ".lora_A.weight";
inline const std::string kLoraBSuffix = ".lora_B.weight";
// DoRA's magnitude vector, as PEFT's saved adapters name it (its "lora_magnitude_vector.<adapter
// name>.weight" parameter with the adapter name and ".weight" taken off).
inline const std::string kDoraMagnitudeSuffix = ".lora_magnitude_vector";
// Whether parameter name is a LoRA adapter's tensor.
bool is_lora_adapter(const std::string& name);

// A small image classifier as torch's tutorials write it: per entry of `channels` a block of
// Conv2d(3x3, padding 1) + activation + MaxPool2d(2), named conv1, conv2, ...; then flatten
// (NCHW order) and Linear layers of widths `hidden` with the activation between them and a last
// one to `classes` logits, named fc1, fc2, ... Each convolution block is a checkpoint segment.
struct CnnShape {
    int64_t in_channels = 1, height = 28, width = 28;
    std::vector<int64_t> channels = {32, 64};
    std::vector<int64_t> hidden = {128};
    int64_t classes = 10;
    Activation activation = Activation::relu;
};
ModelDesc build_cnn(const CnnShape& shape);

// The model a configuration asks for on this data set.
ModelDesc build_model(const RunConfig& config, const Dataset& data);

}  // namespace trainbench
