// The MPI job this process may belong to (trainbench/processes.hpp) and its collectives
// (parallel/process_group.hpp). Without MPI, or when not launched by mpirun, a world of one.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "parallel/process_group.hpp"
#include "parallel/shard_range.hpp"
#include "trainbench/error.hpp"
#include "trainbench/processes.hpp"

#ifdef TRAINBENCH_WITH_MPI
#include <mpi.h>
#endif

namespace trainbench {
namespace {

class SingleProcessGroup final : public ProcessGroup {
public:
    int rank() const override { return 0; }
    int size() const override { return 1; }
    void sum(float*, int64_t) override {}
    void sum(double*, int64_t) override {}
    void reduce_scatter(float*, const std::vector<int64_t>&) override {}
    void all_gather(float*, int64_t) override {}
    bool any(bool flag) override { return flag; }
    void send(const float*, int64_t, int to, int) override { no_peer(to); }
    void wait_send(const float*) override {}
    void receive(float*, int64_t, int from, int) override { no_peer(from); }
    std::unique_ptr<ProcessGroup> split(int colour) override {
        return colour < 0 ? nullptr : std::make_unique<SingleProcessGroup>();
    }

private:
    [[noreturn]] static void no_peer(int rank) {
        throw Error("internal: a message to or from process " + std::to_string(rank) + " in a group of one");
    }
};

#ifdef TRAINBENCH_WITH_MPI
// MPI counts are ints: a gather's slice holds fewer than 2^31.
constexpr int64_t kLargestCount = int64_t{1} << 30;
// The gradient sum runs as one MPI_Allreduce per 8 MiB piece. Measured on this 2-core machine
// with 2 processes (docs/BENCHMARKS.md, "The collectives over MPI"): a 64 MiB allreduce in one
// call costs twice as much as in 8 MiB pieces (Open MPI 4.1's shared-memory path), and a 38 MiB
// MLP's gradient sum went from 26-32 to 12-13 ms per update. Gradients of 8 MiB or less are
// summed in one call, as before.
constexpr int64_t kSumPieceFloats = int64_t{1} << 21;

void check_mpi(int status, const char* what) {
    if (status == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING] = {};
    int length = 0;
    MPI_Error_string(status, text, &length);
    throw Error(std::string(what) + " failed: " + std::string(text, static_cast<size_t>(length)));
}

class MpiProcessGroup final : public ProcessGroup {
public:
    explicit MpiProcessGroup(MPI_Comm comm = MPI_COMM_WORLD) : comm_(comm) {
        MPI_Comm_rank(comm_, &rank_);
        MPI_Comm_size(comm_, &size_);
        sends_.reserve(8);
    }
    ~MpiProcessGroup() override {
        if (comm_ != MPI_COMM_WORLD) MPI_Comm_free(&comm_);
    }
    int rank() const override { return rank_; }
    int size() const override { return size_; }
    void sum(float* values, int64_t n) override { reduce(values, n, MPI_FLOAT); }
    void sum(double* values, int64_t n) override { reduce(values, n, MPI_DOUBLE); }
    // One MPI_Reduce per rank's block, to that rank, in 8 MiB pieces, then this rank's sum moved
    // to the start of the buffer. MPI_Reduce_scatter does the same sums, but Open MPI 4.1 took
    // 3-6x as long here for ZeRO-2's buckets, whose blocks are mostly one rank's whole bucket
    // and nothing for the others (16 MiB: 37 ms against 10; measured with 2 processes on this
    // machine, docs/BENCHMARKS.md, "The collectives over MPI").
    void reduce_scatter(float* values, const std::vector<int64_t>& counts) override {
        if (counts.size() != static_cast<size_t>(size_))
            throw Error("internal: a reduce-scatter of " + std::to_string(counts.size()) + " blocks over " +
                        std::to_string(size_) + " processes");
        int64_t start = 0, mine = 0;
        for (int root = 0; root < size_; ++root) {
            const int64_t count = counts[static_cast<size_t>(root)];
            if (root == rank_) mine = start;
            for (int64_t done = 0; done < count; done += kSumPieceFloats) {
                float* piece = values + start + done;
                const auto n = static_cast<int>(std::min(kSumPieceFloats, count - done));
                check_mpi(MPI_Reduce(root == rank_ ? MPI_IN_PLACE : piece, root == rank_ ? piece : nullptr, n,
                                     MPI_FLOAT, MPI_SUM, root, comm_),
                          "MPI_Reduce");
            }
            start += count;
        }
        if (mine > 0) std::memmove(values, values + mine, static_cast<size_t>(counts[static_cast<size_t>(rank_)]) * 4);
    }
    void all_gather(float* values, int64_t n) override {
        const Slices& slices = slices_of(n);
        check_mpi(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, values, slices.counts.data(),
                                 slices.offsets.data(), MPI_FLOAT, comm_),
                  "MPI_Allgatherv");
    }
    bool any(bool flag) override {
        int value = flag ? 1 : 0;
        check_mpi(MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_INT, MPI_MAX, comm_), "MPI_Allreduce");
        return value != 0;
    }
    void send(const float* values, int64_t n, int to, int tag) override {
        wait_send(values);
        MPI_Request request = MPI_REQUEST_NULL;
        check_mpi(MPI_Isend(values, message_count(n), MPI_FLOAT, to, tag, comm_, &request), "MPI_Isend");
        sends_.push_back({values, request});
    }
    void wait_send(const float* values) override {
        for (size_t i = 0; i < sends_.size(); ++i) {
            if (sends_[i].buffer != values) continue;
            check_mpi(MPI_Wait(&sends_[i].request, MPI_STATUS_IGNORE), "MPI_Wait");
            sends_.erase(sends_.begin() + static_cast<std::ptrdiff_t>(i));
            return;
        }
    }
    void receive(float* values, int64_t n, int from, int tag) override {
        check_mpi(MPI_Recv(values, message_count(n), MPI_FLOAT, from, tag, comm_, MPI_STATUS_IGNORE), "MPI_Recv");
    }
    std::unique_ptr<ProcessGroup> split(int colour) override {
        MPI_Comm part = MPI_COMM_NULL;
        check_mpi(MPI_Comm_split(comm_, colour < 0 ? MPI_UNDEFINED : colour, rank_, &part), "MPI_Comm_split");
        if (part == MPI_COMM_NULL) return nullptr;
        return std::make_unique<MpiProcessGroup>(part);
    }

private:
    struct Slices {
        int64_t n = -1;
        std::vector<int> counts, offsets;
    };
    // The ranks' slices of n elements as MPI's int counts and displacements, kept for the next
    // call (every update gathers the same n: no allocation in the steady state).
    const Slices& slices_of(int64_t n) {
        if (slices_.n == n) return slices_;
        if (n >= kLargestCount * 2)
            throw Error("ZeRO over MPI shards at most 2^31 - 1 parameters; this model has " + std::to_string(n));
        slices_.n = n;
        slices_.counts.clear();
        slices_.offsets.clear();
        for (int r = 0; r < size_; ++r) {
            const ShardRange shard = shard_of(n, r, size_);
            slices_.counts.push_back(static_cast<int>(shard.size()));
            slices_.offsets.push_back(static_cast<int>(shard.begin));
        }
        return slices_;
    }
    Slices slices_;

