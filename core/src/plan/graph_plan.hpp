#pragma once
// The planner: turns a model description, the micro-batch and the techniques into the schedule
// of a micro-batch (forward, recompute, backward) and every buffer the engine holds, with its
// category, size and role. The engine acquires exactly the buffers listed here (binding each by
// its role), and the run plan sums the same list, so the memory plan equals the allocation by
// construction.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "model/model_desc.hpp"
#include "model/param_layout.hpp"
#include "nn/activation.hpp"
#include "nn/conv2d.hpp"
#include "nn/linear.hpp"
#include "nn/packed_weights.hpp"
#include "parallel/shard_range.hpp"
#include "plan/planned_buffer.hpp"
#include "trainbench/memory.hpp"
#include "trainbench/run_config.hpp"

namespace trainbench {

// The tensor activation op `act`'s backward reads f' from: its input z where the activation
// needs it (GELU), its output a otherwise. Both engines save that one for the backward.
inline int activation_saved_tensor(const OpDesc& act) {
    return activation_needs_input(act.activation) ? act.inputs[0] : act.outputs[0];
}

// The kernels a linear op's products run in on the CPU (RunConfig::cpu_products made concrete
// for this CPU and precision): Eigen's fp32 product on weights packed once per update; oneDNN's
// fp32 product on the weights as stored (16-bit runs: widened once per update); oneDNN's bf16
// product on the 16-bit activations and working copy as stored (nn/onednn_linear.hpp).
enum class ProductKernel { eigen, onednn_f32, onednn_bf16 };
ProductKernel choose_product_kernel(CpuProducts requested, Precision precision);
// For the plan's summary: "oneDNN bf16 (avx512_core_amx)", "Eigen fp32", ...
std::string describe(ProductKernel kernel);

// Eigen's kernels: W packed for the forward product and, when the op's input needs a gradient,
// W^T for it. oneDNN's read W where it is stored and need only what a 16-bit run widens once
// per update: W and the bias for fp32 products, the bias for bf16 ones.
struct PackedLinear {
    PackedLayout forward;
    int64_t forward_offset = -1;  // floats into the packed block; the bias follows W
    PackedLayout transposed;
    int64_t transposed_offset = -1;  // -1: the input needs no gradient
    bool onednn = false;             // the op's products run in oneDNN (the fields below)
    bool input_grad = false;
    int64_t widened_weight_offset = -1;  // floats into the packed block; -1: none
    int64_t widened_bias_offset = -1;
    // QLoRA: W is stored as NF4 and dequantized into the NF4 tile right before each product
    // (Eigen's: then packed into the NF4 packed tile); nothing of it is packed or widened.
    bool nf4 = false;
    // DoRA: where this op's row norms ||W + s B A|| live between its forward and backward
    // (floats into the DoRA norms block); -1: not DoRA.
    int64_t dora_norm_offset = -1;
    // Its backward's scratch: the scaled output gradient at 0, in 16-bit runs the widened
    // unscaled result at dora_unscaled_offset; the products and the adapter use what follows
    // dora_scratch_prefix.
    int64_t dora_unscaled_offset = 0;
    int64_t dora_scratch_prefix = 0;
};

struct GraphPlan {
    ModelDesc model;
    ParamLayout params;
    int64_t micro_batch = 0;  // samples the buffers hold (training and evaluation)
    // Every sample count the engine will be given (micro_batch among them): kernels made per
    // shape (oneDNN's products) are made, and their scratchpads planned, for each.
    std::vector<int64_t> sample_counts{};
    int threads = 1;
    int optimizer_slots = 0;
    // The slice of the trainable parameters ([0, params.trainable_end)) whose optimizer state
    // this process holds: all of them, or its ZeRO shard.
    ShardRange optimizer_shard;
    bool checkpointing = false;
    // fp32, or the 16-bit format (bf16, fp16) of mixed precision: the activations and a working
    // copy of the weights are stored in it, kernels compute in fp32 (on widened copies, or on the
    // 16-bit values themselves with fp32 accumulation: oneDNN's bf16 products), and the optimizer
    // updates fp32 master weights. The fields above and below keep their fp32
    // meanings (elements, floats); the 16-bit run's sizes are the *_bytes and *_staging_* ones.
    Precision precision = Precision::fp32;

