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
