#pragma once
#include "plan/graph_plan.hpp"

namespace trainbench {

// FLOP/s of the CPU engine's own matrix product with `kernel` (a Linear layer's forward product:
// Eigen's packed_linear_forward, or oneDNN's in fp32 or bf16) on a large square problem (1024 x
// 1024 by 1024 rows) with the shared worker team at its current size: the best of several timed
// products after an untimed one. Takes about 0.1-0.5 s and allocates 12 MiB for the duration,
// so call it outside training (the trainer caches it).
double measure_cpu_matmul_flops(ProductKernel kernel = ProductKernel::eigen);

}  // namespace trainbench
