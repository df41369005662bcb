// The safetensors reader behind --init-weights, checkpoints and the app's weight import
// (io/safetensors.cpp), then the check of the tensors against a model and the copy into an
// engine's parameter store (model/param_layout.cpp), for an MLP (the fixture's 3-4-2) and a
// tiny GPT (tied embedding and head).
#include <map>
#include <vector>

#include "fuzz_support.hpp"
#include "model/build_model.hpp"
#include "model/param_layout.hpp"
#include "trainbench/weights.hpp"

using namespace trainbench;

namespace {

void load_into(const ModelDesc& model, const ModelWeights& weights) {
    try {
        check_weights_shape(weights, model);
    } catch (const Error&) {
        return;
    }
    const ParamLayout layout = make_param_layout(model);
    std::vector<float> store(static_cast<size_t>(layout.count));
    scatter_weights(model, layout, weights, store.data());
    const ModelWeights back = gather_weights(model, layout, store.data());
    for (const NamedTensor& tensor : back.tensors) {
        const NamedTensor* given = weights.find(tensor.name);
        FUZZ_CHECK(given != nullptr && given->shape == tensor.shape);
        FUZZ_CHECK(given->data.size() == tensor.data.size());
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const ModelDesc mlp = build_mlp({3, 4, 2}, Activation::relu, 2);
    static const ModelDesc gpt = build_gpt(GptShape{1, 1, 4, 4, 5});
    std::map<std::string, std::string> metadata;
    ModelWeights weights;
    try {
        weights.tensors = parse_safetensors(fuzz::bytes_of(data, size), "fuzz.safetensors", &metadata);
    } catch (const Error&) {
        return 0;
    }
    for (const NamedTensor& tensor : weights.tensors) {
        size_t count = 1;
        for (int64_t dim : tensor.shape) {
            FUZZ_CHECK(dim >= 0);
            count *= static_cast<size_t>(dim);
        }
        FUZZ_CHECK(tensor.data.size() == count);
        FUZZ_CHECK(count * sizeof(float) <= size);
    }
    load_into(mlp, weights);
    load_into(gpt, weights);
    return 0;
}
