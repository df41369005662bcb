#pragma once
// The CUDA device's matrix-product peak as the engine reaches it: cuBLASLt (the engine's own
// product path, backend/cuda/gemm.hpp) on a 4096^3 product in the run's precision (fp32 with
// true fp32 arithmetic, no TF32; bf16 or fp16 inputs on the tensor cores with fp32
// accumulation), the best of several event-timed products after an untimed one. Allocates
// about 200 MiB of device memory for the duration; call it outside training.
#include <string>

#include "trainbench/run_config.hpp"

namespace trainbench {

struct CudaMatmulPeak {
    double flops_per_second = 0.0;
    std::string device_name;
};

CudaMatmulPeak measure_cuda_matmul_flops(int device_index, Precision precision);

}  // namespace trainbench
