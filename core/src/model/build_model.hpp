#pragma once
// The builders of each model family. Each returns the whole description: parameters in
// state_dict order, the forward ops in execution order, checkpoint segments.
#include <cstdint>
#include <vector>

#include "model/model_desc.hpp"
#include "trainbench/dataset.hpp"
#include "trainbench/run_config.hpp"

namespace trainbench {

// Linear layers of widths sizes[0] -> sizes[1] -> ... with `activation` between them, named
// layers.{i}.weight / layers.{i}.bias; classes 0 means one regression output (MSE).
ModelDesc build_mlp(const std::vector<int64_t>& sizes, Activation activation, int64_t classes);

struct GptShape {
    int64_t n_layer = 4, n_head = 4, n_embd = 128, block_size = 128, vocab = 65;
};
// nanoGPT's GPT (model.py): token + position embeddings, n_layer pre-LayerNorm blocks of
// causal self-attention and a 4x GELU MLP, final LayerNorm, LM head tied to the embedding.
ModelDesc build_gpt(const GptShape& shape);

// The model a configuration asks for on this data set.
ModelDesc build_model(const RunConfig& config, const Dataset& data);

}  // namespace trainbench
