#pragma once
// How N processes split count things into contiguous slices, process r taking slice r: the
// samples of a global batch (train/micro_batch_stream.cpp) and ZeRO's partition of the flat
// parameter store (optimizer state, and with stage 2 the reduced gradients). The first
// count % N processes take one more, so process 0's slice is the largest and the slices tile
// [0, count) in rank order, as MPI_Allgatherv and ProcessGroup::reduce_scatter lay them out.
#include <cstdint>

namespace trainbench {

struct ShardRange {
    int64_t begin = 0;
    int64_t end = 0;
    int64_t size() const { return end - begin; }
};

// The elements two ranges share; empty (size 0) when they are disjoint.
inline ShardRange overlap(ShardRange a, ShardRange b) {
    const int64_t begin = a.begin > b.begin ? a.begin : b.begin;
    const int64_t end = a.end < b.end ? a.end : b.end;
    return {begin, end > begin ? end : begin};
}

inline ShardRange shard_of(int64_t count, int rank, int ranks) {
    const int64_t base = count / ranks;
    const int64_t extra = count % ranks;
    const int64_t begin = rank * base + (rank < extra ? rank : extra);
    return {begin, begin + base + (rank < extra ? 1 : 0)};
}

}  // namespace trainbench
