#include "nn/linear.hpp"

#include <omp.h>

#include <Eigen/Core>
#include <algorithm>

namespace trainbench {
namespace {
using ColMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vector = Eigen::VectorXf;

// Splits [0, n) into one contiguous slice per OpenMP thread and runs body(begin, count) on
// each. Eigen's own threaded product allocates its packing buffers on the heap for every
// call; single-threaded products inside our parallel region pack on the stack (see
// EIGEN_STACK_ALLOCATION_LIMIT in core/CMakeLists.txt), so an update allocates nothing.
template <class Body>
void parallel_slices(int64_t n, int64_t min_slice, Body body) {
    const int64_t threads = std::min<int64_t>(omp_get_max_threads(), std::max<int64_t>(1, n / min_slice));
    if (threads <= 1) {
        body(int64_t{0}, n);
        return;
    }
#pragma omp parallel num_threads(static_cast<int>(threads))
    {
        const int64_t t = omp_get_thread_num();
        const int64_t begin = n * t / threads, end = n * (t + 1) / threads;
        body(begin, end - begin);
    }
}

constexpr int64_t kMinColumnsPerThread = 8;
constexpr int64_t kMinRowsPerThread = 16;
}  // namespace

void linear_forward(const float* weight, const float* bias, const float* input, float* output,
                    int64_t in, int64_t out, int64_t batch) {
    Eigen::Map<const RowMajor> W(weight, out, in);
    Eigen::Map<const Vector> b(bias, out);
    parallel_slices(batch, kMinColumnsPerThread, [&](int64_t first, int64_t count) {
        Eigen::Map<const ColMajor> X(input + first * in, in, count);
        Eigen::Map<ColMajor> Z(output + first * out, out, count);
        Z.noalias() = W * X;
        Z.colwise() += b;
    });
}

void linear_backward(const float* weight, const float* input, const float* grad_output,
                     float* grad_weight, float* grad_bias, float* grad_input, int64_t in,
                     int64_t out, int64_t batch) {
    Eigen::Map<const ColMajor> X(input, in, batch);
    Eigen::Map<const ColMajor> dZ(grad_output, out, batch);
    // dW and db reduce over the batch: split them by output rows, so each element is summed
    // by one thread in one order.
    parallel_slices(out, kMinRowsPerThread, [&](int64_t first, int64_t count) {
        Eigen::Map<RowMajor> dW(grad_weight + first * in, count, in);
        Eigen::Map<Vector> db(grad_bias + first, count);
        dW.noalias() += dZ.middleRows(first, count) * X.transpose();
        db.noalias() += dZ.middleRows(first, count).rowwise().sum();
    });
    if (grad_input) {
        Eigen::Map<const RowMajor> W(weight, out, in);
        parallel_slices(batch, kMinColumnsPerThread, [&](int64_t first, int64_t count) {
            Eigen::Map<ColMajor> dX(grad_input + first * in, in, count);
            dX.noalias() = W.transpose() * dZ.middleCols(first, count);
        });
    }
}

}  // namespace trainbench
