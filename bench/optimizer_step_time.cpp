// The fused optimizer step alone (optim/optimizer_step.cpp), as the benchmark MLP's update runs
// it (784-1024-1024-10, Adam, 1,863,690 parameters), on the engine's worker team: fp32; fp16
// (the loss-scale undo as the gradient multiplier, the 16-bit working copy with the linear
// weights widened for fp32 products, as on a CPU without fp16 products); bf16 with fp32 products
// (a CPU without bf16 products: widened too, no multiplier). Before each step 64 MiB are read,
// as the forward and backward push the optimizer's arrays out of the caches, and then the
// gradients are written, as a backward leaves them (so they alone may still be cached). Prints
// each case's median step over the repeats, with the lowest and highest.
//
//     optimizer_step_time [--threads 2] [--repeats 200]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "optim/optimizer_step.hpp"
#include "parallel/worker_team.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Case {
    const char* name;
    trainbench::Precision precision;
    double multiplier;
};

}  // namespace

int main(int argc, char** argv) {
    int threads = 2, repeats = 200;
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        if (flag == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
        else if (flag == "--repeats" && i + 1 < argc) repeats = std::atoi(argv[++i]);
        else {
            std::fprintf(stderr, "usage: %s [--threads N (2)] [--repeats N (200)]\n", argv[0]);
            return 2;
        }
    }
    if (threads < 1 || repeats < 1) {
        std::fprintf(stderr, "%s: --threads and --repeats take a number of 1 or more\n", argv[0]);
        return 2;
    }
    trainbench::WorkerTeam::shared().resize(threads);

    // The MLP's tensors in the engine's order: each layer's weight, then its bias.
    const int64_t tensors[] = {784 * 1024, 1024, 1024 * 1024, 1024, 1024 * 10, 10};
    int64_t n = 0;
    for (int64_t size : tensors) n += size;
    std::vector<float> params(n, 0.01f), grads(n), state(2 * n, 0.0f), widened(n);
    std::vector<uint16_t> codes(n);
    std::vector<trainbench::WidenedParameter> widened_ranges;
    for (int64_t begin = 0; int64_t size : tensors) {
        widened_ranges.push_back({.begin = begin, .end = begin + size, .values = widened.data() + begin});
        begin += size;
    }
    std::vector<float> elsewhere(int64_t{16} << 20, 1.0f);  // 64 MiB
    trainbench::OptimizerConfig adam;
    adam.kind = trainbench::OptimizerKind::adam;

    const Case cases[] = {{"fp32", trainbench::Precision::fp32, 1.0},
                          {"fp16, loss scale 1024", trainbench::Precision::fp16, 1.0 / 1024},
                          {"bf16, fp32 products", trainbench::Precision::bf16, 1.0}};
    std::printf("fused Adam step over %lld parameters, %d threads, %d repeats (median, lowest-highest)\n",
                static_cast<long long>(n), threads, repeats);
    for (const Case& c : cases) {
        const trainbench::WorkingCopy copy{.precision = c.precision, .codes = codes.data(), .widened = widened_ranges};
        const bool sixteen_bit = c.precision != trainbench::Precision::fp32;
        std::vector<double> ms;
        for (int r = 0; r < repeats + 5; ++r) {
            float sum = 0.0f;
            for (size_t i = 0; i < elsewhere.size(); i += 16) sum += elsewhere[i];
            if (sum < 0.0f) std::puts("");
            for (int64_t i = 0; i < n; ++i) grads[i] = 1e-3f * static_cast<float>((i + r) % 7 - 3);
            const auto start = Clock::now();
            trainbench::optimizer_step_cpu(adam, params.data(), grads.data(), state.data(), n, 1e-3, c.multiplier, r + 1,
                                           n, sixteen_bit ? &copy : nullptr);
            if (r >= 5) ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
        }
        std::sort(ms.begin(), ms.end());
        std::printf("  %-24s %7.3f ms  (%.3f-%.3f)\n", c.name, ms[ms.size() / 2], ms.front(), ms.back());
    }
    return 0;
}
