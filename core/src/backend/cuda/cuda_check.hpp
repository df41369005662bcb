#pragma once
// Every CUDA runtime and cuBLAS(Lt) call goes through these checks: a failure throws
// trainbench::Error naming the call site and the driver's own words, instead of letting a
// sticky error surface several calls later in an unrelated place.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "trainbench/error.hpp"

namespace trainbench::cuda {

[[noreturn]] inline void throw_cuda_error(cudaError_t status, const char* call, const char* file,
                                          int line) {
    throw Error(std::string("CUDA error at ") + file + ":" + std::to_string(line) + " in " +
                call + ": " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) +
                "); check the GPU with nvidia-smi or run on --device cpu");
}

[[noreturn]] inline void throw_cublas_error(cublasStatus_t status, const char* call,
                                            const char* file, int line) {
    throw Error(std::string("cuBLAS error at ") + file + ":" + std::to_string(line) + " in " +
                call + ": " + cublasGetStatusName(status) + " (" +
                cublasGetStatusString(status) + "); check the GPU with nvidia-smi or run on --device cpu");
}

}  // namespace trainbench::cuda

#define TRAINBENCH_CUDA_CHECK(call)                                                       \
    do {                                                                                  \
        const cudaError_t trainbench_status_ = (call);                                    \
        if (trainbench_status_ != cudaSuccess)                                            \
            ::trainbench::cuda::throw_cuda_error(trainbench_status_, #call, __FILE__, __LINE__); \
    } while (0)

#define TRAINBENCH_CUBLAS_CHECK(call)                                                     \
    do {                                                                                  \
        const cublasStatus_t trainbench_status_ = (call);                                 \
        if (trainbench_status_ != CUBLAS_STATUS_SUCCESS)                                  \
            ::trainbench::cuda::throw_cublas_error(trainbench_status_, #call, __FILE__, __LINE__); \
    } while (0)

// Kernel launches report configuration errors only through cudaGetLastError.
#define TRAINBENCH_CUDA_CHECK_LAUNCH() TRAINBENCH_CUDA_CHECK(cudaGetLastError())
