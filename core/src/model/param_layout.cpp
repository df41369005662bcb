#include "model/param_layout.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "precision/nf4.hpp"
#include "trainbench/error.hpp"

namespace trainbench {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
    std::string text = "[";
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i) text += ", ";
        text += std::to_string(shape[i]);
    }
    return text + "]";
}

// Which flags decide a tensor's shape, so the message can say what to change.
std::string shape_hint(const ModelDesc& model, const std::string& name) {
    if (model.family == ModelFamily::gpt)
        return "use the same --n-layer, --n-embd, --block-size and text as the run that saved it";
    const std::string first = "layers.0.";
    const std::string last = "layers." + std::to_string(model.params.size() / 2 - 1) + ".";
    if (name.rfind(first, 0) == 0 || name.rfind(last, 0) == 0)
        return "use the same --hidden, and a dataset with the same features and outputs, as the run that saved it";
    return "use the same --hidden as the run that saved it";
}

}  // namespace

ParamLayout make_param_layout(const ModelDesc& model) {
    ParamLayout layout;
    layout.offset.assign(model.params.size(), 0);
    layout.nf4_offset.assign(model.params.size(), -1);
    auto place = [&](bool trainable, bool decayed) {
        for (size_t i = 0; i < model.params.size(); ++i) {
            const ParamDesc& p = model.params[i];
            if (p.trainable != trainable || (trainable && p.decay != decayed)) continue;
            if (p.nf4) {
                if (p.trainable) throw std::logic_error("param layout: an NF4 tensor '" + p.name + "' is trainable");
                layout.offset[i] = -1;
                layout.nf4_offset[i] = layout.nf4_bytes;
                layout.nf4_bytes += nf4_sizes(p.numel()).total_bytes();
                continue;
            }
            layout.offset[i] = layout.count;
            layout.count += p.numel();
        }
    };
    place(true, true);
    layout.decay_end = layout.count;
    place(true, false);
    layout.trainable_end = layout.count;
    place(false, false);
    return layout;
}

void check_weights_shape(const ModelWeights& weights, const ModelDesc& model) {
    for (const ParamDesc& p : model.params) {
        const NamedTensor* t = weights.find(p.name);
        const NamedTensor* alias = p.alias.empty() ? nullptr : weights.find(p.alias);
        if (!t) t = alias;
        if (!t)
            throw Error("weights file has no tensor '" + p.name + "' of shape " + shape_text(p.shape) + " (the model is " +
                        model.summary + "): " + shape_hint(model, p.name));
        if (t->shape != p.shape)
            throw Error("weights file has '" + t->name + "' of shape " + shape_text(t->shape) + " but the model needs " +
                        shape_text(p.shape) + ": " + shape_hint(model, p.name));
        if (static_cast<int64_t>(t->data.size()) != p.numel())
            throw Error("weights file's '" + t->name + "' holds " + std::to_string(t->data.size()) + " values but shape " +
                        shape_text(p.shape) + " needs " + std::to_string(p.numel()));
        if (alias && alias != t && (alias->shape != t->shape || alias->data != t->data))
            throw Error("weights file's '" + p.alias + "' differs from '" + p.name + "': this model ties them (nanoGPT's "
                        "weight tying), so they must be equal");
    }
    for (const NamedTensor& t : weights.tensors)
        if (model.find_param(t.name) < 0)
            throw Error("weights file has tensor '" + t.name + "' that " + model.summary + " does not have: " +
                        shape_hint(model, t.name));
}

namespace {

Nf4Tensor nf4_part(const ParamLayout& layout, size_t param, int64_t elements, const uint8_t* nf4_store) {
    if (!nf4_store) throw std::logic_error("param layout: an NF4 tensor without an NF4 store");
    return nf4_tensor(const_cast<uint8_t*>(nf4_store) + layout.nf4_offset[param], elements);
}

}  // namespace

void scatter_weights(const ModelDesc& model, const ParamLayout& layout, const ModelWeights& weights, float* store,
                     uint8_t* nf4_store) {
    check_weights_shape(weights, model);
    for (size_t i = 0; i < model.params.size(); ++i) {
        const ParamDesc& p = model.params[i];
        const NamedTensor* t = weights.find(p.name);
        if (!t) t = weights.find(p.alias);
        if (layout.nf4_offset[i] >= 0)
            quantize_nf4(t->data.data(), nf4_part(layout, i, p.numel(), nf4_store));
        else
            std::copy(t->data.begin(), t->data.end(), store + layout.offset[i]);
    }
}

namespace {

ModelWeights gather(const ModelDesc& model, const ParamLayout& layout, const float* store, bool trainable_only,
                    const uint8_t* nf4_store) {
    auto values = [&](size_t i) {
        const ParamDesc& p = model.params[i];
        if (layout.nf4_offset[i] < 0) {
            const float* begin = store + layout.offset[i];
            return std::vector<float>(begin, begin + p.numel());
        }
        std::vector<float> out(static_cast<size_t>(p.numel()));
        dequantize_nf4(nf4_part(layout, i, p.numel(), nf4_store), 0, p.numel(), Precision::fp32, out.data());
        return out;
    };
    ModelWeights weights;
    for (size_t i = 0; i < model.params.size(); ++i) {
        const ParamDesc& p = model.params[i];
        if (trainable_only && !p.trainable) continue;
        weights.tensors.push_back({p.name, p.shape, values(i)});
    }
    for (size_t i = 0; i < model.params.size(); ++i) {
        const ParamDesc& p = model.params[i];
        if (p.alias.empty() || (trainable_only && !p.trainable)) continue;
        weights.tensors.push_back({p.alias, p.shape, values(i)});
    }
    return weights;
}

}  // namespace

ModelWeights gather_weights(const ModelDesc& model, const ParamLayout& layout, const float* store,
                            const uint8_t* nf4_store) {
    return gather(model, layout, store, false, nf4_store);
}

ModelWeights gather_trainable(const ModelDesc& model, const ParamLayout& layout, const float* store) {
    return gather(model, layout, store, true, nullptr);
}

}  // namespace trainbench
