#pragma once
// The device peak that MFU (model FLOPs utilisation) divides by: measured on this machine,
// never a data-sheet number. On the CPU it is the engine's own fp32 matrix product at the
// run's thread count (its 16-bit runs multiply in fp32 too); on CUDA, cuBLASLt's product in
// the run's precision (backend/cuda/cuda_matmul_peak.hpp). Measured once per process (0.1-0.5 s)
// and kept as the best of all measurements in the user's cache folder (peak_flops.tsv: one
// line per CPU model, thread count and vector ISA of the build, or per GPU and precision), so a
// measurement disturbed by other programs does not stay the reference. With the environment
// variable TRAINBENCH_REUSE_PEAK set, a cached peak is taken as it is, without measuring.
#include <string>

#include "trainbench/run_config.hpp"

namespace trainbench {

struct MeasuredPeak {
    double flops_per_second = 0.0;  // 0: no peak for this device (MFU is then not reported)
    std::string source;             // how it was obtained, for display
};

// Call after the run's engine exists (it sizes the CPU worker team the measurement uses).
MeasuredPeak device_peak_flops(const RunConfig& config);

}  // namespace trainbench
