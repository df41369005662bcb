#include "nn/linear.hpp"

#include <Eigen/Core>

namespace trainbench {
namespace {
using ColMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vector = Eigen::VectorXf;
}  // namespace

void linear_forward(const float* weight, const float* bias, const float* input, float* output,
                    int64_t in, int64_t out, int64_t batch) {
    Eigen::Map<const RowMajor> W(weight, out, in);
    Eigen::Map<const Vector> b(bias, out);
    Eigen::Map<const ColMajor> X(input, in, batch);
    Eigen::Map<ColMajor> Z(output, out, batch);
    Z.noalias() = W * X;
    Z.colwise() += b;
}

void linear_backward(const float* weight, const float* input, const float* grad_output,
                     float* grad_weight, float* grad_bias, float* grad_input, int64_t in,
                     int64_t out, int64_t batch) {
    Eigen::Map<const RowMajor> W(weight, out, in);
    Eigen::Map<const ColMajor> X(input, in, batch);
    Eigen::Map<const ColMajor> dZ(grad_output, out, batch);
    Eigen::Map<RowMajor> dW(grad_weight, out, in);
    Eigen::Map<Vector> db(grad_bias, out);
    dW.noalias() += dZ * X.transpose();
    db.noalias() += dZ.rowwise().sum();
    if (grad_input) {
        Eigen::Map<ColMajor> dX(grad_input, in, batch);
        dX.noalias() = W.transpose() * dZ;
    }
}

}  // namespace trainbench