    // Per tensor: elements at micro_batch samples; its own buffer (kept) or a shared
    // recompute slot (checkpointing drops it and rebuilds its segment before the backward).
    std::vector<int64_t> tensor_elements;
    std::vector<int> tensor_slot;     // -1: its own buffer (or its alias's)
    std::vector<int> tensor_alias;    // in-place results: the tensor whose storage it takes; -1: none
    std::vector<int64_t> slot_elements;
    std::vector<int64_t> slot_bytes;  // its largest tensor at that tensor's element size
    int last_segment = -1;            // still resident after the forward: never recomputed
    // Per segment: whether any of its tensors lives in a recompute slot. A segment without one
    // dropped nothing, so its backward needs no rebuild (3 ReLU layers of an MLP: the last
    // segment's product and activation are one fused op whose output crosses to the head).
    std::vector<char> segment_uses_slots;
    bool rebuildable(int segment) const {
        return segment >= 0 && static_cast<size_t>(segment) < segment_uses_slots.size() &&
               segment_uses_slots[static_cast<size_t>(segment)] != 0;
    }
    // Whether a backward right after the forward runs this segment's forward ops again: a
    // segment that dropped something and whose tensors the slots no longer hold.
    bool rebuilt_in_backward(int segment) const {
        return checkpointing && rebuildable(segment) && segment != last_segment;
    }

    // Gradients of intermediate tensors share one workspace block, at offsets from their
    // lifetimes in the backward pass (first fit); -1 where no gradient is needed.
    std::vector<int64_t> grad_offset;
    int64_t grad_floats = 0;

    // ZeRO-2 over several processes: the backward pass writes the parameters' gradients into
    // buckets, one per op that completes some (the last op of the backward to write each of its
    // parameters), placed in one per-micro-batch block by their lifetimes in the backward (first
    // fit, as the activation gradients). Right after that op the bucket is reduce-scattered and
    // each process adds its part into its shard of the gradients (optimizer_shard's slice of the
    // flat store), the only gradient buffer that outlives the micro-batch. A bucket packs its
    // parameters in flat-store order, so each process's part of it is one contiguous run, as
    // ProcessGroup::reduce_scatter lays blocks out. Empty otherwise: the backward writes the whole flat
    // gradient, which the update sums with one allreduce.
    struct GradientBucket {
        int op = -1;                  // the op after whose backward it is complete
        std::vector<int> params;      // in flat-store order
        int64_t offset = 0;           // floats into the bucket block
        int64_t floats = 0;           // the parameters' elements, packed
        std::vector<int64_t> counts;  // per process, in rank order: its elements in that process's shard
    };
    std::vector<GradientBucket> gradient_buckets;  // in the order the backward completes them
    std::vector<int> op_bucket;                    // per op: the bucket it completes, -1: none
    std::vector<int64_t> param_bucket_offset;      // per param: floats into the bucket block
    int64_t bucket_floats = 0;
    bool reduces_in_backward() const { return !gradient_buckets.empty(); }
    // Floats of the persistent gradient buffer: the trainable part of the flat store, or with
    // buckets the shard.
    int64_t gradient_floats() const { return reduces_in_backward() ? optimizer_shard.size() : params.trainable_end; }
    // Floats of the fp32 weights: all of them, or in 16-bit runs the trainable ones' master
    // copy (frozen weights are kept in the run's working precision only).
    int64_t fp32_weight_floats() const { return sixteen_bit() ? params.trainable_end : params.count; }

    // Per op: whether its backward overwrites (first writer) or adds to each input's gradient,
    // and, in an update's first micro-batch, to each parameter's gradient.
    std::vector<std::vector<GradientWrite>> input_write;
    std::vector<std::vector<GradientWrite>> first_param_write;
    // How op o's backward writes its parameter k's gradient: as planned in an update's first
    // micro-batch (`first`) and into ZeRO-2's buckets, which start afresh each micro-batch; added
    // to what earlier micro-batches left otherwise.
    GradientWrite param_write(int o, size_t k, bool first) const {
        return first || reduces_in_backward() ? first_param_write[static_cast<size_t>(o)][k] : GradientWrite::accumulate;
    }

