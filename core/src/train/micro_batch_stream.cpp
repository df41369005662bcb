#include "train/micro_batch_stream.hpp"

#include <algorithm>
#include <numeric>

#include "parallel/shard_range.hpp"

namespace trainbench {

uint64_t epoch_shuffle_seed(uint64_t seed, int64_t epoch) {
    // splitmix64 of (seed, epoch): distinct, well-mixed streams per epoch.
    uint64_t z = seed + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(epoch + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

MicroBatchStream::MicroBatchStream(const DataSplit& train, const StreamSettings& settings, StreamPosition start)
    : train_(train), settings_(settings), cursor_(start) {
    order_.resize(static_cast<size_t>(train.count));
    const size_t slot_count = settings.prefetch > 0 ? static_cast<size_t>(settings.prefetch) + 1 : 1;
    slots_.resize(slot_count);
    const auto capacity = static_cast<size_t>(settings.micro_capacity);
    const auto window = static_cast<size_t>(settings.tokens_per_sample);
    for (auto& slot : slots_) {
        if (window > 0) {
            slot.tokens.resize(capacity * window);
            slot.labels.resize(capacity * window);
        } else if (!settings.indices_only) {
            slot.x.resize(capacity * static_cast<size_t>(train.features));
        }
        if (!train.labels.empty()) slot.labels.resize(capacity);
        if (!train.targets.empty()) slot.targets.resize(capacity);
        slot.indices.resize(capacity);
    }
    if (settings.prefetch > 0) loader_ = std::thread([this] { loader_loop(); });
}

MicroBatchStream::~MicroBatchStream() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
    }
    changed_.notify_all();
    if (loader_.joinable()) loader_.join();
}

bool MicroBatchStream::produce_next(Slot& slot) {
    const int64_t samples = train_.count;
    if (cursor_.epoch > settings_.epochs || samples == 0) {
        slot.end = true;
        return false;
    }
    if (order_epoch_ != cursor_.epoch) {
        std::iota(order_.begin(), order_.end(), int64_t{0});
        if (settings_.shuffle) seeded_permutation(order_, epoch_shuffle_seed(settings_.seed, cursor_.epoch));
        order_epoch_ = cursor_.epoch;
    }
    const int64_t start = cursor_.batch_in_epoch * settings_.global_batch;
    const int64_t batch = std::min(settings_.global_batch, samples - start);
    // This rank's share of the global batch; rank 0's is the largest, so every rank cuts its
    // share into the same number of micro-batches and meets the others in every collective
    // (a share smaller than that, in a small last batch, has empty micro-batches).
    const ShardRange share = shard_of(batch, settings_.rank, settings_.ranks);
    const int64_t share_start = start + share.begin;
    const int64_t largest_share = shard_of(batch, 0, settings_.ranks).size();
    const int64_t parts = std::min(settings_.step_size, largest_share);
    const int64_t base = share.size() / parts, extra = share.size() % parts;
    const int64_t k = micro_in_batch_;
    const int64_t count = base + (k < extra ? 1 : 0);
    const int64_t offset = share_start + k * base + std::min(k, extra);

    std::copy_n(order_.begin() + offset, count, slot.indices.begin());
    float* x = settings_.indices_only ? nullptr : slot.x.data();
    int32_t* labels = settings_.indices_only || slot.labels.empty() ? nullptr : slot.labels.data();
    float* targets = settings_.indices_only || slot.targets.empty() ? nullptr : slot.targets.data();
    const int32_t* tokens = nullptr;
    if (settings_.tokens_per_sample > 0) {
        gather_token_windows(train_, settings_.tokens_per_sample, slot.indices.data(), count, slot.tokens.data(),
                             slot.labels.data());
        tokens = slot.tokens.data();
        labels = slot.labels.data();
    } else if (!settings_.indices_only) {
        gather_samples(train_, slot.indices.data(), count, x, labels, targets);
    }
    slot.end = false;
    auto& meta = slot.meta;
    meta.batch = MicroBatch{x, labels, targets, slot.indices.data(), count, tokens};
    meta.epoch = cursor_.epoch;
    meta.batch_in_epoch = cursor_.batch_in_epoch;
    meta.micro_index = k;
    meta.micro_count = parts;
    meta.global_count = batch;
    meta.last_in_epoch = start + batch >= samples;

    if (++micro_in_batch_ == parts) {
        micro_in_batch_ = 0;
        if (meta.last_in_epoch) {
            ++cursor_.epoch;
            cursor_.batch_in_epoch = 0;
        } else {
            ++cursor_.batch_in_epoch;
        }
    }
    return true;
}

void MicroBatchStream::loader_loop() {
    const auto slot_count = static_cast<int64_t>(slots_.size());
    for (;;) {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return stopping_ || produced_ - consumed_ + (holding_ ? 1 : 0) < slot_count; });
        if (stopping_) return;
        Slot& slot = slots_[static_cast<size_t>(produced_ % slot_count)];
        lock.unlock();
        const bool more = produce_next(slot);  // the consumer never touches a slot not yet produced
        lock.lock();
        ++produced_;
        changed_.notify_all();
        if (!more) return;
    }
}

bool MicroBatchStream::next(LoadedMicroBatch& out) {
    if (settings_.prefetch == 0) {
        Slot& slot = slots_.front();
        if (!produce_next(slot)) return false;
        out = slot.meta;
        return true;
    }
    std::unique_lock<std::mutex> lock(mutex_);
    holding_ = false;  // the caller is done with the previous micro-batch
    changed_.notify_all();
    changed_.wait(lock, [&] { return produced_ > consumed_; });
    Slot& slot = slots_[static_cast<size_t>(consumed_ % static_cast<int64_t>(slots_.size()))];
    ++consumed_;
    holding_ = true;
    if (slot.end) return false;
    out = slot.meta;
    return true;
}

}  // namespace trainbench
