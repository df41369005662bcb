#pragma once
// A model as plain data: its parameter tensors (torch state_dict names and shapes, how they are
// initialised, whether AdamW decays them) and a flat list of ops, each naming the tensors it
// reads and writes, in the spirit of llm.c's explicit forward/backward. Builders (mlp_model.cpp,
// gpt_model.cpp) produce it; the engines, the planner, weight files, checkpoints and the run
// plan read it, so a model's layout is described once.
#include <cstdint>
#include <string>
#include <vector>

#include "trainbench/run_config.hpp"

namespace trainbench {

enum class InitRule {
    uniform,  // U(-scale, scale): torch.nn.Linear's default with scale 1/sqrt(fan_in)
    normal,   // N(0, scale^2): nanoGPT's init
    zeros,
    ones,
    row_norms,  // the Euclidean norms of the rows of param ParamDesc::norm_of (DoRA's magnitude)
};

struct ParamDesc {
    std::string name;              // torch state_dict name
    std::vector<int64_t> shape;    // as torch stores it (nn.Linear weight is [out, in])
    bool decay = true;             // AdamW's weight decay applies (nanoGPT: dim() >= 2)
    InitRule init = InitRule::zeros;
    float init_scale = 0.0f;
    std::string alias;             // a second state_dict name for the same tensor (tied lm_head)
    // Frozen tensors (a LoRA fine-tune's base weights) get no gradient and no optimizer state;
    // nothing upstream of the trainable ones needs a gradient either, as torch's autograd prunes.
    bool trainable = true;
    // Frozen and stored as QLoRA's NF4 (precision/nf4.hpp) outside the flat parameter store: a
    // 4-bit base weight that each product dequantizes right before it multiplies.
    bool nf4 = false;
    int norm_of = -1;  // InitRule::row_norms: the param whose rows it starts as the norms of
    int64_t numel() const;
};

// An intermediate tensor of one micro-batch: elements per sample; fp32 even in mixed precision
// when it holds statistics (LayerNorm's mean and rstd), otherwise the run's storage type.
struct TensorDesc {
    std::string name;
    int64_t per_sample = 0;
    bool statistics = false;
};

enum class OpKind {
    linear,         // out = in W^T (+ b); params {W [out, in], b [out]} or {W}
    activation,     // out = f(in), element-wise
    embedding,      // out = wte[tokens] + wpe[position]; reads the micro-batch's tokens
    layernorm,      // out, mean, rstd = LayerNorm(in); params {weight, bias}
    attention,      // causal multi-head self-attention over qkv; out, probabilities
    residual_add,   // out = in0 + in1
    cross_entropy,  // softmax cross-entropy of in against the micro-batch's labels
    mean_squared_error,
    conv2d,         // NCHW out = conv(in) + b, stride 1, same padding; params {W [out, in, k, k], b [out]}
    max_pool,       // NCHW 2x2 max pooling, stride 2
    // A frozen Linear with a LoRA adapter (PEFT's lora.Linear): out = in W^T + b +
    // lora_scale * (in A^T) B^T; params {W [out, in], b [out], A [r, in], B [out, r]}; outputs
    // {out, in A^T [rows, r]}, the second saved for the backward of B. With DoRA (nn/dora.hpp)
    // a fifth param, the magnitude m [out], and a third output, the unscaled result before m.
    lora_linear,
    // A pipeline stage's end (model/pipeline_stages.hpp): its input is the stage's output, sent
    // to the next stage; in the backward pass it takes the place of the loss, its gradient the
    // one the next stage sends back.
    pipeline_output,
};

struct OpDesc {
    OpKind kind = OpKind::linear;
    std::vector<int> inputs;   // tensor ids
    std::vector<int> outputs;  // tensor ids; outputs[0] is the result, the rest saved aux
    std::vector<int> params;   // param ids
    Activation activation = Activation::relu;  // activation ops
    int64_t rows_per_sample = 1;  // rows of [rows, width] activations one sample contributes
    int64_t heads = 0;            // attention
    int64_t height = 0, width = 0;  // conv2d, max_pool: the input's image size
    float lora_scale = 0.0f;      // lora_linear: lora_alpha / rank
    int segment = -1;             // gradient checkpointing unit (a GPT block, MLP layers)
};

// A lora_linear op with DoRA's magnitude: its fifth param (and third output).
inline bool has_dora_magnitude(const OpDesc& op) { return op.kind == OpKind::lora_linear && op.params.size() == 5; }

struct ModelDesc {
    ModelFamily family = ModelFamily::mlp;
    std::string summary;               // "MLP 2-128-128-3", "GPT L4 H4 C128 T128 V65", "CNN 1x28x28 c32-c64 128-10"
    bool token_input = false;          // samples are token windows (gpt), else float features
    int64_t input_per_sample = 0;      // features or tokens
    int64_t loss_terms_per_sample = 1; // targets per sample: 1, or the context length
    int64_t classes = 0;               // logits per loss term (0: regression)
    // A pipeline stage after the first: its input (tensor 0) came from the stage before, which
    // needs its gradient back.
    bool input_gradient = false;
    // Model FLOPs of one sample's forward and backward pass, the numerator of MFU: GPT,
    // llm.c's (6N + 6 L C T) per token; MLP, 6 per weight (2 forward, 4 backward).
    double training_flops_per_sample = 0.0;
    std::vector<ParamDesc> params;     // in state_dict order
    std::vector<TensorDesc> tensors;
    std::vector<OpDesc> ops;

    int64_t parameter_count() const;
    int64_t trainable_parameter_count() const;
    // Index of the parameter named `name` (or aliased so), -1 when there is none.
    int find_param(const std::string& name) const;
};

}  // namespace trainbench
