#include "backend/cpu/cpu_matmul_peak.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include "nn/packed_weights.hpp"
#include "parallel/worker_team.hpp"

namespace trainbench {

double measure_cpu_matmul_flops() {
    constexpr int64_t n = 1024;
    constexpr int repeats = 10;
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
    return 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / best;
}

}  // namespace trainbench