    // --fused on: element-wise ops computed inside a neighbour's kernel in the forward pass. A
    // product (linear, convolution) applies the activation that alone reads its output in its
    // epilogue; a residual add normalises its sum for the LayerNorm that reads it in the same
    // pass. Per op: the op whose kernel computes it (-1: it runs itself), and the op its own
    // kernel also computes (-1: none). Fused pairs share a checkpointing segment, so a
    // recomputed segment rebuilds both. --fused off runs every op alone, attention's scale, mask
    // and softmax as passes of their own, and the optimizer op by op (optimizer_step_eager_cpu).
    bool fused = true;
    std::vector<int> fused_into;
    std::vector<int> fused_with;
    // --fused off: the optimizer's temporaries (Adam's denom, ...), a persistent workspace, and
    // each trainable tensor's range in the optimizer's shard, which it updates one at a time.
    int64_t optimizer_scratch_floats = 0;
    std::vector<ShardRange> optimizer_tensors;

    ProductKernel products = ProductKernel::eigen;  // of the linear ops (conv2d and LoRA: Eigen)
    std::vector<PackedLinear> packed;  // per op (linear ops only)
    int64_t packed_floats = 0;
    // oneDNN's scratchpad, per member of the worker team (a region each, persistent workspace).
    int64_t onednn_scratchpad_bytes = 0;
    // QLoRA: one NF4 weight at a time dequantized as its products read it (bf16 codes for
    // oneDNN's bf16 products, fp32 otherwise), and for Eigen's products packed; persistent
    // workspace, each as large as the largest NF4 weight needs.
    int64_t nf4_tile_bytes = 0;
    int64_t nf4_packed_tile_floats = 0;
    int64_t dora_norm_floats = 0;  // DoRA: every DoRA op's norms (persistent workspace)
    int64_t scratch_floats = 0;        // the largest kernel scratch
    int64_t token_elements = 0;        // int32 inputs and targets of a token micro-batch

    // 16-bit runs: fp32 copies a kernel works on. An op's 16-bit inputs k = 0, 1 are widened into
    // input staging k and its 16-bit outputs k = 0, 1 computed in output staging k before they
    // are rounded into storage (a third output, DoRA's unscaled result, goes through the
    // scratch); its backward widens each saved tensor it reads into the staging
    // of the role that tensor had in the forward. A linear op's W and b are widened into the
    // weight staging to be packed (Eigen's products). Kernels that read or write the 16-bit
    // storage themselves (fused attention; oneDNN's bf16 products, their outputs when no
    // epilogue follows) are not staged. All zero in fp32 runs.
    std::array<int64_t, 2> input_staging_floats{};
    std::array<int64_t, 2> output_staging_floats{};
    int64_t weight_staging_floats = 0;

    // A pipeline stage (model/pipeline_stages.hpp): floats of each of its two fp32 message
    // buffers on either side (the input and its gradient, the output and its gradient; 0: none), and how
    // many micro-batches' activations it holds at once (between a micro-batch's forward and its
    // backward; 1 outside a pipeline).
    int64_t stage_input_floats = 0;
    int64_t stage_output_floats = 0;
    int in_flight = 1;
    // The last stage of a pipeline holding several micro-batches (GPipe): each keeps its loss's
    // gradient (fp32, the loss input's elements) from its forward to its backward.
    bool keeps_loss_gradient = false;

    // Every allocation, persistent ones first (the weights: fp32, or fp32 master weights and the
    // 16-bit working copy; QLoRA's NF4 store; gradients; optimizer state; packed weights; the NF4
    // tiles; DoRA's norms; oneDNN's scratchpads when it runs the products; a stage's messages);
    // per-micro-batch ones after `first_step_buffer`: what a micro-batch keeps from its forward
    // to its backward (its tokens, the tensors with buffers of their own, a loss gradient kept
    // by the last stage under GPipe), `kept_buffers` of
    // them, once per micro-batch in flight; then from `first_pass_buffer` on what a pass needs
    // while it runs (recompute slots; activation gradients; the gradient bucket block, when
    // planned; the kernels' scratch; in 16-bit runs the stagings).
    std::vector<PlannedBuffer> buffers;
    size_t first_step_buffer = 0;
    size_t kept_buffers = 0;
    size_t first_pass_buffer = 0;
    BytesByCategory planned_bytes() const;

