// The machine's measured single-precision matrix-product peak with N threads (Eigen, the
// library the CPU engine multiplies with), and the arithmetic of one training update of the
// benchmark MLP, so docs/BENCHMARKS.md can say what share of the peak TrainBench and PyTorch
// reach. The peak is measured, not computed from the CPU's data sheet.
#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;

// Best GFLOP/s of C = A B over `repeats` timed products (one untimed product first).
double best_gflops(int64_t m, int64_t k, int64_t n, int repeats) {
    Matrix a = Matrix::Random(m, k), b = Matrix::Random(k, n), c(m, n);
    c.noalias() = a * b;
    double best_seconds = 1e30;
    for (int r = 0; r < repeats; ++r) {
        const auto start = std::chrono::steady_clock::now();
        c.noalias() = a * b;
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        best_seconds = std::min(best_seconds, seconds);
    }
    // Keeps the products from being optimised away.
    if (c(0, 0) == 12345.678f) std::puts("");
    return 2.0 * static_cast<double>(m) * static_cast<double>(k) * static_cast<double>(n) / best_seconds / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
    int threads = 2, repeats = 5;
    int64_t batch = 256;
    bool json = false;
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        if (flag == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
        else if (flag == "--repeats" && i + 1 < argc) repeats = std::atoi(argv[++i]);
        else if (flag == "--batch" && i + 1 < argc) batch = std::atoll(argv[++i]);
        else if (flag == "--json") json = true;
        else {
            std::fprintf(stderr, "usage: %s [--threads N (2)] [--repeats N (5)] [--batch N (256)] [--json]\n", argv[0]);
            return 2;
        }
    }
    if (threads < 1 || repeats < 1 || batch < 1) {
        std::fprintf(stderr, "--threads, --repeats and --batch must be >= 1\n");
        return 2;
    }
    Eigen::setNbThreads(threads);

    // Large square products are the textbook peak; the MLP's own shapes (batch 256) show what
    // a layer-sized product reaches. The peak is the best of all of them, so that a share of
    // it is never flattered by a weak reference.
    struct Shape {
        const char* name;
        int64_t m, k, n;
    };
    const std::vector<Shape> shapes = {
        {"square 2048", 2048, 2048, 2048},
        {"square 3072", 3072, 3072, 3072},
        {"layer 1024x1024 x batch", 1024, 1024, batch},
        {"layer 1024x784 x batch", 1024, 784, batch},
    };
    double peak = 0.0;
    std::vector<double> results;
    for (const auto& s : shapes) {
        const double gflops = best_gflops(s.m, s.k, s.n, s.m >= 2048 ? repeats : repeats * 20);
        results.push_back(gflops);
        peak = std::max(peak, gflops);
    }

    // One update of the 784-1024-1024-10 MLP: 2 FLOPs per multiply-add forward, 4 backward
    // (input gradient and weight gradient); the first layer needs no input gradient, so it is
    // 4 rather than 6 FLOPs per weight. Bias, activation, loss and optimizer work is
    // element-wise and not counted.
    const int64_t widths[] = {784, 1024, 1024, 10};
    int64_t parameters = 0;
    double flops = 0.0;
    for (int i = 0; i < 3; ++i) {
        const double macs = static_cast<double>(widths[i]) * static_cast<double>(widths[i + 1]);
        parameters += widths[i] * widths[i + 1] + widths[i + 1];
        flops += (i == 0 ? 4.0 : 6.0) * macs * static_cast<double>(batch);
    }

    if (json) {
        std::printf("{\"bench\":\"gemm_peak\",\"threads\":%d,\"eigen\":\"%d.%d.%d\",\"peak_gflops\":%.2f", threads,
                    EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION, peak);
        for (size_t i = 0; i < shapes.size(); ++i)
            std::printf(",\"gflops_%lldx%lldx%lld\":%.2f", static_cast<long long>(shapes[i].m),
                        static_cast<long long>(shapes[i].k), static_cast<long long>(shapes[i].n), results[i]);
        std::printf(",\"mlp_parameters\":%lld,\"batch\":%lld,\"mlp_update_gflop\":%.4f,"
                    "\"update_ms_at_peak\":%.3f}\n",
                    static_cast<long long>(parameters), static_cast<long long>(batch), flops / 1e9,
                    flops / (peak * 1e9) * 1000.0);
    } else {
        std::printf("Eigen %d.%d.%d single-precision products, %d threads, best of %d\n", EIGEN_WORLD_VERSION,
                    EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION, threads, repeats);
        for (size_t i = 0; i < shapes.size(); ++i)
            std::printf("  %-26s %5lld x %5lld x %5lld  %8.1f GFLOP/s\n", shapes[i].name,
                        static_cast<long long>(shapes[i].m), static_cast<long long>(shapes[i].k),
                        static_cast<long long>(shapes[i].n), results[i]);
        std::printf("peak (best of the products above): %.1f GFLOP/s\n", peak);
        std::printf("MLP 784-1024-1024-10, batch %lld: %lld parameters, %.3f GFLOP per update, "
                    "%.2f ms per update at peak (%.0f samples/s)\n",
                    static_cast<long long>(batch), static_cast<long long>(parameters), flops / 1e9,
                    flops / (peak * 1e9) * 1000.0, static_cast<double>(batch) / (flops / (peak * 1e9)));
    }
    return 0;
}
