// Does overlapping the gradient allreduce with the backward pass pay on this machine?
//
// Issue 12 leaves it open: TrainBench sums the gradients with one MPI_Allreduce after the last
// micro-batch's backward pass; PyTorch DDP instead starts an allreduce per bucket as soon as the
// backward pass has completed it, so that the sum runs while the rest of the backward computes.
// That can only pay where something other than the computing thread moves and adds the bytes
// (a spare core, a NIC, a GPU copy engine): Open MPI progresses a non-blocking collective inside
// the process's own MPI calls. This benchmark measures it directly, run under
// `mpirun -np 2 --bind-to core` with one thread per process, as TrainBench's `--processes 2`:
//
//   compute only     K chunks of single-thread products (the "backward"), each writing its
//                    gradient bucket
//   one allreduce    the same, then one MPI_Allreduce over all buckets (TrainBench up to 30bb684)
//   8 MiB pieces     the same, then the engine's own gradient sum (ProcessGroup::sum: one
//                    MPI_Allreduce per 8 MiB, parallel/process_world.cpp's kSumPieceFloats)
//   per bucket       the same, with a blocking MPI_Allreduce of each bucket as it completes
//   overlapped       an MPI_Iallreduce of each bucket as it completes, MPI_Testall on the
//                    outstanding ones after every chunk, MPI_Waitall at the end (DDP's schedule)
//
// Each repetition starts at a barrier and takes the slower process's time, so the figures hold
// the collective's own cost and not an imbalance between the processes. The cases rotate within
// each repetition; a case's figure is its median over the repetitions. The cost of a schedule is
// its time minus "compute only": overlap pays where "overlapped" costs measurably less than "one
// allreduce".
#include "mpi_job.hpp"
#include "parallel/process_group.hpp"

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;

enum class Schedule { compute_only, one_allreduce, pieces_after, per_bucket, overlapped };
constexpr Schedule kSchedules[] = {Schedule::compute_only, Schedule::one_allreduce, Schedule::pieces_after,
                                   Schedule::per_bucket, Schedule::overlapped};
constexpr const char* kNames[] = {"compute only", "one allreduce after the backward",
                                  "8 MiB pieces after the backward", "blocking allreduce per bucket",
                                  "overlapped (Iallreduce per bucket)"};

struct Options {
    long floats = 0;         // gradient floats per process
    int buckets = 0;         // K: buckets, one completed per chunk of compute
    double compute_ms = 0;   // the whole "backward" on one thread
    int repetitions = 15;
    std::string label;
    bool json = false;       // one JSON object on stdout instead of the table
};

void usage(const char* program) {
    std::fprintf(stderr,
                 "usage: mpirun -np 2 %s --floats N --buckets K --compute-ms MS [--repetitions R (15)] [--label TEXT] [--json]\n",
                 program);
}

bool parse(int argc, char** argv, Options& o) {
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        if (flag == "--json") {
            o.json = true;
            continue;
        }
        if (i + 1 >= argc) return false;
        const char* value = argv[++i];
        if (flag == "--floats") o.floats = std::atol(value);
        else if (flag == "--buckets") o.buckets = std::atoi(value);
        else if (flag == "--compute-ms") o.compute_ms = std::atof(value);
        else if (flag == "--repetitions") o.repetitions = std::atoi(value);
        else if (flag == "--label") o.label = value;
        else return false;
    }
    return o.floats > 0 && o.buckets > 0 && o.floats / o.buckets > 0 && o.compute_ms > 0 && o.repetitions > 0;
}

double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One chunk of the "backward": `products` single-thread 256^3 products, then the chunk's
// gradient bucket written from the product, as a layer's weight gradient is.
struct Backward {
    Matrix a = Matrix::Random(256, 256), b = Matrix::Random(256, 256), c = Matrix::Zero(256, 256);
    int products_per_chunk = 1;

    void chunk(float* bucket, long count) {
        for (int p = 0; p < products_per_chunk; ++p) c.noalias() = a * b;
        const float* source = c.data();
        for (long i = 0; i < count; ++i) bucket[i] = source[i % c.size()];
    }
};

