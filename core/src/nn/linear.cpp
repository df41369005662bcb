#include "nn/linear.hpp"

#include <Eigen/Core>
#include <algorithm>

#include "parallel/parallel_range.hpp"

namespace trainbench {

// Products are split across the WorkerTeam by rows of their result, each slice a
// single-threaded Eigen product. Eigen's own threaded product allocates its packing buffers
// on the heap on every call; single-threaded ones pack on the stack
// (EIGEN_STACK_ALLOCATION_LIMIT in core/CMakeLists.txt), so an update allocates nothing, and
// each output element is summed by one thread in one order. Splitting by rows of the result
// also splits W, the large operand, so each thread packs only its share of it: with small
// micro-batches, packing W is a visible part of every product.
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
    parallel_slices(out, in * batch, [&](int64_t first, int64_t end) {
        const int64_t count = end - first;
        Z.middleRows(first, count).noalias() = W.middleRows(first, count) * X;
        Z.middleRows(first, count).colwise() += b.segment(first, count);
    });
}

namespace {

// dW and db for output rows [first, end): a reduction over the batch, so split by output rows
// and each element is summed by one thread in one order.
void weight_grad_rows(const float* input, const float* grad_output, float* grad_weight, float* grad_bias,
                      int64_t in, int64_t out, int64_t batch, GradientWrite write, int64_t first, int64_t end) {
    Eigen::Map<const ColMajor> X(input, in, batch);
    Eigen::Map<const ColMajor> dZ(grad_output, out, batch);
    const int64_t count = end - first;
    if (count <= 0) return;
    Eigen::Map<RowMajor> dW(grad_weight + first * in, count, in);
    if (write == GradientWrite::overwrite) {
        dW.noalias() = dZ.middleRows(first, count) * X.transpose();
    } else {
        dW.noalias() += dZ.middleRows(first, count) * X.transpose();
    }
    if (!grad_bias) return;  // a Linear without bias (a GPT's LM head)
    Eigen::Map<Vector> db(grad_bias + first, count);
    if (write == GradientWrite::overwrite) {
        db.noalias() = dZ.middleRows(first, count).rowwise().sum();
    } else {
        db.noalias() += dZ.middleRows(first, count).rowwise().sum();
    }
}

// Rows [first, end) of dX = W^T dZ; rows of dX are columns of W.
void input_grad_rows(const float* weight, const float* grad_output, float* grad_input, int64_t in, int64_t out,
                     int64_t batch, int64_t first, int64_t end) {
    Eigen::Map<const RowMajor> W(weight, out, in);
    Eigen::Map<const ColMajor> dZ(grad_output, out, batch);
    Eigen::Map<ColMajor> dX(grad_input, in, batch);
    const int64_t count = end - first;
    if (count <= 0) return;
    dX.middleRows(first, count).noalias() = W.middleCols(first, count).transpose() * dZ;
}

}  // namespace

void linear_weight_grad(const float* input, const float* grad_output, float* grad_weight, float* grad_bias,
                        int64_t in, int64_t out, int64_t batch, GradientWrite write) {
    parallel_slices(out, in * batch, [&](int64_t first, int64_t end) {
        weight_grad_rows(input, grad_output, grad_weight, grad_bias, in, out, batch, write, first, end);
    });
}

void linear_backward(const float* weight, const float* input, const float* grad_output,
                     float* grad_weight, float* grad_bias, float* grad_input, int64_t in,
                     int64_t out, int64_t batch, GradientWrite write) {
    if (!grad_input) {
        linear_weight_grad(input, grad_output, grad_weight, grad_bias, in, out, batch, write);
        return;
    }
    // Both products in one dispatch: each thread does its rows of dW, then its rows of dX,
    // with no wait in between (they are independent), halving the hand-offs per layer.
    parallel_members(2 * in * out * batch, [&](int member, int members) {
        weight_grad_rows(input, grad_output, grad_weight, grad_bias, in, out, batch, write,
                         out * member / members, out * (member + 1) / members);
        input_grad_rows(weight, grad_output, grad_input, in, out, batch, in * member / members,
                        in * (member + 1) / members);
    });
}

void linear_backward_packed(const PackedLayout& transposed, const float* packed_transposed, const float* input,
                            const float* grad_output, float* grad_weight, float* grad_bias, float* grad_input,
                            int64_t in, int64_t out, int64_t batch, GradientWrite write) {
    parallel_members((grad_weight ? 2 : 1) * in * out * batch, [&](int member, int members) {
        if (grad_weight)  // null: W is frozen (a LoRA fine-tune's base), only dX is wanted
            weight_grad_rows(input, grad_output, grad_weight, grad_bias, in, out, batch, write,
                             out * member / members, out * (member + 1) / members);
        packed_product_slices(transposed, packed_transposed, nullptr, grad_output, grad_input, batch,
                              transposed.slices * member / members, transposed.slices * (member + 1) / members);
    });
}

}  // namespace trainbench
