// ZeRO's all-gather of the updated parameters on this machine: one MPI_Allgatherv over the whole
// flat store (what parallel/process_world.cpp does) against the same gather in 8 MiB pieces of
// the store (each piece gathering every process's overlap with it), the way the gradient sum is
// split since it measured faster in pieces.
//
//   mpirun -np 2 --bind-to core all_gather --floats N [--repetitions R (15)] [--json]
//
// Each repetition starts at a barrier and takes the slower process's time; a figure is the
// median over the repetitions.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "mpi_job.hpp"

namespace {

constexpr long kPieceFloats = long{1} << 21;  // process_world.cpp's kSumPieceFloats

struct Slices {
    std::vector<int> counts, offsets;
};

// Process r's slice of n, as parallel/shard_range.hpp splits it: the first n % size one longer.
Slices slices_of(long n, int size) {
    Slices s;
    long next = 0;
    for (int r = 0; r < size; ++r) {
        const long count = n / size + (r < n % size);
        s.counts.push_back(static_cast<int>(count));
        s.offsets.push_back(static_cast<int>(next));
        next += count;
    }
    return s;
}

// Every process's overlap with the piece [begin, end), relative to begin.
Slices piece_slices(const Slices& whole, long begin, long end) {
    Slices s;
    for (size_t r = 0; r < whole.counts.size(); ++r) {
        const long from = std::max<long>(whole.offsets[r], begin);
        const long to = std::min<long>(whole.offsets[r] + whole.counts[r], end);
        s.counts.push_back(static_cast<int>(std::max(0L, to - from)));
        s.offsets.push_back(static_cast<int>(to > from ? from - begin : 0));
    }
    return s;
}

}  // namespace

int main(int argc, char** argv) {
    const MpiJob job;
    SizeOptions options;
    if (!parse_size_options(argc, argv, job, options)) return 2;
    const auto [floats, repetitions, json] = options;
    std::vector<float> values(static_cast<size_t>(floats));
    const Slices whole = slices_of(floats, job.size);
    std::vector<Slices> pieces;  // prepared once, as the engine would keep them
    for (long begin = 0; begin < floats; begin += kPieceFloats)
        pieces.push_back(piece_slices(whole, begin, std::min(floats, begin + kPieceFloats)));

    const char* methods[] = {"one MPI_Allgatherv", "8 MiB pieces"};
    std::vector<double> times[2];
    for (int repetition = -1; repetition < repetitions; ++repetition)
        for (int m = 0; m < 2; ++m) {
            const int method = (m + repetition + 2) % 2;  // alternate which runs first
            std::fill(values.begin(), values.end(), 1.0f + job.rank);
            MPI_Barrier(MPI_COMM_WORLD);
            const auto start = std::chrono::steady_clock::now();
            if (method == 0) {
                MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, values.data(), whole.counts.data(),
                               whole.offsets.data(), MPI_FLOAT, MPI_COMM_WORLD);
            } else {
                for (size_t p = 0; p < pieces.size(); ++p)
                    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, values.data() + p * kPieceFloats,
                                   pieces[p].counts.data(), pieces[p].offsets.data(), MPI_FLOAT, MPI_COMM_WORLD);
            }
            double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
            MPI_Allreduce(MPI_IN_PLACE, &ms, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            if (repetition >= 0) times[method].push_back(ms);  // the first round warms up
        }
    if (job.rank == 0) {
        if (json) {
            std::printf("{\"processes\": %d, \"floats\": %ld, \"median_ms\": {\"%s\": %.3f, \"%s\": %.3f}}\n", job.size,
                        floats, methods[0], median(times[0]), methods[1], median(times[1]));
        } else {
            std::printf("%d processes, %ld floats (%.2f MiB)\n", job.size, floats, floats * 4.0 / (1 << 20));
            for (int method = 0; method < 2; ++method)
                std::printf("  %-20s %8.2f ms\n", methods[method], median(times[method]));
        }
    }
    return 0;
}
