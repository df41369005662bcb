#include "train/peak_flops.hpp"

#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <unistd.h>

#include "backend/cpu/cpu_matmul_peak.hpp"
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

}  // namespace

MeasuredPeak device_peak_flops(const RunConfig& config) {
    if (is_cuda_device(config.device)) return {0.0, "no measured peak for CUDA devices yet"};
    const int threads = WorkerTeam::shared().members();
    const std::string key = cpu_model_name() + " | " + std::to_string(threads) + " threads | " + build_vector_isa();
    static std::mutex mutex;
    static std::map<std::string, double> known;  // this process's measurements
    const std::lock_guard<std::mutex> lock(mutex);

    char figure[64];
    auto described = [&](double flops, const std::string& how) {
        std::snprintf(figure, sizeof figure, "%.1f GFLOP/s", flops / 1e9);
        return MeasuredPeak{flops, std::string("the engine's fp32 matrix product, ") + figure + " on " +
                                       std::to_string(threads) + (threads == 1 ? " thread, " : " threads, ") + how};
    };
    if (const auto it = known.find(key); it != known.end()) return described(it->second, "measured earlier");
    std::filesystem::path path;
    try {
        path = user_cache_folder() / "peak_flops.tsv";
    } catch (const Error&) {
        // No cache folder: measure every run.
    }
    auto entries = path.empty() ? std::map<std::string, double>{} : read_cache(path);
    if (const auto it = entries.find(key); it != entries.end()) {
        known[key] = it->second;
        return described(it->second, "measured earlier (" + path.string() + ")");
    }
    const double flops = measure_cpu_matmul_flops();
    known[key] = flops;
    if (!path.empty()) {
        entries[key] = flops;
        write_cache(path, entries);
    }
    return described(flops, "measured now");
}

}  // namespace trainbench
