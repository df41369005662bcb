#include <cstdio>

#include "cli_exit.hpp"
#include "commands.hpp"
#include "trainbench/run_config.hpp"
#include "trainbench/trainer.hpp"

namespace trainbench::cli {

namespace {

int run_devices() {
    bool any_cuda = false;
    for (const DeviceInfo& device : available_devices()) {
        std::printf("%-8s %s", device.id.c_str(), device.name.c_str());
        if (device.memory_bytes > 0) std::printf(", %s", format_bytes(device.memory_bytes).c_str());
        if (device.compute_major > 0)
            std::printf(", compute capability %d.%d", device.compute_major, device.compute_minor);
        std::printf("\n");
        any_cuda = any_cuda || device.id.rfind("cuda", 0) == 0;
    }
    if (!any_cuda) std::printf("cuda     unavailable: %s\n", cuda_unavailable_reason().c_str());
    return kExitSuccess;
}

}  // namespace

Command add_devices_command(CLI::App& parent) {
    CLI::App* command = parent.add_subcommand("devices", "list the devices a run can use");
    return {command, [] { return run_devices(); }};
}

}  // namespace trainbench::cli
