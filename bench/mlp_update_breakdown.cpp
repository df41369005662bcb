// Where the time of one fp32 update of issue 2's benchmark MLP goes in the CPU engine: the
// engine's own kernels (nn/linear, nn/activation, nn/loss, optim/optimizer_step) called one
// piece at a time with a timer around each, at micro-batch 256 (step_size 1) and 64
// (step_size 4). For the products it also times Eigen's own threaded product of the same
// shape, the alternative to the engine's per-thread slicing.
#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <omp.h>

#include "nn/activation.hpp"
#include "nn/linear.hpp"
#include "nn/loss.hpp"
#include "optim/optimizer_step.hpp"
#include "trainbench/dataset.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using ColMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

struct Piece {
    std::string name;
    std::function<void()> run;
    double flops = 0.0;
    std::vector<double> ms;
};

void time_pieces(std::vector<Piece>& pieces, int repeats, int micro_batches) {
    for (int r = 0; r < repeats + 3; ++r)
        for (auto& p : pieces) {
            const auto start = Clock::now();
            for (int k = 0; k < micro_batches; ++k) p.run();
            const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
            if (r >= 3) p.ms.push_back(ms);
        }
}

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
    omp_set_num_threads(threads);
    Eigen::setNbThreads(threads);

    const int64_t global_batch = 256;
    const int64_t widths[] = {784, 1024, 1024, 10};
    int64_t offsets[4] = {0, 0, 0, 0};  // weight offsets; bias follows each weight
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

    trainbench::OptimizerConfig adam;
    adam.kind = trainbench::OptimizerKind::adam;

    std::printf("fp32 update of MLP 784-1024-1024-10 (%lld parameters), global batch %lld, %d threads; "
                "median of %d repeats, ms per update (all micro-batches of the update)\n",
                static_cast<long long>(parameters), static_cast<long long>(global_batch), threads, repeats);
    for (const int64_t step_size : {int64_t{1}, int64_t{4}}) {
        const int64_t n = global_batch / step_size;
        std::vector<float> x(784 * n), z1(1024 * n), a1(1024 * n), z2(1024 * n), a2(1024 * n), logits(10 * n),
            g_a(1024 * n), g_b(1024 * n);
        trainbench::gather_samples(data.train, indices.data(), n, x.data(), labels.data(), nullptr);
        const float* w[3] = {&params[offsets[0]], &params[offsets[1]], &params[offsets[2]]};
        const float* b[3] = {w[0] + 784 * 1024, w[1] + 1024 * 1024, w[2] + 1024 * 10};
        float* gw[3] = {&grads[offsets[0]], &grads[offsets[1]], &grads[offsets[2]]};
        float* gb[3] = {gw[0] + 784 * 1024, gw[1] + 1024 * 1024, gw[2] + 1024 * 10};
        const double macs_n = static_cast<double>(n);
        int64_t step = 0;

        std::vector<Piece> pieces = {
            {"gather batch (uint8 -> float)", [&] { trainbench::gather_samples(data.train, indices.data(), n, x.data(), labels.data(), nullptr); }},
            {"L1 forward 784->1024", [&] { trainbench::linear_forward(w[0], b[0], x.data(), z1.data(), 784, 1024, n); }, 2 * 784 * 1024 * macs_n},
            {"relu forward x2", [&] {
                 trainbench::activation_forward(trainbench::Activation::relu, z1.data(), a1.data(), 1024 * n);
                 trainbench::activation_forward(trainbench::Activation::relu, z2.data(), a2.data(), 1024 * n); }},
            {"L2 forward 1024->1024", [&] { trainbench::linear_forward(w[1], b[1], a1.data(), z2.data(), 1024, 1024, n); }, 2 * 1024 * 1024 * macs_n},
            {"L3 forward 1024->10", [&] { trainbench::linear_forward(w[2], b[2], a2.data(), logits.data(), 1024, 10, n); }, 2 * 1024 * 10 * macs_n},
            {"softmax cross-entropy", [&] { trainbench::softmax_cross_entropy(logits.data(), labels.data(), 10, n, g_a.data(), 1.0f / 256, nullptr); }},
            {"L3 backward dW,db,dX", [&] { trainbench::linear_backward(w[2], a2.data(), g_a.data(), gw[2], gb[2], g_b.data(), 1024, 10, n); }, 4 * 1024 * 10 * macs_n},
            {"relu backward x2", [&] {
                 trainbench::activation_backward(trainbench::Activation::relu, nullptr, a2.data(), g_b.data(), 1024 * n);
                 trainbench::activation_backward(trainbench::Activation::relu, nullptr, a1.data(), g_a.data(), 1024 * n); }},
            {"L2 backward dW,db", [&] { trainbench::linear_backward(w[1], a1.data(), g_b.data(), gw[1], gb[1], nullptr, 1024, 1024, n); }, 2 * 1024 * 1024 * macs_n},
            {"L2 backward dX", [&] {
                 Eigen::Map<const RowMajor> W(w[1], 1024, 1024);
                 Eigen::Map<const ColMajor> dZ(g_b.data(), 1024, n);
                 // the engine's slicing: one single-threaded product per thread over its columns
#pragma omp parallel num_threads(threads)
                 {
                     const int64_t t = omp_get_thread_num(), first = n * t / threads, last = n * (t + 1) / threads;
                     Eigen::Map<ColMajor> dX(g_a.data() + first * 1024, 1024, last - first);
                     dX.noalias() = W.transpose() * dZ.middleCols(first, last - first);
                 } }, 2 * 1024 * 1024 * macs_n},
            {"L1 backward dW,db", [&] { trainbench::linear_backward(w[0], x.data(), g_a.data(), gw[0], gb[0], nullptr, 784, 1024, n); }, 2 * 784 * 1024 * macs_n},
        };
        time_pieces(pieces, repeats, static_cast<int>(step_size));

        std::vector<Piece> per_update = {
            {"zero_grad", [&] { std::fill(grads.begin(), grads.end(), 0.0f); }},
            {"grad norm (sum of squares)", [&] {
                 double s = 0.0;
#pragma omp parallel for reduction(+ : s) schedule(static)
                 for (int64_t i = 0; i < parameters; ++i) s += static_cast<double>(grads[i]) * grads[i];
                 if (s < 0) std::puts(""); }},
            {"adam step", [&] { trainbench::optimizer_step_cpu(adam, params.data(), grads.data(), state.data(), parameters, 1e-3, 1.0, ++step); }},
        };
        time_pieces(per_update, repeats, 1);
        // Alternatives to the engine's way of splitting a product over threads: Eigen's own
        // threaded product (one call), and splitting W's rows instead of the batch's columns,
        // so that each thread packs only its share of W rather than all of it.
        std::vector<Piece> reference = {
            {"[alt] L2 forward, split W rows", [&] {
                 Eigen::Map<const RowMajor> W(w[1], 1024, 1024);
                 Eigen::Map<const ColMajor> X(a1.data(), 1024, n);
                 Eigen::Map<ColMajor> Z(z2.data(), 1024, n);
#pragma omp parallel num_threads(threads)
                 {
                     const int64_t t = omp_get_thread_num(), first = 1024 * t / threads, last = 1024 * (t + 1) / threads;
                     Z.middleRows(first, last - first).noalias() = W.middleRows(first, last - first) * X;
                 } }, 2 * 1024 * 1024 * macs_n},
            {"[alt] L2 dX, split W columns", [&] {
                 Eigen::Map<const RowMajor> W(w[1], 1024, 1024);
                 Eigen::Map<const ColMajor> dZ(g_b.data(), 1024, n);
                 Eigen::Map<ColMajor> dX(g_a.data(), 1024, n);
#pragma omp parallel num_threads(threads)
                 {
                     const int64_t t = omp_get_thread_num(), first = 1024 * t / threads, last = 1024 * (t + 1) / threads;
                     dX.middleRows(first, last - first).noalias() = W.middleCols(first, last - first).transpose() * dZ;
                 } }, 2 * 1024 * 1024 * macs_n},
            {"[alt] L2 forward, Eigen-threaded", [&] {
                 Eigen::Map<const RowMajor> W(w[1], 1024, 1024);
                 Eigen::Map<const ColMajor> X(a1.data(), 1024, n);
                 Eigen::Map<ColMajor> Z(z2.data(), 1024, n);
                 Z.noalias() = W * X; }, 2 * 1024 * 1024 * macs_n},
            {"[alt] L2 dW, Eigen-threaded", [&] {
                 Eigen::Map<RowMajor> dW(gw[1], 1024, 1024);
                 Eigen::Map<const ColMajor> dZ(g_b.data(), 1024, n);
                 Eigen::Map<const ColMajor> X(a1.data(), 1024, n);
                 dW.noalias() += dZ * X.transpose(); }, 2 * 1024 * 1024 * macs_n},
        };
        time_pieces(reference, repeats, static_cast<int>(step_size));

        std::printf("\nstep_size %lld (micro-batch %lld):\n", static_cast<long long>(step_size), static_cast<long long>(n));
        double total = 0.0, product_ms = 0.0, product_flops = 0.0;
        for (auto* group : {&pieces, &per_update})
            for (auto& p : *group) {
                const double ms = median(p.ms);
                total += ms;
                if (p.flops > 0) {
                    product_ms += ms;
                    product_flops += p.flops * step_size;
                    std::printf("  %-34s %8.3f ms  %6.1f GFLOP/s\n", p.name.c_str(), ms, p.flops * step_size / (ms * 1e6));
                } else {
                    std::printf("  %-34s %8.3f ms\n", p.name.c_str(), ms);
                }
            }
        std::printf("  %-34s %8.3f ms  (products %.3f ms = %.0f%%, %.1f GFLOP/s)\n", "sum", total, product_ms,
                    100.0 * product_ms / total, product_flops / (product_ms * 1e6));
        for (auto& p : reference)
            std::printf("  %-34s %8.3f ms  %6.1f GFLOP/s\n", p.name.c_str(), median(p.ms), p.flops * step_size / (median(p.ms) * 1e6));
    }
    return 0;
}
