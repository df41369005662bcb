#include "backend/backend_support.hpp"

namespace trainbench {

Backend backend_for_device(const std::string& device) {
    return device.rfind("cuda", 0) == 0 ? Backend::cuda : Backend::cpu;
}

std::string unsupported_op(Backend backend, OpKind kind) {
    if (backend == Backend::cpu) return {};
    switch (kind) {
        case OpKind::conv2d:
        case OpKind::max_pool:
            return "the CUDA engine has no convolution kernels yet: train the CNN with --device cpu, or use --model mlp on "
                   "the GPU";
        case OpKind::lora_linear:
            return "the CUDA engine has no LoRA kernels yet: fine-tune with --device cpu, or leave out --lora-rank on the GPU";
        case OpKind::pipeline_output: return unsupported_feature(backend, TrainingFeature::pipeline_stages);
        case OpKind::linear:
        case OpKind::activation:
        case OpKind::embedding:
        case OpKind::layernorm:
        case OpKind::attention:
        case OpKind::residual_add:
        case OpKind::cross_entropy:
        case OpKind::mean_squared_error: return {};
    }
    return {};
}

std::string unsupported_in(Backend backend, const ModelDesc& model) {
    if (model.input_gradient) return unsupported_feature(backend, TrainingFeature::pipeline_stages);
    for (const OpDesc& op : model.ops)
        if (std::string why = unsupported_op(backend, op.kind); !why.empty()) return why;
    return {};
}

std::string unsupported_feature(Backend backend, TrainingFeature feature) {
    if (backend == Backend::cpu) return {};
    switch (feature) {
        case TrainingFeature::several_processes:
            return "the CUDA engine trains in one process only for now: use --device cpu with --processes, or --processes 1 "
                   "on the GPU";
        case TrainingFeature::zero:
            return "the CUDA engine does not shard its optimizer state (ZeRO) yet: use --device cpu with --zero, or --zero 0 "
                   "on the GPU";
        case TrainingFeature::pipeline_stages:
            return "the CUDA engine runs no pipeline stages yet: use --device cpu with --pipeline-stages, or leave it at 1 "
                   "on the GPU";
    }
    return {};
}

}  // namespace trainbench
