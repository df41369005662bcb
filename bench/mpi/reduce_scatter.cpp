// ZeRO-2's reduce-scatter on this machine: MPI_Reduce_scatter against the engine's own
// ProcessGroup::reduce_scatter (parallel/process_world.cpp: one MPI_Reduce per process's block,
// to that process, in 8 MiB pieces), for the two shapes a ZeRO-2 bucket takes: blocks split evenly over the
// processes (a bucket that straddles the shards), and one process's whole bucket with empty
// blocks for the others (the common case: most buckets lie inside one process's slice).
//
//   mpirun -np 2 --bind-to core reduce_scatter --floats N [--repetitions R (15)] [--json]
//
// Each repetition starts at a barrier and takes the slower process's time; a figure is the
// median over the repetitions.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "mpi_job.hpp"
#include "parallel/process_group.hpp"

int main(int argc, char** argv) {
    const MpiJob job;
    const int rank = job.rank, size = job.size;
    SizeOptions options;
    if (!parse_size_options(argc, argv, job, options)) return 2;
    const auto [floats, repetitions, json] = options;

    std::vector<float> values(static_cast<size_t>(floats));
    const char* shapes[] = {"even blocks", "one process's bucket"};
    const char* methods[] = {"MPI_Reduce_scatter", "MPI_Reduce per block, 8 MiB pieces"};
    double medians[2][2] = {};
    for (int shape = 0; shape < 2; ++shape) {
        std::vector<int> counts(static_cast<size_t>(size), 0);
        for (int r = 0; r < size; ++r)
            counts[static_cast<size_t>(r)] =
                shape == 0 ? static_cast<int>(floats / size + (r < floats % size)) : (r == 0 ? static_cast<int>(floats) : 0);
        const std::vector<int64_t> counts64(counts.begin(), counts.end());
        std::vector<double> times[2];
        for (int repetition = -1; repetition < repetitions; ++repetition)
            for (int m = 0; m < 2; ++m) {
                const int method = (m + repetition + 2) % 2;  // alternate which runs first
                std::fill(values.begin(), values.end(), 1.0f + rank);
                MPI_Barrier(MPI_COMM_WORLD);
                const auto start = std::chrono::steady_clock::now();
                if (method == 0)
                    MPI_Reduce_scatter(MPI_IN_PLACE, values.data(), counts.data(), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                else
                    trainbench::process_group().reduce_scatter(values.data(), counts64);
                double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
                MPI_Allreduce(MPI_IN_PLACE, &ms, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                if (repetition >= 0) times[method].push_back(ms);  // the first round warms up
            }
        for (int method = 0; method < 2; ++method) medians[shape][method] = median(times[method]);
    }
    if (rank == 0) {
        if (json) {
            std::printf("{\"processes\": %d, \"floats\": %ld, \"median_ms\": {", size, floats);
            for (int shape = 0; shape < 2; ++shape)
                for (int method = 0; method < 2; ++method)
                    std::printf("%s\"%s: %s\": %.3f", shape + method ? ", " : "", shapes[shape], methods[method],
                                medians[shape][method]);
            std::printf("}}\n");
        } else {
            std::printf("%d processes, %ld floats (%.2f MiB)\n", size, floats, floats * 4.0 / (1 << 20));
            for (int shape = 0; shape < 2; ++shape)
                for (int method = 0; method < 2; ++method)
                    std::printf("  %-22s %-36s %8.2f ms\n", shapes[shape], methods[method], medians[shape][method]);
        }
    }
    return 0;
}
