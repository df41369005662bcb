#pragma once
// This process's part of a pipeline (--pipeline-stages P, model/pipeline_stages.hpp): its
// stage's engine driven through an update in the schedule's order (parallel/pipeline_schedule.hpp),
// its messages to and from the neighbouring stages over MPI, and what the stages do together
// once per update: sum the tied embedding's two parts, add up the gradient norm, evaluate, draw
// text samples, and gather the whole model's weights and checkpoints on process 0. Process s
// runs stage s.
#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/compute_engine.hpp"
#include "model/model_desc.hpp"
#include "model/pipeline_stages.hpp"
#include "parallel/pipeline_schedule.hpp"
#include "parallel/process_group.hpp"
#include "train/text_sampler.hpp"
#include "trainbench/metrics.hpp"

namespace trainbench {

// Where the runner takes an update's micro-batches from, in order, one at a time.
class MicroBatchSource {
public:
    virtual ~MicroBatchSource() = default;
    virtual const MicroBatch& next() = 0;
};

class PipelineRunner final : public TokenLogits {
public:
    // `engine` runs stage group.rank() of `whole` cut into group.size() stages; `world` holds
    // every copy of the pipeline. `zero_stage`: RunConfig::zero, by which the copies of a stage
    // each hold a part of its optimizer state (1 and up) and of its gradients (2).
    PipelineRunner(ComputeEngine& engine, ProcessGroup& world, ProcessGroup& group, const ModelDesc& whole,
                   PipelineSchedule schedule, int64_t step_size, int zero_stage);
    ~PipelineRunner();
    int stage() const { return stage_; }
    int stages() const { return split_.stages(); }
    bool last() const { return stage_ + 1 == stages(); }

    // One update of `micro_batches` micro-batches (the first of them already taken from `source`
    // as `first`) through this stage. Returns the loss sum on the last stage, 0 elsewhere.
    double run_update(int64_t micro_batches, const MicroBatch& first, MicroBatchSource& source, double normaliser,
                      double loss_scale);
    // After the update's micro-batches: the tied embedding's gradient on the first and last stage
    // becomes the sum of both stages' parts (nothing where no parameter is shared).
    void sum_shared_gradients();
    // This stage's part of the squared gradient norm, a shared tensor counted on the first stage
    // only; the stages' parts add up to the whole model's.
    double grad_norm_squared_part();
    // One evaluation chunk through the stages: the totals on the last stage, zeros elsewhere.
    EvalTotals evaluate(const MicroBatch& batch);
    // A text sample's next-token logits: the window through the stages, the last stage's logits
    // row sent back to the first, which draws (the others return false).
    bool logits_row(const MicroBatch& window, int64_t row, float* out) override;
    // The whole model's weights, in its state_dict order, on process 0 (every process calls it;
    // the others get none). Only the first pipeline copy, process 0's, sends its stages' parts:
    // the other copies hold the same weights.
    ModelWeights gather_weights();
    // What a checkpoint holds (checkpoint_tensors) for the whole model, on process 0: the weights,
    // each optimizer buffer in the whole model's store order, QLoRA's NF4 storage. So a pipeline's
    // checkpoint is the file one process would write. Every process calls it (with ZeRO, a stage's
    // copies gather their shards together); the others get none, and only the first copy's
    // stages send their parts.
    std::vector<NamedTensor> gather_checkpoint_tensors();

    // The last update, measured on this stage.
    const PipelineStageMetrics& times() const { return times_; }

private:
    ComputeEngine& engine_;
    ProcessGroup& group_;
    ModelDesc whole_;
    StageSplit split_;
    int stage_ = 0;
    bool first_copy_ = true;  // this process is in the pipeline copy whose first stage is process 0
    bool state_sharded_ = false;  // ZeRO: reading the optimizer state is a collective of the copies
    ModelDesc model_;  // this stage's
    PipelineSchedule schedule_;
    bool together_ = false;  // the last stage runs each backward with its forward
    int64_t output_per_sample_ = 0;
    std::vector<PipelineAction> actions_;
    std::vector<int64_t> counts_;  // per micro-batch of the update, its samples
    std::vector<int> shared_params_;  // this stage's parameters another stage holds too
    // The processes that hold them: this copy's first and last stage, or under ZeRO-2 (where
    // each holds a part) those stages of every copy.
    std::unique_ptr<ProcessGroup> shared_group_;
    PipelineStageMetrics times_;
};

}  // namespace trainbench
