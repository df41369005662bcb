#pragma once
#include <cstdint>
#include <limits>
#include <vector>

#include "trainbench/memory.hpp"

namespace trainbench {

// One optimizer update. Plain data, no heap: emitted from the hot loop.
// One pipeline stage's part of an update (--pipeline-stages), in milliseconds: its forward and
// backward passes, its waits for messages (receiving, and a send's buffer to be free again), and
// the span from its first action to its last. What the span holds besides the passes is the
// stage's idle time, the bubble. And its process's memory: the allocator's live peak since the
// run began and the plan's total.
// One forward or backward pass of a stage, in milliseconds from the stage's start of the update
// (the stages start together, after the previous update's collectives).
struct PipelinePass {
    bool forward = true;
    int64_t micro_batch = 0;
    double start_ms = 0.0;
    double end_ms = 0.0;
};

struct PipelineStageMetrics {
    std::vector<PipelinePass> passes;  // in the order the stage ran them
    double forward_ms = 0.0;
    double backward_ms = 0.0;
    double wait_ms = 0.0;
    double span_ms = 0.0;
    int64_t peak_bytes = 0;
    int64_t planned_bytes = 0;
    double idle_fraction() const { return span_ms > 0.0 ? 1.0 - (forward_ms + backward_ms) / span_ms : 0.0; }
};

struct StepMetrics {
    int64_t update = 0;            // 1-based index of this update in the run
    int64_t epoch = 0;             // 1-based epoch the update belongs to
    int64_t samples_seen = 0;      // training samples consumed so far, this update included
    double wall_seconds = 0.0;     // since the run started (monotonic)
    double loss = 0.0;             // sum of the global batch's losses / its loss terms (samples; tokens for a GPT)
    double learning_rate = 0.0;    // used for this update
    double grad_norm = 0.0;        // global L2 norm of the gradients before clipping
    double update_ms = 0.0;        // wall time of the whole update, all micro-batches
    // Several processes: the part of update_ms spent in collectives (stop agreement, gradient
    // sum, loss sum, ZeRO's gathers), waiting for the slowest process included; 0 for one.
    double comm_ms = 0.0;
    double samples_per_second = 0.0;  // this update's samples / update_ms
    int64_t batch_samples = 0;     // samples in this update's global batch
    double tokens_per_second = 0.0;   // language models: samples_per_second * context length; else 0
    // Model FLOPs utilisation: model FLOPs per second (RunPlan::flops_per_sample x samples/s)
    // over the device's measured peak; NaN when no peak is known.
    double mfu = std::numeric_limits<double>::quiet_NaN();
    double loss_scale = 1.0;       // fp16 dynamic loss scale used for this update
    bool skipped = false;          // fp16: gradients overflowed, update skipped
    int64_t skipped_updates = 0;   // running count
    MemoryReport memory;           // engine allocator by category
    int64_t rss_bytes = 0;         // process resident set size
    int64_t device_used_bytes = 0; // CUDA: cudaMemGetInfo total - free; 0 on CPU
    int64_t device_total_bytes = 0;
    // A pipeline's stages, in order (empty outside one).
    std::vector<PipelineStageMetrics> pipeline_stages;
};

// One evaluation on the validation split: at the end of each epoch, and every --eval-every
// updates within one (epoch_ended false).
struct EpochMetrics {
    int64_t epoch = 0;
    bool epoch_ended = true;
    int64_t update = 0;            // updates done when the epoch ended
    double train_loss = 0.0;       // mean over the epoch's updates so far, weighted by loss terms
    double val_loss = std::numeric_limits<double>::quiet_NaN();
    // Classification: share of samples; language models: share of next tokens predicted right.
    double val_accuracy = std::numeric_limits<double>::quiet_NaN();
    int64_t val_samples = 0;       // samples evaluated (windows for a language model)
    double wall_seconds = 0.0;
};

}  // namespace trainbench
