#pragma once
// Functions written once for the CPU and the GPU: host and device code where nvcc compiles them,
// plain inline functions for the C++ compiler.
#ifdef __CUDACC__
#define TRAINBENCH_HOST_DEVICE __host__ __device__
#else
#define TRAINBENCH_HOST_DEVICE
#endif
