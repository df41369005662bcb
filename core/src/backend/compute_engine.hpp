#pragma once
// The seam between the training loop (train/) and the hardware (backend/cpu, backend/cuda).
// The loop owns batching, schedules, clipping decisions, the loss scaler, metrics and
// checkpoints; an engine owns parameters, gradients, optimizer state and activations, and
// allocates all of them up front so that an update allocates nothing.
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/model_desc.hpp"
#include "trainbench/dataset.hpp"
#include "trainbench/memory.hpp"
#include "trainbench/run_config.hpp"
#include "trainbench/weights.hpp"

namespace trainbench {

// Checkpoint tensors that hold an NF4 weight's storage (ComputeEngine::quantized_weights).
inline const std::string kNf4StoragePrefix = "nf4_storage.";

class ProcessGroup;
struct GraphPlan;

struct EngineSpec {
    ModelDesc model;
    OptimizerConfig optimizer;
    Precision precision = Precision::fp32;
    int64_t max_micro_batch = 1;       // buffers are sized for this many samples
    int64_t max_eval_batch = 1;
    // Every sample count the run will give forward_backward, evaluate and logits_row besides the
    // two above: an engine whose kernels are made per shape (the CPU's oneDNN products) makes
    // them, and plans their scratchpads, for each, so that none is made inside the training loop.
    std::vector<int64_t> sample_counts;
    bool gradient_checkpointing = false;
    bool fused = true;                 // RunConfig::fused
    CpuProducts cpu_products = CpuProducts::automatic;  // cpu only
    // CUDA, fused: each micro-batch's kernels replayed as a CUDA graph. Not a setting: the tests
    // turn it off to show that the graphs change no bit.
    bool cuda_graphs = true;
    int threads = 0;
    int device_index = 0;              // cuda only
    int64_t memory_limit_bytes = 0;    // behave like a device of this size; 0 = unlimited
    const Dataset* preload = nullptr;  // cuda --preload-device: copy train split once
    // Data parallelism with ZeRO (RunConfig::zero): this process's rank among shard_count; the
    // optimizer state (stage >= 1) holds only this rank's slice (parallel/shard_range.hpp).
    int zero_stage = 0;
    int shard_rank = 0;
    int shard_count = 1;
    // The group ZeRO's collectives run in (its rank and size are shard_rank and shard_count):
    // null for every process of the run; a pipeline stage's data-parallel copies otherwise.
    ProcessGroup* zero_group = nullptr;
    // A pipeline stage (model/pipeline_stages.hpp): how many micro-batches' activations it holds
    // at once between stage_forward and stage_backward.
    int pipeline_in_flight = 1;
};

// A micro-batch as the loop hands it over. x is [features x count] column-major on the host;
// indices are the samples' rows in the train split (used by engines that preloaded the data).
struct MicroBatch {
    const float* x = nullptr;
    const int32_t* labels = nullptr;   // classification
    const float* targets = nullptr;    // regression
    const int64_t* indices = nullptr;
    int64_t count = 0;
    // Token models: inputs [count x context]; labels then hold the next tokens, [count x context].
    const int32_t* tokens = nullptr;
};

struct EvalTotals {
    double loss_sum = 0.0;  // sum of per-sample losses
    int64_t correct = 0;    // classification only
};

class ComputeEngine {
public:
    virtual ~ComputeEngine() = default;

    virtual void set_weights(const ModelWeights& weights) = 0;
    virtual ModelWeights weights() const = 0;
    // The accumulated gradients under the parameters' names (as weights() names them), for
    // checks against a reference. Engines that cannot read them back say so (Error).
    virtual ModelWeights gradients() const;
    // A pipeline's tensor that two stages hold (the tied embedding): replaces its accumulated
    // gradient by the sum over `holders`, the processes that hold it. Under ZeRO-2 each process
    // holds only the part of it in its shard and adds that part alone, so `holders` must be every
    // copy of both stages. Engines without pipeline stages say so (Error).
    virtual void sum_gradient_of(const std::string& name, ProcessGroup& holders);
    // The squared norm of that tensor's gradient, as grad_norm_squared counts it (summed over the
    // ZeRO-2 shards).
    virtual double gradient_norm_squared_of(const std::string& name);

    virtual void zero_grad() = 0;
    // Adds d(loss_scale * sum_i loss_i / normaliser)/dθ to the gradients, where normaliser is
    // the global batch's sample count. Returns sum_i loss_i (unscaled).
    virtual double forward_backward(const MicroBatch& batch, double normaliser,
                                    double loss_scale) = 0;
    // Data parallelism: this process's share of the micro-batch is empty (the last, partial batch
    // of an epoch). It adds nothing, but takes part in any collective the other processes' backward
    // passes make (ZeRO-2's bucket reduce-scatters).
    virtual void skip_micro_batch() {}
    // Data parallelism: replaces the accumulated gradients by their sum over the processes of
    // `group` (one MPI_Allreduce over the flat gradient buffer; nothing left to do with ZeRO-2,
    // whose backward passes reduced each bucket into this rank's slice). Engines that cannot say so.
    virtual void sum_gradients(ProcessGroup& group);
    // Squared L2 norm over all gradients as accumulated (still multiplied by the loss scale);
    // inf or NaN when any gradient is not finite.
    virtual double grad_norm_squared() = 0;
    // One optimizer update with learning rate lr on the gradients times grad_multiplier (unscale
    // x clip coefficient). `step` is the 1-based optimizer step count. The gradients are not
    // read again before the next zero_grad.
    virtual void optimizer_step(double lr, double grad_multiplier, int64_t step) = 0;
    virtual EvalTotals evaluate(const MicroBatch& batch) = 0;
    // Runs the forward pass of `batch` and writes the logits of its first sample's row `row`
    // (a language model's position) to `out` (classes floats), for generating text. Engines
    // without it say so (Error).
    virtual void logits_row(const MicroBatch& batch, int64_t row, float* out);

