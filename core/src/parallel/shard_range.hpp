#pragma once
// ZeRO's partition of the flat parameter store: process r of N owns one contiguous slice of
// every parameter-sized array (optimizer state, and with stage 2 the reduced gradients). The
// first count % N processes own one element more, so process 0's slice is the largest and the
// slices tile [0, count) in rank order, as MPI_Allgatherv and MPI_Reduce_scatter lay them out.
#include <cstdint>

namespace trainbench {

struct ShardRange {
    int64_t begin = 0;
    int64_t end = 0;
    int64_t size() const { return end - begin; }
};

inline ShardRange shard_of(int64_t count, int rank, int ranks) {
    const int64_t base = count / ranks;
    const int64_t extra = count % ranks;
    const int64_t begin = rank * base + (rank < extra ? rank : extra);
    return {begin, begin + base + (rank < extra ? 1 : 0)};
}

}  // namespace trainbench
