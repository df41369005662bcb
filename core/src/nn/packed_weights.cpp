#include "nn/packed_weights.hpp"

#include <Eigen/Core>
#include <algorithm>
#include <alloca.h>
#include <cstdint>

#include "nn/activation.hpp"
#include "parallel/parallel_range.hpp"
#include "precision/half_float.hpp"

// This file drives Eigen's internal product kernel (gemm_pack_lhs, gemm_pack_rhs, gebp_kernel)
// exactly as Eigen 3.4's own general_matrix_matrix_product does, with the packing of the
// left operand hoisted out. Those are internal interfaces: check them again before moving to
// another Eigen version.
#if !EIGEN_VERSION_AT_LEAST(3, 4, 0) || EIGEN_VERSION_AT_LEAST(3, 4, 90)
#error "nn/packed_weights.cpp is written against Eigen 3.4's internal product kernel"
#endif

namespace trainbench {
namespace {

using Index = Eigen::Index;
using Traits = Eigen::internal::gebp_traits<float, float>;
using RowMajorMapper = Eigen::internal::const_blas_data_mapper<float, Index, Eigen::RowMajor>;
using ColMajorMapper = Eigen::internal::const_blas_data_mapper<float, Index, Eigen::ColMajor>;
using RhsMapper = ColMajorMapper;  // X and dZ: [features x batch], column-major
using ResMapper = Eigen::internal::blas_data_mapper<float, Index, Eigen::ColMajor, Eigen::Unaligned, 1>;
// W [out x in] row-major is read as a row-major matrix; W^T as the column-major [in x out]
// matrix that the same bytes are.
using PackRowMajor = Eigen::internal::gemm_pack_lhs<float, Index, RowMajorMapper, Traits::mr, Traits::LhsProgress,
                                                    typename Traits::LhsPacket4Packing, Eigen::RowMajor>;
using PackColMajor = Eigen::internal::gemm_pack_lhs<float, Index, ColMajorMapper, Traits::mr, Traits::LhsProgress,
                                                    typename Traits::LhsPacket4Packing, Eigen::ColMajor>;
using PackRhs = Eigen::internal::gemm_pack_rhs<float, Index, RhsMapper, Traits::nr, Eigen::ColMajor>;
using Kernel = Eigen::internal::gebp_kernel<float, float, Index, ResMapper, Traits::mr, Traits::nr, false, false>;

constexpr int64_t kBlockAlignFloats = 16;  // 64 bytes: the kernel loads packed panels aligned
constexpr int64_t kMaxColumnBlock = 512;   // columns of X packed at once (at most ~0.6 MB)
constexpr int64_t kMaxDepthBlock = 320;

int64_t round_up(int64_t value, int64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

}  // namespace

void apply_epilogue(const ProductEpilogue& epilogue, float* output, int64_t height, int64_t row, int64_t rows,
                    int64_t column, int64_t columns) {
    if (epilogue.activated_codes) {
        // Rounded and activated straight into codes: the fp32 block is read once and nothing
        // fp32 is written back.
        for (int64_t j = column; j < column + columns; ++j) {
            const int64_t at = j * height + row;
            activation_forward_rounding_serial(epilogue.activation, epilogue.rounding, output + at,
                                               epilogue.output_codes ? epilogue.output_codes + at : nullptr,
                                               epilogue.activated_codes + at, rows);
        }
        return;
    }
    for (int64_t j = column; j < column + columns; ++j) {
        float* values = output + j * height + row;
        if (epilogue.rounding != Precision::fp32) round_to_16bit_serial(epilogue.rounding, values, rows);
        float* into = epilogue.activated ? epilogue.activated + j * height + row : values;
        activation_forward_serial(epilogue.activation, values, into, rows);
    }
}

int64_t PackedLayout::block_offset(int64_t slice, int64_t k_block) const {
    // Blocks are stored slice by slice, depth block by depth block.
    int64_t offset = 0;
    const int64_t blocks = depth_blocks();
    for (int64_t s = 0; s <= slice && s < slices; ++s) {
        const int64_t slice_rows = slice_begin(s + 1) - slice_begin(s);
        for (int64_t k = 0; k < blocks; ++k) {
            if (s == slice && k == k_block) return offset;
            const int64_t block_depth = std::min(depth_block, depth - k * depth_block);
            offset += round_up(slice_rows * block_depth, kBlockAlignFloats);
        }
    }
    return offset;
}

PackedLayout make_packed_layout(PackedOperand operand, int64_t in, int64_t out, int slices) {
    PackedLayout layout;
    layout.operand = operand;
    layout.rows = operand == PackedOperand::weights ? out : in;
    layout.depth = operand == PackedOperand::weights ? in : out;
    layout.slices = std::max<int64_t>(1, std::min<int64_t>(slices, layout.rows));
    // Eigen's own choice of depth block for a slice of this size and a 256-column operand.
    Index k = layout.depth, m = std::max<int64_t>(1, layout.rows / layout.slices), n = 256;
    Eigen::internal::computeProductBlockingSizes<float, float, 1, Index>(k, m, n, 1);
    layout.depth_block = std::clamp<int64_t>(k, 1, kMaxDepthBlock);
    return layout;
}

void pack_weights(const PackedLayout& layout, const float* weight, float* packed) {
    const int64_t in = layout.operand == PackedOperand::weights ? layout.depth : layout.rows;
    parallel_range(layout.slices, (layout.rows / layout.slices) * layout.depth / 8, [&](int64_t first, int64_t end) {
        for (int64_t s = first; s < end; ++s) {
            const int64_t row = layout.slice_begin(s), rows = layout.slice_begin(s + 1) - row;
            for (int64_t kb = 0; kb < layout.depth_blocks(); ++kb) {
                const int64_t k = kb * layout.depth_block;
                const int64_t depth = std::min(layout.depth_block, layout.depth - k);
                float* block = packed + layout.block_offset(s, kb);
                if (layout.operand == PackedOperand::weights)
                    PackRowMajor()(block, RowMajorMapper(weight, in).getSubMapper(row, k), depth, rows);
                else
                    PackColMajor()(block, ColMajorMapper(weight, in).getSubMapper(row, k), depth, rows);
            }
        }
    });
}

void packed_product_slices(const PackedLayout& layout, const float* packed, const float* bias,
                           const float* input, float* output, int64_t batch, int64_t first, int64_t end,
                           const ProductEpilogue* epilogue) {
    const int64_t row = layout.slice_begin(first), rows = layout.slice_begin(end) - row;
    if (rows <= 0) return;
    const RhsMapper rhs(input, layout.depth);
    const ResMapper res(output, layout.rows);
    const int64_t column_block = std::min(batch, kMaxColumnBlock);
    // The packed columns of B for one block: on the stack (at most ~0.6 MB), so the product
    // allocates nothing.
    const size_t block_bytes = static_cast<size_t>(layout.depth_block * column_block) * sizeof(float) + 64;
    auto* block = reinterpret_cast<float*>(
        (reinterpret_cast<std::uintptr_t>(alloca(block_bytes)) + 63) & ~std::uintptr_t{63});
    // C starts as the bias (or zero); the kernel adds M B to it, depth block by depth block.
    for (int64_t j = 0; j < batch; ++j) {
        float* column = output + j * layout.rows + row;
        if (bias) std::copy(bias + row, bias + row + rows, column);
        else std::fill(column, column + rows, 0.0f);
    }
    PackRhs pack;
    Kernel kernel;
    for (int64_t j = 0; j < batch; j += column_block) {
        const int64_t columns = std::min(column_block, batch - j);
        for (int64_t kb = 0; kb < layout.depth_blocks(); ++kb) {
            const int64_t k = kb * layout.depth_block;
            const int64_t depth = std::min(layout.depth_block, layout.depth - k);
            pack(block, rhs.getSubMapper(k, j), depth, columns);
            for (int64_t s = first; s < end; ++s) {
                const int64_t slice_row = layout.slice_begin(s);
                kernel(res.getSubMapper(slice_row, j), packed + layout.block_offset(s, kb), block,
                       layout.slice_begin(s + 1) - slice_row, depth, columns, 1.0f);
            }
        }
        // This block of C is complete and still in cache.
        if (epilogue) apply_epilogue(*epilogue, output, layout.rows, row, rows, j, columns);
    }
}

void packed_linear_forward(const PackedLayout& layout, const float* packed, const float* bias,
                           const float* input, float* output, int64_t batch, const ProductEpilogue* epilogue) {
    parallel_range(layout.slices, (layout.rows / layout.slices) * layout.depth * batch, [&](int64_t first, int64_t end) {
        packed_product_slices(layout, packed, bias, input, output, batch, first, end, epilogue);
    });
}

}  // namespace trainbench
