#pragma once
// What the MPI benchmarks share: joining the job as trainbench-cli does (trainbench/processes.hpp;
// left again when the object goes, on every return path), so that what they time through
// parallel/process_group.hpp is the engine's own collectives; the options of the benchmarks of
// one collective over N floats; and the median of a case's repetitions.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "trainbench/processes.hpp"

struct MpiJob {
    int rank = 0, size = 1;
    MpiJob() {
        const trainbench::ProcessWorld world = trainbench::join_process_world();
        rank = world.rank;
        size = world.size;
    }
    ~MpiJob() { trainbench::leave_process_world(); }
    MpiJob(const MpiJob&) = delete;
    MpiJob& operator=(const MpiJob&) = delete;
};

inline double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    const size_t n = values.size();
    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// --floats N [--repetitions R] [--json] of a benchmark of one collective over N floats.
struct SizeOptions {
    long floats = 0;
    int repetitions = 15;
    bool json = false;
};

// False, after process 0 printed the usage, when the arguments are not such options (N must
// give each of the job's processes at least one float and fit MPI's int counts).
inline bool parse_size_options(int argc, char** argv, const MpiJob& job, SizeOptions& o) {
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        if (flag == "--json") o.json = true;
        else if (flag == "--floats" && i + 1 < argc) o.floats = std::atol(argv[++i]);
        else if (flag == "--repetitions" && i + 1 < argc) o.repetitions = std::atoi(argv[++i]);
        else o.floats = -1;
    }
    if (o.floats >= job.size && o.floats < (long{1} << 31) && o.repetitions >= 1) return true;
    if (job.rank == 0)
        std::fprintf(stderr, "usage: mpirun -np 2 %s --floats N (< 2^31) [--repetitions R (15)] [--json]\n", argv[0]);
    return false;
}
