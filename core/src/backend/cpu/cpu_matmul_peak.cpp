#include "backend/cpu/cpu_matmul_peak.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include "nn/onednn_linear.hpp"
#include "nn/packed_weights.hpp"
#include "parallel/worker_team.hpp"
#include "precision/half_float.hpp"

namespace trainbench {

namespace {

constexpr int64_t n = 1024;
constexpr int repeats = 10;

double flops_of(double seconds) { return 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / seconds; }

// oneDNN's forward product, fp32 or on bf16 codes, split across the team as the engine splits it.
double measure_onednn(MatmulOperands operands) {
    std::vector<float> weight(static_cast<size_t>(n * n)), input(static_cast<size_t>(n * n)),
        output(static_cast<size_t>(n * n));
    for (size_t i = 0; i < weight.size(); ++i) {
        weight[i] = static_cast<float>((i * 7919) % 1000) / 1000.0f - 0.5f;
        input[i] = static_cast<float>((i * 104729) % 1000) / 1000.0f - 0.5f;
    }
    std::vector<uint16_t> weight16(weight.size()), input16(input.size());
    store_16bit(Precision::bf16, weight.data(), weight16.data(), n * n);
    store_16bit(Precision::bf16, input.data(), input16.data(), n * n);
    const bool bf16 = operands == MatmulOperands::bf16;
    const void* x = bf16 ? static_cast<const void*>(input16.data()) : input.data();
    const void* w = bf16 ? static_cast<const void*>(weight16.data()) : weight.data();
    const int members = WorkerTeam::shared().members();
    const int64_t scratchpad = onednn_linear_scratchpad_bytes(operands, n, n, n, false, false, members);
    std::vector<char> scratchpads(static_cast<size_t>(std::max<int64_t>(1, scratchpad * members)));
    OnednnProducts products(members, scratchpads.data(), scratchpad);
    onednn_linear_forward(products, operands, x, w, nullptr, output.data(), n, n, n);
    double best = 1e30;
    for (int r = 0; r < repeats; ++r) {
        const auto start = std::chrono::steady_clock::now();
        onednn_linear_forward(products, operands, x, w, nullptr, output.data(), n, n, n);
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    return flops_of(best);
}

}  // namespace

double measure_cpu_matmul_flops(ProductKernel kernel) {
    if (kernel == ProductKernel::onednn_f32) return measure_onednn(MatmulOperands::f32);
    if (kernel == ProductKernel::onednn_bf16) return measure_onednn(MatmulOperands::bf16);
    const PackedLayout layout =
        make_packed_layout(PackedOperand::weights, n, n, WorkerTeam::shared().members());
    std::vector<float> weight(static_cast<size_t>(n * n)), input(static_cast<size_t>(n * n)),
        output(static_cast<size_t>(n * n));
    // Ordinary values (no denormals, no zeros the hardware could shortcut).
    for (size_t i = 0; i < weight.size(); ++i) {
        weight[i] = static_cast<float>((i * 7919) % 1000) / 1000.0f - 0.5f;
        input[i] = static_cast<float>((i * 104729) % 1000) / 1000.0f - 0.5f;
    }
    // Packed blocks are 64-byte aligned relative to the block's start, as the engine's arena gives.
    struct AlignedDelete {
        void operator()(float* p) const { ::operator delete[](p, std::align_val_t(64)); }
    };
    const std::unique_ptr<float[], AlignedDelete> packed(
        new (std::align_val_t(64)) float[static_cast<size_t>(layout.total_floats())]);
    pack_weights(layout, weight.data(), packed.get());
    packed_linear_forward(layout, packed.get(), nullptr, input.data(), output.data(), n);
    double best = 1e30;
    for (int r = 0; r < repeats; ++r) {
        const auto start = std::chrono::steady_clock::now();
        packed_linear_forward(layout, packed.get(), nullptr, input.data(), output.data(), n);
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    return flops_of(best);
}

}  // namespace trainbench