    // A pipeline stage (EngineSpec::model from stage_model). Its messages, fp32 and sized for the
    // largest micro-batch, each in a buffer of its own: a stage after the first receives its input
    // in stage_input() (give it as MicroBatch::x) and finds the gradient to send back in
    // stage_input_gradient() after that micro-batch's backward; a stage before the last finds its
    // output in stage_output() after stage_forward and receives its gradient in
    // stage_output_gradient() before stage_backward. The last stage runs forward_backward.
    // Engines without pipeline stages say so (Error).
    virtual float* stage_input();
    virtual float* stage_input_gradient();
    virtual float* stage_output();
    virtual float* stage_output_gradient();
    // The forward pass of a stage, its activations kept in `slot` (one of
    // EngineSpec::pipeline_in_flight) until stage_backward(slot); slot -1: kept nowhere
    // (evaluation, stages before the last). The last stage runs it under GPipe, where it holds
    // several micro-batches: it then also computes the loss, returned as forward_backward
    // returns it, and its gradient, kept for the backward.
    // Of the last forward_backward, the milliseconds until its forward pass and loss were done.
    virtual double last_forward_ms() const { return 0.0; }
    virtual double stage_forward(const MicroBatch& batch, int slot, double normaliser = 1.0, double loss_scale = 1.0);
    virtual void stage_backward(int slot);

    // Optimizer state for checkpoints: named flat float tensors in a stable order, whole. With
    // ZeRO it is gathered from every process: all of them call it together.
    virtual std::vector<NamedTensor> optimizer_state() const = 0;
    virtual void set_optimizer_state(const std::vector<NamedTensor>& state) = 0;
    // QLoRA's NF4 base as stored, one tensor per NF4 weight named kNf4StoragePrefix + its name
    // (a byte per value), for checkpoints: weights() gives its dequantized values, which would
    // not quantize back to the same bits. Engines without NF4 weights have none.
    virtual std::vector<NamedTensor> quantized_weights() const { return {}; }
    virtual void set_quantized_weights(const std::vector<NamedTensor>&) {}

    virtual MemoryReport memory() const = 0;
    virtual void release_cache() = 0;

    // Brackets one whole update: wall clock on the CPU, synchronised events on CUDA.
    virtual void begin_update_timing() = 0;
    virtual double end_update_timing_ms() = 0;
    // Wall time the update so far spent in the engine's collectives (sum_gradients, ZeRO's
    // gathers), since begin_update_timing.
    virtual double collective_ms() const { return 0.0; }
    // CUDA engine: micro-batch passes replayed as CUDA graphs so far (0 elsewhere).
    virtual int64_t graph_launches() const { return 0; }

    // cudaMemGetInfo on CUDA (used, total); zeros on CPU.
    virtual std::pair<int64_t, int64_t> device_memory() const { return {0, 0}; }
};

// The CPU engine: the executor over the model description (plan/graph_plan.hpp), every model
// family in fp32, bf16 and fp16. Its planned bytes by category are exactly what it allocates.
BytesByCategory plan_cpu_engine_memory(const EngineSpec& spec);
// The graph plan it runs (its buffers, recompute slots, write modes).
GraphPlan plan_cpu_graph(const EngineSpec& spec);
// Its planned bytes, from the graph plan it runs (plan_cpu_graph(spec)).
BytesByCategory plan_cpu_engine_memory(const GraphPlan& graph);
// Bytes its update of `micro_batches` full micro-batches moves through memory (plan/memory_traffic.hpp),
// from the graph plan it runs (plan_cpu_graph(spec)) and the spec's optimizer.
int64_t plan_cpu_engine_traffic(const GraphPlan& graph, const OptimizerConfig& optimizer, int64_t micro_batches);
std::unique_ptr<ComputeEngine> make_cpu_engine(const EngineSpec& spec);

// The CUDA engine's planned bytes by category, exactly what it allocates
// (plan/cuda_device_plan.hpp): computed on the host, in every build, GPU or not.
BytesByCategory plan_cuda_engine_memory(const EngineSpec& spec);
// The same, from the graph plan it runs (cuda::plan_cuda_graph(spec)).
BytesByCategory plan_cuda_engine_memory(const EngineSpec& spec, const GraphPlan& graph);
#ifdef TRAINBENCH_WITH_CUDA
std::unique_ptr<ComputeEngine> make_cuda_engine(const EngineSpec& spec);
#endif

}  // namespace trainbench
