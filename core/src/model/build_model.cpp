#include "model/build_model.hpp"

#include "trainbench/error.hpp"

namespace trainbench {

ModelDesc build_model(const RunConfig& config, const Dataset& data) {
    if (config.model == ModelFamily::gpt) {
        if (data.task != Task::language_model)
            throw Error("--model gpt is a language model and trains on text; use --dataset kjv or --dataset text:PATH");
        if (data.features != config.block_size)
            throw Error("internal: the text was cut into windows of " + std::to_string(data.features) +
                        " tokens, not --block-size " + std::to_string(config.block_size));
        GptShape shape;
        shape.n_layer = config.n_layer;
        shape.n_head = config.n_head;
        shape.n_embd = config.n_embd;
        shape.block_size = config.block_size;
        shape.vocab = data.num_classes;
        shape.lora.rank = config.lora_rank;
        shape.lora.alpha = config.lora_alpha;
        if (config.lora_rank > 0) shape.lora.targets = parse_lora_targets(config.lora_targets);
        shape.lora.nf4_base = config.lora_rank > 0 && config.lora_base == LoraBase::nf4;
        shape.lora.dora = config.lora_rank > 0 && config.dora;
        return build_gpt(shape);
    }
    if (data.task == Task::language_model)
        throw Error("'" + data.name + "' is a text corpus for a language model; use --model gpt");
    if (config.model == ModelFamily::cnn) {
        if (data.image_height == 0 || data.task != Task::classification)
            throw Error("--model cnn classifies images, and '" + data.name +
                        "' has none; use --dataset fashion-mnist or idx:DIR, or --model mlp");
        CnnShape shape;
        shape.height = data.image_height;
        shape.width = data.image_width;
        shape.channels = config.channels;
        shape.hidden = config.hidden;
        shape.classes = data.num_classes;
        shape.activation = config.activation;
        return build_cnn(shape);
    }
    std::vector<int64_t> sizes{data.features};
    sizes.insert(sizes.end(), config.hidden.begin(), config.hidden.end());
    sizes.push_back(data.output_width());
    return build_mlp(sizes, config.activation, data.task == Task::classification ? data.num_classes : 0);
}

}  // namespace trainbench
