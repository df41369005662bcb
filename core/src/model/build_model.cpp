#include "model/build_model.hpp"

namespace trainbench {

ModelDesc build_model(const RunConfig& config, const Dataset& data) {
    if (config.model == ModelFamily::gpt) {
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
