#pragma once
// Model parallelism by pipeline stages (--pipeline-stages P): a model's ops cut into P
// contiguous stages, each run by its own process. Between two stages exactly one tensor
// crosses: the stage before sends it forward, the stage after sends its gradient back.
//
// Where a model may be cut: a GPT between its blocks (the embedding stays with the first block,
// the final LayerNorm and the head with the last), an MLP or CNN before any Linear or
// convolution layer after the first. Among those places the split balances the stages' FLOPs
// (it minimises the largest stage's).
//
// A stage is a model of its own (stage_model): its ops, the parameters they read (the tied
// embedding on both the first and the last stage of a GPT, as Megatron's and DeepSpeed's
// TiedLayerSpec keep it), and, after the first stage, the tensor it receives as its input
// (tensor 0) with a gradient to send back; all but the last end in a pipeline_output op, whose
// "loss gradient" is the gradient received from the next stage.
#include <cstdint>
#include <string>
#include <vector>

#include "model/model_desc.hpp"
#include "trainbench/weights.hpp"

namespace trainbench {

struct StageSplit {
    // Stage s runs ops [first_op[s], first_op[s + 1]); first_op.back() is the model's op count.
    std::vector<int> first_op;
    // Per stage: its forward FLOPs per sample (the split's balance).
    std::vector<double> forward_flops;
    int stages() const { return static_cast<int>(first_op.size()) - 1; }
};

// The ops before which `model` may be cut (see above), in order.
std::vector<int> pipeline_cut_points(const ModelDesc& model);
// The most stages `model` can be cut into, and what limits it ("4 blocks", "3 layers").
int max_pipeline_stages(const ModelDesc& model);
std::string pipeline_unit_name(const ModelDesc& model);
// Forward FLOPs of op `o` for one sample (products and attention; element-wise ops count their
// elements).
double op_forward_flops(const ModelDesc& model, int o);
// Cuts `model` into `stages` stages; throws Error naming the limit when it has too few places to
// cut.
StageSplit split_into_stages(const ModelDesc& model, int stages);

// Stage s of `split` as a model of its own: parameters keep their names (and their order), so
// that a stage's weights are the full model's tensors of those names (stage_weights).
ModelDesc stage_model(const ModelDesc& model, const StageSplit& split, int stage);
// The tensors of `weights` (the whole model's) that stage model `stage` holds.
ModelWeights stage_weights(const ModelWeights& weights, const ModelDesc& stage);
// A flat buffer over a trainable store (gradients, or one optimizer-state buffer such as
// "optimizer.exp_avg") moved between the whole model's store order and a stage's: each trainable
// tensor the stage holds is copied from its place in one store to its place in the other. So a
// pipeline's checkpoint is the one a single process writes, and either resumes the other.
void whole_to_stage_store(const ModelDesc& whole, const float* whole_store, const ModelDesc& stage, float* stage_store);
void stage_to_whole_store(const ModelDesc& stage, const float* stage_store, const ModelDesc& whole, float* whole_store);

// GPipe's bubble: the fraction of a pipeline's time a stage idles, (P-1)/(m+P-1) for P stages
// and m micro-batches of equal cost.
double gpipe_bubble_fraction(int stages, int64_t micro_batches);

}  // namespace trainbench
