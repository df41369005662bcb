#pragma once
// What the MPI benchmarks share: joining the job (MPI_Finalize when the object goes, on every
// return path) and the median of a case's repetitions.
#include <mpi.h>

#include <algorithm>
#include <vector>

struct MpiJob {
    int rank = 0, size = 1;
    MpiJob(int& argc, char**& argv) {
        MPI_Init(&argc, &argv);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
    }
    ~MpiJob() { MPI_Finalize(); }
    MpiJob(const MpiJob&) = delete;
    MpiJob& operator=(const MpiJob&) = delete;
};

inline double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    const size_t n = values.size();
    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}
