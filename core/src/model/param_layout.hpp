#pragma once
// Where each parameter lives in an engine's flat parameter store, and the moves between that
// store and named weights. One layout for every backend: trainable tensors that AdamW decays
// first, then the trainable ones it does not, then frozen ones (LoRA's base weights), each group
// in state_dict order, so weight decay, gradients, optimizer state and the gradient norm each
// cover a contiguous range from the start. (An MLP decays every tensor, so its store is its
// state_dict order: layers.0.weight, layers.0.bias, ...) QLoRA's 4-bit base weights
// (ParamDesc::nf4) live outside the store, one after another in a byte store of their own.
#include <cstdint>
#include <vector>

#include "model/model_desc.hpp"
#include "trainbench/weights.hpp"

namespace trainbench {

struct ParamLayout {
    std::vector<int64_t> offset;  // per ModelDesc::params entry, in elements; -1: an NF4 tensor
    int64_t count = 0;            // elements in the store
    int64_t decay_end = 0;        // [0, decay_end) decays, [decay_end, trainable_end) does not
    int64_t trainable_end = 0;    // [trainable_end, count) is frozen: no gradient, no optimizer state
    std::vector<int64_t> nf4_offset;  // per ModelDesc::params entry, bytes into the NF4 store; -1: none
    int64_t nf4_bytes = 0;            // the NF4 store (each tensor nf4_sizes(numel).total_bytes())
};

ParamLayout make_param_layout(const ModelDesc& model);

// Throws Error with one line when `weights` does not fit `model`: a tensor missing, of another
// shape, one the model does not have, or tied copies that differ. The hint names the flags
// that decide the shapes.
void check_weights_shape(const ModelWeights& weights, const ModelDesc& model);

// Copies checked weights into the store (NF4 tensors quantized into nf4_store) / reads the
// stores back as state_dict tensors (NF4 ones dequantized; a tied tensor under each of its
// names, the alias last as torch's state_dict lists lm_head).
void scatter_weights(const ModelDesc& model, const ParamLayout& layout, const ModelWeights& weights, float* store,
                     uint8_t* nf4_store = nullptr);
ModelWeights gather_weights(const ModelDesc& model, const ParamLayout& layout, const float* store,
                            const uint8_t* nf4_store = nullptr);
// The trainable tensors only, from a store of layout.trainable_end elements (the gradients).
ModelWeights gather_trainable(const ModelDesc& model, const ParamLayout& layout, const float* store);

}  // namespace trainbench
