#include "nn/lora.hpp"

#include <Eigen/Core>

#include "parallel/parallel_range.hpp"

namespace trainbench {
namespace {
// As nn/linear.cpp: [features x rows] column-major is row-major [rows, features]; each product
// is split by rows (columns here) across the WorkerTeam, each slice single-threaded.
using ColMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
}  // namespace

void lora_forward(const float* input, const float* lora_a, const float* lora_b, float scale, float* down,
                  float* output, int64_t rows, int64_t in, int64_t out, int64_t rank) {
    Eigen::Map<const ColMajor> X(input, in, rows);
    Eigen::Map<const RowMajor> A(lora_a, rank, in);
    Eigen::Map<const RowMajor> B(lora_b, out, rank);
    Eigen::Map<ColMajor> D(down, rank, rows);
    Eigen::Map<ColMajor> Y(output, out, rows);
    parallel_slices(rows, rank * (in + out), [&](int64_t first, int64_t end) {
        const int64_t count = end - first;
        D.middleCols(first, count).noalias() = A * X.middleCols(first, count);
        Y.middleCols(first, count).noalias() += scale * (B * D.middleCols(first, count));
    });
}

int64_t lora_backward_scratch_floats(int64_t rows, int64_t rank) { return 2 * rows * rank; }

void lora_backward(const float* input, const float* down, const float* grad_output, const float* lora_a,
                   const float* lora_b, float scale, float* grad_a, float* grad_b, float* grad_input, int64_t rows,
                   int64_t in, int64_t out, int64_t rank, GradientWrite write, float* scratch) {
    Eigen::Map<const ColMajor> D(down, rank, rows);
    Eigen::Map<const ColMajor> dY(grad_output, out, rows);
    Eigen::Map<const RowMajor> A(lora_a, rank, in);
    Eigen::Map<const RowMajor> B(lora_b, out, rank);
    float* scaled_down = scratch;
    float* grad_down = scratch + rows * rank;
    Eigen::Map<ColMajor> sD(scaled_down, rank, rows);
    Eigen::Map<ColMajor> dD(grad_down, rank, rows);
    parallel_slices(rows, rank * (out + in), [&](int64_t first, int64_t end) {
        const int64_t count = end - first;
        sD.middleCols(first, count) = scale * D.middleCols(first, count);
        dD.middleCols(first, count).noalias() = scale * (B.transpose() * dY.middleCols(first, count));
    });
    // Sums over the rows, each element by one thread in one order (nn/linear.cpp).
    linear_weight_grad(scaled_down, grad_output, grad_b, nullptr, rank, out, rows, write);
    linear_weight_grad(input, grad_down, grad_a, nullptr, in, rank, rows, write);
    if (!grad_input) return;
    Eigen::Map<ColMajor> dX(grad_input, in, rows);
    parallel_slices(rows, rank * in, [&](int64_t first, int64_t end) {
        const int64_t count = end - first;
        dX.middleCols(first, count).noalias() += A.transpose() * dD.middleCols(first, count);
    });
}

}  // namespace trainbench
