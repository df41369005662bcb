#pragma once
// The run's stream of micro-batches in training order: epochs of seeded permutations, each
// cut into global batches and those into step_size contiguous micro-batches. Gathered inline
// (prefetch 0) or by a loader thread that keeps up to `prefetch` micro-batches ready ahead.
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "backend/compute_engine.hpp"
#include "trainbench/dataset.hpp"

namespace trainbench {

struct StreamPosition {
    int64_t epoch = 1;           // 1-based
    int64_t batch_in_epoch = 0;  // 0-based index of the next global batch
};

struct LoadedMicroBatch {
    MicroBatch batch;            // valid until the next call of next()
    int64_t epoch = 0;
    int64_t batch_in_epoch = 0;
    int64_t micro_index = 0;     // 0-based within its global batch
    int64_t micro_count = 0;     // micro-batches in its global batch (the same on every rank)
    int64_t global_count = 0;    // samples in its global batch, over all ranks
    bool last_in_epoch = false;
};

struct StreamSettings {
    int64_t global_batch = 1;
    int64_t step_size = 1;
    int64_t micro_capacity = 1;
    int64_t epochs = 1;
    bool shuffle = true;
    uint64_t seed = 0;
    int64_t prefetch = 0;
    // The engine keeps the training set on its device and gathers by index itself
    // (--preload-device): hand over indices only, skip the host gather.
    bool indices_only = false;
    // Language models: a sample is a window of this many input tokens (0 for other data).
    int64_t tokens_per_sample = 0;
    // Data parallelism: this process takes share `rank` of `ranks` of every global batch
    // (contiguous, as even as possible, larger first) and cuts it into the micro-batches.
    int rank = 0;
    int ranks = 1;
};

// Seed of epoch e's permutation, so a resumed run rebuilds the same order.
uint64_t epoch_shuffle_seed(uint64_t seed, int64_t epoch);

class MicroBatchStream {
public:
    MicroBatchStream(const DataSplit& train, const StreamSettings& settings, StreamPosition start);
    ~MicroBatchStream();
    MicroBatchStream(const MicroBatchStream&) = delete;
    MicroBatchStream& operator=(const MicroBatchStream&) = delete;

    // The next micro-batch; false when the last epoch is done.
    bool next(LoadedMicroBatch& out);

private:
    struct Slot {
        std::vector<float> x;
        std::vector<int32_t> tokens;  // language models: inputs; labels then hold the next tokens
        std::vector<int32_t> labels;
        std::vector<float> targets;
        std::vector<int64_t> indices;
        LoadedMicroBatch meta;
        bool end = false;  // marks the end of the stream
    };
    // Fills `slot` with the micro-batch at the cursor and advances it; false at the end.
    bool produce_next(Slot& slot);
    void loader_loop();

    const DataSplit& train_;
    StreamSettings settings_;
    // Producer's cursor
    StreamPosition cursor_;
    int64_t micro_in_batch_ = 0;
    std::vector<int64_t> order_;
    int64_t order_epoch_ = 0;

    std::vector<Slot> slots_;
    // Ring: slots [consumed, produced) are ready; the consumer holds slot `consumed - 1`.
    int64_t produced_ = 0;
    int64_t consumed_ = 0;
    bool holding_ = false;
    bool stopping_ = false;
    std::mutex mutex_;
    std::condition_variable changed_;
    std::thread loader_;
};

}  // namespace trainbench
