#include "model/build_model.hpp"

#include "trainbench/error.hpp"

namespace trainbench {

ModelDesc build_model(const RunConfig& config, const Dataset& data) {
    if (config.model == ModelFamily::gpt) {
        // Text data sets (data/text_corpus.hpp) are not wired into the training loop's batches
        // yet, so only the engine API trains a GPT today; say so rather than misread the data.
        if (data.task != Task::classification || data.features != 0)
            throw Error("--model gpt needs a text data set (text:PATH or kjv), which the training loop does not load yet; "
                        "use --model mlp");
        GptShape shape;
        shape.n_layer = config.n_layer;
        shape.n_head = config.n_head;
        shape.n_embd = config.n_embd;
        shape.block_size = config.block_size;
        shape.vocab = data.num_classes;
        return build_gpt(shape);
    }
    std::vector<int64_t> sizes{data.features};
    sizes.insert(sizes.end(), config.hidden.begin(), config.hidden.end());
    sizes.push_back(data.output_width());
    return build_mlp(sizes, config.activation, data.task == Task::classification ? data.num_classes : 0);
}

}  // namespace trainbench