    template <typename T>
    void reduce(T* values, int64_t n, MPI_Datatype type) {
        for (int64_t start = 0; start < n; start += kSumPieceFloats) {
            const auto count = static_cast<int>(std::min(kSumPieceFloats, n - start));
            check_mpi(MPI_Allreduce(MPI_IN_PLACE, values + start, count, type, MPI_SUM, comm_),
                      "MPI_Allreduce");
        }
    }
    static int message_count(int64_t n) {
        if (n >= kLargestCount * 2) throw Error("a pipeline message of " + std::to_string(n) + " floats is more than MPI counts");
        return static_cast<int>(n);
    }
    MPI_Comm comm_;
    int rank_ = 0, size_ = 1;
    // Sends on their way, by the buffer they read (few: a pipeline stage's two).
    struct PendingSend {
        const float* buffer;
        MPI_Request request;
    };
    std::vector<PendingSend> sends_;
};
#endif

bool joined = false;
ProcessWorld world;

ProcessGroup* world_group() {
#ifdef TRAINBENCH_WITH_MPI
    static MpiProcessGroup* mpi = nullptr;
    if (joined && !mpi) mpi = new MpiProcessGroup();  // lives until exit, like MPI_COMM_WORLD
    if (joined) return mpi;
#endif
    static SingleProcessGroup single;
    return &single;
}

}  // namespace

ProcessGroup& process_group() { return *world_group(); }

bool mpi_built_in() {
#ifdef TRAINBENCH_WITH_MPI
    return true;
#else
    return false;
#endif
}

std::string mpi_launcher() {
#ifdef TRAINBENCH_MPIEXEC
    return TRAINBENCH_MPIEXEC;
#else
    return {};
#endif
}

std::string several_processes_unavailable(int64_t processes) {
    const std::string launcher = mpi_launcher();
    const std::string asked = std::to_string(processes) + " processes";
    if (launcher.empty())
        return asked + " need MPI, and this build has none: install libopenmpi-dev and openmpi-bin, rebuild "
                       "(./scripts/setup.sh build), or use 1 process";
    if (::access(launcher.c_str(), X_OK) != 0)
        return asked + " start " + launcher + ", which is missing (" + std::strerror(errno) +
               "): install openmpi-bin, or use 1 process";
    return {};
}

bool launched_by_mpi() {
    return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr;
}

ProcessWorld join_process_world() {
    if (joined || !launched_by_mpi()) return world;
#ifdef TRAINBENCH_WITH_MPI
    // Only the training thread calls MPI (the prefetch loader never does).
    int provided = 0;
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    joined = true;
    world.rank = process_group().rank();
    world.size = process_group().size();
    return world;
#else
    throw Error("this process was started by mpirun, but this build has no MPI: install libopenmpi-dev and "
                "rebuild (./scripts/setup.sh build), or run without mpirun");
#endif
}

ProcessWorld process_world() { return world; }

void leave_process_world() {
#ifdef TRAINBENCH_WITH_MPI
    if (joined) MPI_Finalize();
#endif
    joined = false;
}

void abort_process_world(int exit_code) {
#ifdef TRAINBENCH_WITH_MPI
    if (joined && world.size > 1) MPI_Abort(MPI_COMM_WORLD, exit_code);
#endif
    std::exit(exit_code);
}

}  // namespace trainbench
