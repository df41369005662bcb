#pragma once
// The processes that train one run together (data parallelism: --processes N, or mpirun -np N):
// this process's rank, how many there are, and the collectives the training loop needs. Every
// rank calls the same collectives in the same order; in a group of one each is the identity.
#include <cstdint>
#include <memory>
#include <vector>

namespace trainbench {

class ProcessGroup {
public:
    virtual ~ProcessGroup() = default;
    virtual int rank() const = 0;
    virtual int size() const = 0;
    // In place: every rank ends with the element-wise sum over the ranks (MPI_Allreduce).
    virtual void sum(float* values, int64_t n) = 0;
    virtual void sum(double* values, int64_t n) = 0;
    // ZeRO-2: `values` holds one block per rank, counts[r] elements for rank r, in rank order;
    // afterwards its first counts[rank()] elements are the element-wise sum over the ranks of
    // this rank's block (a reduce-scatter; over MPI, one MPI_Reduce per block), and the rest is
    // scratch.
    virtual void reduce_scatter(float* values, const std::vector<int64_t>& counts) = 0;
    // ZeRO (parallel/shard_range.hpp's slices of n elements): fills every slice of `values` with
    // its owner's values.
    virtual void all_gather(float* values, int64_t n) = 0;
    // True on every rank when `flag` is true on any (a stop request, a failure).
    virtual bool any(bool flag) = 0;

    // Point to point (pipeline stages' messages). send starts sending n floats to rank `to` and
    // returns at once: the buffer must stay unchanged until wait_send(values) has returned,
    // which waits for the send from that buffer (if any) to complete. receive returns once n
    // floats from rank `from` have arrived. Messages from one rank to another with the same tag
    // arrive in the order they were sent.
    virtual void send(const float* values, int64_t n, int to, int tag) = 0;
    virtual void wait_send(const float* values) = 0;
    virtual void receive(float* values, int64_t n, int from, int tag) = 0;
    // The ranks of this group that pass the same colour, as a group of their own (every rank of
    // this group calls it together); a rank passing -1 gets none.
    virtual std::unique_ptr<ProcessGroup> split(int colour) = 0;
};

// The group this process trains in: MPI_COMM_WORLD once join_process_world() (trainbench/
// processes.hpp) has joined an MPI job, otherwise the group of this process alone.
ProcessGroup& process_group();

}  // namespace trainbench