double run(Schedule schedule, Backward& backward, std::vector<float>& gradients, const std::vector<long>& offsets,
           std::vector<MPI_Request>& requests) {
    const int buckets = static_cast<int>(offsets.size()) - 1;
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = now_ms();
    int outstanding = 0;
    // The backward completes the last layer's bucket first.
    for (int k = buckets - 1; k >= 0; --k) {
        float* bucket = gradients.data() + offsets[static_cast<size_t>(k)];
        const int count = static_cast<int>(offsets[static_cast<size_t>(k) + 1] - offsets[static_cast<size_t>(k)]);
        backward.chunk(bucket, count);
        if (schedule == Schedule::per_bucket) {
            MPI_Allreduce(MPI_IN_PLACE, bucket, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        } else if (schedule == Schedule::overlapped) {
            MPI_Iallreduce(MPI_IN_PLACE, bucket, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                           &requests[static_cast<size_t>(outstanding++)]);
            int done = 0;
            MPI_Testall(outstanding, requests.data(), &done, MPI_STATUSES_IGNORE);
        }
    }
    if (schedule == Schedule::one_allreduce)
        MPI_Allreduce(MPI_IN_PLACE, gradients.data(), static_cast<int>(gradients.size()), MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
    if (schedule == Schedule::pieces_after)
        trainbench::process_group().sum(gradients.data(), static_cast<int64_t>(gradients.size()));
    if (schedule == Schedule::overlapped) MPI_Waitall(outstanding, requests.data(), MPI_STATUSES_IGNORE);
    double elapsed = now_ms() - start;
    MPI_Allreduce(MPI_IN_PLACE, &elapsed, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return elapsed;
}

}  // namespace

int main(int argc, char** argv) {
    const MpiJob job;
    const int rank = job.rank, size = job.size;
    Options options;
    if (!parse(argc, argv, options)) {
        if (rank == 0) usage(argv[0]);
        return 2;
    }
    Eigen::setNbThreads(1);

    std::vector<long> offsets;
    for (int k = 0; k <= options.buckets; ++k) offsets.push_back(options.floats * k / options.buckets);
    std::vector<float> gradients(static_cast<size_t>(options.floats));
    std::vector<MPI_Request> requests(static_cast<size_t>(options.buckets));

    // Size the chunks so that the whole backward takes about compute_ms on rank 0's core.
    Backward backward;
    backward.chunk(gradients.data(), 1);
    const double one_start = now_ms();
    for (int i = 0; i < 20; ++i) backward.chunk(gradients.data(), 1);
    double product_ms = (now_ms() - one_start) / 20;
    MPI_Bcast(&product_ms, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    backward.products_per_chunk = std::max(1, static_cast<int>(options.compute_ms / options.buckets / product_ms + 0.5));

    for (Schedule s : kSchedules) run(s, backward, gradients, offsets, requests);  // warm-up
    std::vector<std::vector<double>> times(std::size(kSchedules));
    for (int r = 0; r < options.repetitions; ++r)
        for (size_t i = 0; i < std::size(kSchedules); ++i) {
            const size_t s = (i + static_cast<size_t>(r)) % std::size(kSchedules);
            times[s].push_back(run(kSchedules[s], backward, gradients, offsets, requests));
        }

    if (rank == 0 && options.json) {
        std::printf("{\"label\": \"%s\", \"processes\": %d, \"floats\": %ld, \"buckets\": %d, "
                    "\"products_per_bucket\": %d, \"median_ms\": {",
                    options.label.c_str(), size, options.floats, options.buckets, backward.products_per_chunk);
        for (size_t s = 0; s < std::size(kSchedules); ++s)
            std::printf("%s\"%s\": %.3f", s ? ", " : "", kNames[s], median(times[s]));
        std::printf("}}\n");
    } else if (rank == 0) {
        const double compute = median(times[0]);
        std::printf("%s: %d processes, %ld gradient floats (%.2f MiB) in %d buckets, %d x 256^3 products per bucket\n",
                    options.label.c_str(), size, options.floats, options.floats * 4.0 / (1 << 20), options.buckets,
                    backward.products_per_chunk);
        for (size_t s = 0; s < std::size(kSchedules); ++s)
            std::printf("  %-36s %8.2f ms   cost %+7.2f ms\n", kNames[s], median(times[s]), median(times[s]) - compute);
    }
    return 0;
}
