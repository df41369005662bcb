#include "train/peak_flops.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <unistd.h>

#include "backend/cpu/cpu_matmul_peak.hpp"
#ifdef TRAINBENCH_WITH_CUDA
#include <cuda_runtime.h>

#include "backend/cuda/cuda_matmul_peak.hpp"
#endif
#include "io/cache_folder.hpp"
#include "parallel/worker_team.hpp"
#include "train/engine_factory.hpp"
#include "trainbench/error.hpp"

namespace trainbench {
namespace {

std::string cpu_model_name() {
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line;
    while (std::getline(cpuinfo, line))
        if (line.rfind("model name", 0) == 0) {
            const auto colon = line.find(':');
            if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
        }
    return "unknown CPU";
}

// The widest vector instructions this build was compiled for (-march=native decides).
const char* build_vector_isa() {
#if defined(__AVX512F__)
    return "avx512";
#elif defined(__AVX2__)
    return "avx2";
#else
    return "baseline";
#endif
}

std::map<std::string, double> read_cache(const std::filesystem::path& path) {
    std::map<std::string, double> entries;
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
        const auto tab = line.rfind('\t');
        if (tab == std::string::npos) continue;
        try {
            const double flops = std::stod(line.substr(tab + 1));
            if (flops > 0.0) entries[line.substr(0, tab)] = flops;
        } catch (const std::exception&) {
            // A damaged line is measured again rather than trusted.
        }
    }
    return entries;
}

// Best effort: a cache that cannot be written only costs a new measurement next time.
void write_cache(const std::filesystem::path& path, const std::map<std::string, double>& entries) {
    std::error_code error;
    std::filesystem::create_directories(path.parent_path(), error);
    const std::filesystem::path temporary = path.string() + ".tmp" + std::to_string(::getpid());
    {
        std::ofstream out(temporary);
        for (const auto& [key, flops] : entries) out << key << '\t' << flops << '\n';
        if (!out) {
            std::filesystem::remove(temporary, error);
            return;
        }
    }
    std::filesystem::rename(temporary, path, error);
    if (error) std::filesystem::remove(temporary, error);
}

// The peak under `key`: measured once per process, and the best of that and every earlier
// measurement on this machine (the cache file). A measurement taken while other programs ran
// is low; keeping the best makes the peak converge to the machine's, so MFU is not inflated
// for good by one busy moment.
template <class Measure>
MeasuredPeak cached_peak(const std::string& key, const std::string& what, Measure measure) {
    static std::mutex mutex;
    static std::map<std::string, double> known;  // this process's results
    const std::lock_guard<std::mutex> lock(mutex);
    auto described = [&](double flops, const std::string& how) {
        char figure[64];
        if (flops >= 1e12) std::snprintf(figure, sizeof figure, "%.1f TFLOP/s", flops / 1e12);
        else std::snprintf(figure, sizeof figure, "%.1f GFLOP/s", flops / 1e9);
        return MeasuredPeak{flops, what + ", " + figure + ", " + how};
    };
    if (const auto it = known.find(key); it != known.end()) return described(it->second, "measured earlier");
    std::filesystem::path path;
    try {
        path = user_cache_folder() / "peak_flops.tsv";
    } catch (const Error&) {
        // No cache folder: this run's measurement alone.
    }
    auto entries = path.empty() ? std::map<std::string, double>{} : read_cache(path);
    const auto earlier = entries.find(key);
    // Under a tool that slows every kernel a hundredfold (compute-sanitizer), the measurement
    // alone would take minutes: TRAINBENCH_REUSE_PEAK takes the cached peak when there is one.
    if (earlier != entries.end() && std::getenv("TRAINBENCH_REUSE_PEAK") != nullptr) {
        known[key] = earlier->second;
        return described(earlier->second, "the best of the measurements in " + path.string() +
                                              " (not measured again: TRAINBENCH_REUSE_PEAK)");
    }
    const double measured = measure();
    const double best = earlier == entries.end() ? measured : std::max(measured, earlier->second);
    known[key] = best;
    if (!path.empty() && best != (earlier == entries.end() ? 0.0 : earlier->second)) {
        entries[key] = best;
        write_cache(path, entries);
    }
    return described(best, earlier == entries.end() ? std::string("measured now")
                                                    : "the best of the measurements in " + path.string());
}

}  // namespace

MeasuredPeak device_peak_flops(const RunConfig& config) {
    if (is_cuda_device(config.device)) {
#ifdef TRAINBENCH_WITH_CUDA
        const int index = cuda_device_index(config.device);
        cudaDeviceProp properties{};
        if (cudaGetDeviceProperties(&properties, index) != cudaSuccess) return {0.0, "no peak: the GPU did not answer"};
        const std::string precision = to_string(config.precision);
        return cached_peak(std::string(properties.name) + " | " + precision + " | cuBLASLt",
                           "cuBLASLt's " + precision + " matrix product on " + properties.name,
                           [&] { return measure_cuda_matmul_flops(index, config.precision).flops_per_second; });
#else
        return {0.0, "no peak: built without CUDA"};
#endif
    }
    // The product the run's linear layers use: Eigen's or oneDNN's fp32 one (16-bit values
    // widened), or oneDNN's bf16 one.
    const int threads = WorkerTeam::shared().members();
    const ProductKernel kernel = choose_product_kernel(config.cpu_products, config.precision);
    const std::string suffix = kernel == ProductKernel::eigen ? "" : " | " + describe(kernel);
    return cached_peak(cpu_model_name() + " | " + std::to_string(threads) + " threads | " + build_vector_isa() + suffix,
                       "the engine's " + describe(kernel) + " matrix product on " + std::to_string(threads) +
                           (threads == 1 ? " thread" : " threads"),
                       [kernel] { return measure_cpu_matmul_flops(kernel); });
}

}  // namespace trainbench