    int64_t rows(const OpDesc& op, int64_t samples) const { return samples * op.rows_per_sample; }
    // Parameter p's elements in the flat store.
    ShardRange param_range(int p) const {
        const int64_t begin = params.offset[static_cast<size_t>(p)];
        return {begin, begin + model.params[static_cast<size_t>(p)].numel()};
    }
    bool sixteen_bit() const { return precision != Precision::fp32; }
    // Floats parameter p takes in the weight staging: NF4 weights are dequantized into the NF4
    // tile instead.
    int64_t staged_floats(int p) const {
        const ParamDesc& d = model.params[static_cast<size_t>(p)];
        return d.nf4 ? 0 : d.numel();
    }
    // Fused attention in a bf16 run whose products run in oneDNN multiplies in oneDNN too
    // (attention_forward_onednn); otherwise in Eigen.
    bool attention_in_onednn() const { return fused && products == ProductKernel::onednn_bf16; }
    // A 16-bit run's linear op on oneDNN's fp32 products: its members widen their rows of its
    // 16-bit input and round their rows of the output themselves (onednn_linear_forward_16bit_rows).
    bool widens_input_rows(const OpDesc& op) const {
        return sixteen_bit() && products == ProductKernel::onednn_f32 && op.kind == OpKind::linear &&
               stored_16bit(op.inputs[0]);
    }
    // --fused on in a 16-bit run: attention reads and writes its 16-bit tensors itself
    // (attention_forward_16bit, or attention_forward_onednn), as the planner's stagings assume.
    bool attention_in_storage(const OpDesc& op) const;
    // Whether op a's backward rounds its input gradient straight into the bf16 codes the linear
    // op before it (a - 1) reads as dY (onednn_linear_takes_dy_codes), at `samples` samples: a
    // GELU/ReLU with a 16-bit saved tensor, or attention in oneDNN, right after a oneDNN linear
    // in the same checkpoint segment (no rebuild between the two backwards reuses the buffers).
    // The fp32 gradient is then never written, and the product has no rounding pass of its own.
    bool hands_dy_codes(int a, int64_t samples) const;
    // Whether tensor t is stored in 16 bits: in a 16-bit run, all but statistics (LayerNorm's
    // mean and rstd stay fp32, as llm.c keeps them).
    bool stored_16bit(int t) const { return sixteen_bit() && !model.tensors[static_cast<size_t>(t)].statistics; }
    int64_t element_bytes(int t) const { return stored_16bit(t) ? 2 : 4; }
};

// ZeRO: shard_rank and shard_count give the optimizer state's slice; shard_gradients (stage 2)
// also reduces the gradients into that slice during the backward pass (gradient_buckets).

// A conv2d op's shape: channels from its weight [out, in, k, k], the image from the op.
ConvShape conv_shape(const ModelDesc& model, const OpDesc& op);

// What the planner is asked for besides the model and the micro-batch.
struct PlanOptions {
    int threads = 1;
    OptimizerConfig optimizer;
    bool checkpointing = false;
    Precision precision = Precision::fp32;
    bool fused = true;
    ProductKernel products = ProductKernel::eigen;
    int shard_rank = 0;
    int shard_count = 1;
    bool shard_gradients = false;
    // The sample counts besides micro_batch the engine will be given (GraphPlan::sample_counts).
    std::vector<int64_t> sample_counts{};
    int in_flight = 1;  // GraphPlan::in_flight
};

GraphPlan make_graph_plan(const ModelDesc& model, int64_t micro_batch, const PlanOptions& options);

// A trainable parameter a 16-bit run widens once per update for its op's fp32 products (a
// linear op's W or bias on oneDNN, PackedLinear's widened offsets), and where its widened copy
// goes in the packed block. The fused optimizer step writes these widened, without their
// 16-bit codes (optim/optimizer_step.hpp, WorkingCopy::widened). Sorted by place in the store.
struct WidenedTrainableParam {
    int param = -1;
    int64_t packed_offset = 0;  // floats into the packed block
};
std::vector<WidenedTrainableParam> widened_trainable_params(const GraphPlan& plan);

// Gradient checkpointing: how many segments run their forward ops again in every backward (the
// executor's rule, exec/gradient_checkpointing.cpp: each segment but the one still resident after
// the forward); 0 without checkpointing.
int rebuilt_segments(const GraphPlan& plan);

}  // namespace trainbench
