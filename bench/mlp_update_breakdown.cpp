// Where the time of one fp32 update of issue 2's benchmark MLP goes in the CPU engine: the
// engine's own kernels (nn/linear, nn/activation, nn/loss, optim/optimizer_step) called one
// piece at a time with a timer around each, on the engine's worker team, at micro-batch 256
// (step_size 1) and 64 (step_size 4). Each piece is timed over all the micro-batches of one
// update, so the two columns compare directly.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "nn/activation.hpp"
#include "nn/linear.hpp"
#include "nn/loss.hpp"
#include "nn/packed_weights.hpp"
#include "optim/gradient_norm.hpp"
#include "optim/optimizer_step.hpp"
#include "parallel/worker_team.hpp"
#include "trainbench/dataset.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

struct Piece {
    std::string name;
    std::function<void(int micro)> run;  // micro: index of the micro-batch within the update
    double flops_per_sample = 0.0;       // 0 for pieces that are not products
    bool per_update = false;             // runs once per update instead of once per micro-batch
    std::vector<double> ms;
};

}  // namespace

int main(int argc, char** argv) {
    int threads = 2, repeats = 20;
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        if (flag == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
        else if (flag == "--repeats" && i + 1 < argc) repeats = std::atoi(argv[++i]);
        else {
            std::fprintf(stderr, "usage: %s [--threads N (2)] [--repeats N (20)]\n", argv[0]);
            return 2;
        }
    }
    trainbench::WorkerTeam::shared().resize(threads);

    const int64_t global_batch = 256;
    const int64_t widths[] = {784, 1024, 1024, 10};
    int64_t offsets[3] = {0, 0, 0};  // weight offsets; bias follows each weight
    int64_t parameters = 0;
    for (int l = 0; l < 3; ++l) {
        offsets[l] = parameters;
        parameters += widths[l] * widths[l + 1] + widths[l + 1];
    }
    std::vector<float> params(parameters), grads(parameters, 0.0f), state(2 * parameters, 0.0f);
    for (int64_t i = 0; i < parameters; ++i) params[i] = 0.01f * std::sin(0.37f * static_cast<float>(i));

    trainbench::DataOptions options;
    const trainbench::Dataset data = trainbench::load_dataset("fashion-mnist", options);
    std::vector<int64_t> indices(global_batch);
    for (int64_t i = 0; i < global_batch; ++i) indices[i] = (i * 7919) % data.train.count;
    std::vector<int32_t> labels(global_batch);

    // The engine's packed copies of W (forward) and W^T (input gradient), made once per update.
    using trainbench::PackedOperand;
    std::vector<trainbench::PackedLayout> forward_layouts, transposed_layouts;
    std::vector<std::vector<float>> packed_storage;
    std::vector<float*> packed_forward, packed_transposed;
    auto aligned_buffer = [&](int64_t floats) {
        packed_storage.emplace_back(static_cast<size_t>(floats + 16));
        float* p = packed_storage.back().data();
        while (reinterpret_cast<std::uintptr_t>(p) % 64 != 0) ++p;
        return p;
    };
    for (int l = 0; l < 3; ++l) {
        forward_layouts.push_back(trainbench::make_packed_layout(PackedOperand::weights, widths[l], widths[l + 1], threads));
        transposed_layouts.push_back(
            trainbench::make_packed_layout(PackedOperand::weights_transposed, widths[l], widths[l + 1], threads));
        packed_forward.push_back(aligned_buffer(forward_layouts.back().total_floats()));
        packed_transposed.push_back(aligned_buffer(transposed_layouts.back().total_floats()));
    }
    auto pack_all = [&] {
        for (int l = 0; l < 3; ++l) {
            const float* w = &params[offsets[l]];
            trainbench::pack_weights(forward_layouts[l], w, packed_forward[l]);
            if (l > 0) trainbench::pack_weights(transposed_layouts[l], w, packed_transposed[l]);
        }
    };
    pack_all();

    trainbench::OptimizerConfig adam;
    adam.kind = trainbench::OptimizerKind::adam;

    std::printf("fp32 update of MLP 784-1024-1024-10 (%lld parameters), global batch %lld, %d threads; "
                "median of %d repeats, ms per update (all micro-batches of the update)\n\n",
                static_cast<long long>(parameters), static_cast<long long>(global_batch), threads, repeats);

    const int64_t step_sizes[] = {1, 4};
    std::vector<std::vector<Piece>> tables;
    for (const int64_t step_size : step_sizes) {
        const int64_t n = global_batch / step_size;
        auto buffer = [](int64_t count) { return std::vector<float>(static_cast<size_t>(count)); };
        std::vector<float> x = buffer(784 * n), z1 = buffer(1024 * n), a1 = buffer(1024 * n), z2 = buffer(1024 * n),
                           a2 = buffer(1024 * n), logits = buffer(10 * n), g_a = buffer(1024 * n), g_b = buffer(1024 * n);
        trainbench::gather_samples(data.train, indices.data(), n, x.data(), labels.data(), nullptr);
        const float* w[3] = {&params[offsets[0]], &params[offsets[1]], &params[offsets[2]]};
        const float* b[3] = {w[0] + 784 * 1024, w[1] + 1024 * 1024, w[2] + 1024 * 10};
        float* gw[3] = {&grads[offsets[0]], &grads[offsets[1]], &grads[offsets[2]]};
        float* gb[3] = {gw[0] + 784 * 1024, gw[1] + 1024 * 1024, gw[2] + 1024 * 10};
        auto write_mode = [](int micro) {
            return micro == 0 ? trainbench::GradientWrite::overwrite : trainbench::GradientWrite::accumulate;
        };
        int64_t step = 0;
        using trainbench::Activation;
        std::vector<Piece> pieces = {
            {"gather batch (uint8 -> float)", [&](int) { trainbench::gather_samples(data.train, indices.data(), n, x.data(), labels.data(), nullptr); }},
            {"pack W and W^T (once)", [&](int) { pack_all(); }, 0.0, true},
            {"L1 forward 784->1024", [&](int) { trainbench::packed_linear_forward(forward_layouts[0], packed_forward[0], b[0], x.data(), z1.data(), n); }, 2.0 * 784 * 1024},
            {"relu forward x2", [&](int) {
                 trainbench::activation_forward(Activation::relu, z1.data(), a1.data(), 1024 * n);
                 trainbench::activation_forward(Activation::relu, z2.data(), a2.data(), 1024 * n); }},
            {"L2 forward 1024->1024", [&](int) { trainbench::packed_linear_forward(forward_layouts[1], packed_forward[1], b[1], a1.data(), z2.data(), n); }, 2.0 * 1024 * 1024},
            {"L3 forward 1024->10", [&](int) { trainbench::packed_linear_forward(forward_layouts[2], packed_forward[2], b[2], a2.data(), logits.data(), n); }, 2.0 * 1024 * 10},
            {"softmax cross-entropy", [&](int) { trainbench::softmax_cross_entropy(logits.data(), labels.data(), 10, n, g_a.data(), 1.0f / 256, nullptr); }},
            {"L3 backward dW,db,dX", [&](int micro) { trainbench::linear_backward_packed(transposed_layouts[2], packed_transposed[2], a2.data(), g_a.data(), gw[2], gb[2], g_b.data(), 1024, 10, n, write_mode(micro)); }, 4.0 * 1024 * 10},
            {"relu backward x2", [&](int) {
                 trainbench::activation_backward(Activation::relu, nullptr, a2.data(), g_b.data(), 1024 * n);
                 trainbench::activation_backward(Activation::relu, nullptr, a1.data(), g_a.data(), 1024 * n); }},
            {"L2 backward dW,db,dX", [&](int micro) { trainbench::linear_backward_packed(transposed_layouts[1], packed_transposed[1], a1.data(), g_b.data(), gw[1], gb[1], g_a.data(), 1024, 1024, n, write_mode(micro)); }, 4.0 * 1024 * 1024},
            {"L1 backward dW,db", [&](int micro) { trainbench::linear_weight_grad(x.data(), g_a.data(), gw[0], gb[0], 784, 1024, n, write_mode(micro)); }, 2.0 * 784 * 1024},
            {"grad norm (sum of squares)", [&](int) {
                 if (trainbench::gradient_norm_squared(grads.data(), parameters) < 0) std::puts(""); }, 0.0, true},
            {"adam step", [&](int) { trainbench::optimizer_step_cpu(adam, params.data(), grads.data(), state.data(), parameters, 1e-3, 1.0, ++step); }, 0.0, true},
        };
        for (int r = 0; r < repeats + 3; ++r)
            for (auto& p : pieces) {
                const int calls = p.per_update ? 1 : static_cast<int>(step_size);
                const auto start = Clock::now();
                for (int micro = 0; micro < calls; ++micro) p.run(micro);
                const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
                if (r >= 3) p.ms.push_back(ms);
            }
        tables.push_back(std::move(pieces));
    }

    std::printf("  %-30s %22s %22s %9s\n", "", "step_size 1 (1 x 256)", "step_size 4 (4 x 64)", "change");
    double totals[2] = {0.0, 0.0};
    for (size_t i = 0; i < tables[0].size(); ++i) {
        std::printf("  %-30s", tables[0][i].name.c_str());
        double ms[2];
        for (int s = 0; s < 2; ++s) {
            const Piece& p = tables[s][i];
            ms[s] = median(p.ms);
            totals[s] += ms[s];
            if (p.flops_per_sample > 0)
                std::printf(" %8.3f ms %6.1f GF/s", ms[s], p.flops_per_sample * global_batch / (ms[s] * 1e6));
            else
                std::printf(" %8.3f ms %11s", ms[s], "");
        }
        std::printf(" %+8.3f ms\n", ms[1] - ms[0]);
    }
    std::printf("  %-30s %8.3f ms %11s %8.3f ms %11s %+8.3f ms (%+.1f%%)\n", "sum", totals[0], "", totals[1], "",
                totals[1] - totals[0], 100.0 * (totals[1] - totals[0]) / totals[0]);
    return 0;
}
