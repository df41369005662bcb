// The devices a run can use, for the app's device list and the CLI's checks. The CPU is
// always there; CUDA devices only in a CUDA build on a machine whose driver sees a GPU.
#include <unistd.h>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "trainbench/trainer.hpp"

#ifdef TRAINBENCH_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace trainbench {
namespace {

DeviceInfo cpu_device() {
    DeviceInfo cpu;
    cpu.id = "cpu";
    const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
    cpu.name = "CPU (" + std::to_string(threads) + " threads)";
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page_size = sysconf(_SC_PAGE_SIZE);
    if (pages > 0 && page_size > 0) cpu.memory_bytes = static_cast<int64_t>(pages) * page_size;
    return cpu;
}

}  // namespace

std::vector<DeviceInfo> available_devices() {
    std::vector<DeviceInfo> devices{cpu_device()};
#ifdef TRAINBENCH_WITH_CUDA
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError();  // no driver or no GPU: the CPU stays the only device
        return devices;
    }
    for (int index = 0; index < count; ++index) {
        cudaDeviceProp properties{};
        if (cudaGetDeviceProperties(&properties, index) != cudaSuccess) {
            cudaGetLastError();
            continue;
        }
        DeviceInfo gpu;
        gpu.id = "cuda:" + std::to_string(index);
        gpu.name = properties.name;
        gpu.memory_bytes = static_cast<int64_t>(properties.totalGlobalMem);
        gpu.compute_major = properties.major;
        gpu.compute_minor = properties.minor;
        devices.push_back(gpu);
    }
#endif
    return devices;
}

std::string cuda_unavailable_reason() {
#ifdef TRAINBENCH_WITH_CUDA
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
        cudaGetLastError();
        return std::string("no NVIDIA GPU found (cudaGetDeviceCount: ") + cudaGetErrorString(status) + ")";
    }
    if (count == 0) return "no NVIDIA GPU found (cudaGetDeviceCount reports 0 devices)";
    return {};
#else
    return "this build has no CUDA support (nvcc was not found when it was built)";
#endif
}

}  // namespace trainbench
