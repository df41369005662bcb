#pragma once
// Matrix products through cuBLASLt with fp32 accumulation (CUBLAS_COMPUTE_32F: true fp32 for
// fp32 inputs, no TF32; tensor cores for fp16/bf16 inputs). Matrices are column-major as
// cuBLAS sees them; a torch-style row-major [out, in] weight is the column-major [in x out]
// matrix, used with CUBLAS_OP_T in the forward product.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "plan/cuda_buffer_sizes.hpp"

namespace trainbench::cuda {

enum class GemmEpilogue { none, bias, relu_bias };

struct GemmCall {
    cublasOperation_t trans_a = CUBLAS_OP_N;
    cublasOperation_t trans_b = CUBLAS_OP_N;
    int64_t m = 0, n = 0, k = 0;  // D is m x n, the inner dimension is k
    const void* a = nullptr;
    int64_t lda = 0;
    const void* b = nullptr;
    int64_t ldb = 0;
    void* d = nullptr;  // also C when beta != 0
    int64_t ldd = 0;
    cudaDataType_t input_type = CUDA_R_32F;   // A and B
    cudaDataType_t output_type = CUDA_R_32F;  // C and D
    float beta = 0.0f;
    GemmEpilogue epilogue = GemmEpilogue::none;
    const void* bias = nullptr;  // m entries of output_type, for the bias epilogues
};

class GemmRunner {
public:
    GemmRunner();
    ~GemmRunner();
    GemmRunner(const GemmRunner&) = delete;
    GemmRunner& operator=(const GemmRunner&) = delete;

    void set_workspace(void* workspace, size_t bytes);
    static constexpr size_t kWorkspaceBytes = kCublasWorkspaceBytes;

    // D = A·B (+ beta·D) with the epilogue. Returns false, having launched nothing, when
    // cuBLASLt has no algorithm for this epilogue and layout; callers then fall back to the
    // plain product plus their own kernel. The answer is cached per shape, so the heuristic
    // query runs once per shape, not once per step.
    bool run(const GemmCall& call, cudaStream_t stream);

private:
    struct Plan;
    Plan& plan_for(const GemmCall& call);

    cublasLtHandle_t handle_ = nullptr;
    void* workspace_ = nullptr;
    size_t workspace_bytes_ = 0;
    std::vector<Plan*> plans_;
};

// Times `call`: `warmup` untimed runs (throws Error when cuBLASLt has no algorithm for it),
// then `repeats` runs, each between its own pair of events on `stream`. Returns the
// milliseconds of each timed run, in order.
std::vector<float> time_gemm_ms(GemmRunner& gemm, const GemmCall& call, cudaStream_t stream, int warmup, int repeats);

}  // namespace trainbench::cuda
