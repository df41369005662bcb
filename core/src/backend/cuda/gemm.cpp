#include "backend/cuda/gemm.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>

#include "backend/cuda/cuda_check.hpp"
#include "trainbench/error.hpp"

namespace trainbench::cuda {

namespace {

// cuBLASLt assumes 256-byte aligned operands unless told otherwise; telling it the real
// alignment keeps the chosen kernel valid for offset pointers.
uint32_t alignment_of(const void* ptr) {
    const auto address = reinterpret_cast<uintptr_t>(ptr);
    uint32_t alignment = 256;
    while (alignment > 1 && address % alignment != 0) alignment /= 2;
    return alignment;
}

cublasLtEpilogue_t to_cublas(GemmEpilogue epilogue) {
    switch (epilogue) {
        case GemmEpilogue::bias: return CUBLASLT_EPILOGUE_BIAS;
        case GemmEpilogue::relu_bias: return CUBLASLT_EPILOGUE_RELU_BIAS;
        case GemmEpilogue::none: break;
    }
    return CUBLASLT_EPILOGUE_DEFAULT;
}

}  // namespace

struct GemmRunner::Plan {
    // Key: everything that decides the algorithm.
    cublasOperation_t trans_a, trans_b;
    int64_t m, n, k, lda, ldb, ldd;
    cudaDataType_t input_type, output_type;
    bool accumulate;
    GemmEpilogue epilogue;
    uint32_t align_a, align_b, align_d, align_bias;

    bool supported = false;
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t layout_a = nullptr, layout_b = nullptr, layout_d = nullptr;
    cublasLtMatmulAlgo_t algo{};

    bool matches(const GemmCall& call, uint32_t a_align, uint32_t b_align, uint32_t d_align, uint32_t bias_align) const {
        return trans_a == call.trans_a && trans_b == call.trans_b && m == call.m && n == call.n &&
               k == call.k && lda == call.lda && ldb == call.ldb && ldd == call.ldd &&
               input_type == call.input_type && output_type == call.output_type &&
               accumulate == (call.beta != 0.0f) && epilogue == call.epilogue &&
               align_a == a_align && align_b == b_align && align_d == d_align && align_bias == bias_align;
    }

    ~Plan() {
        if (layout_d) cublasLtMatrixLayoutDestroy(layout_d);
        if (layout_b) cublasLtMatrixLayoutDestroy(layout_b);
        if (layout_a) cublasLtMatrixLayoutDestroy(layout_a);
        if (desc) cublasLtMatmulDescDestroy(desc);
    }
};

GemmRunner::GemmRunner() {
    TRAINBENCH_CUBLAS_CHECK(cublasLtCreate(&handle_));
    plans_.reserve(64);
}

GemmRunner::~GemmRunner() {
    for (Plan* plan : plans_) delete plan;
    if (handle_) cublasLtDestroy(handle_);
}

void GemmRunner::set_workspace(void* workspace, size_t bytes) {
    workspace_ = workspace;
    workspace_bytes_ = bytes;
}

GemmRunner::Plan& GemmRunner::plan_for(const GemmCall& call) {
    const uint32_t align_a = alignment_of(call.a);
    const uint32_t align_b = alignment_of(call.b);
    const uint32_t align_d = alignment_of(call.d);
    // An epilogue's algorithm is chosen for its bias pointer's alignment (biases at arbitrary
    // offsets of a parameter store need another than 256-byte aligned ones).
    const uint32_t align_bias = call.epilogue == GemmEpilogue::none ? 0 : alignment_of(call.bias);
    for (Plan* plan : plans_) {
        if (plan->matches(call, align_a, align_b, align_d, align_bias)) return *plan;
    }

    // Owned here until it is complete: a cuBLASLt failure below must not leave a half-built
    // plan in the cache, where the next call would read it as "no algorithm".
    auto owner = std::unique_ptr<Plan>(new Plan{call.trans_a, call.trans_b, call.m, call.n, call.k,
                                                call.lda, call.ldb, call.ldd, call.input_type,
                                                call.output_type, call.beta != 0.0f, call.epilogue,
                                                align_a, align_b, align_d, align_bias});
    Plan* plan = owner.get();

    TRAINBENCH_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    TRAINBENCH_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &call.trans_a, sizeof(call.trans_a)));
    TRAINBENCH_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &call.trans_b, sizeof(call.trans_b)));
    const cublasLtEpilogue_t epilogue = to_cublas(call.epilogue);
    TRAINBENCH_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    if (call.epilogue != GemmEpilogue::none) {
        // The heuristic needs a bias pointer to judge alignment; the real one is set per call.
        TRAINBENCH_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
            plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &call.bias, sizeof(call.bias)));
    }

    const bool a_transposed = call.trans_a != CUBLAS_OP_N;
    const bool b_transposed = call.trans_b != CUBLAS_OP_N;
    TRAINBENCH_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(
        &plan->layout_a, call.input_type, a_transposed ? call.k : call.m,
        a_transposed ? call.m : call.k, call.lda));
    TRAINBENCH_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(
        &plan->layout_b, call.input_type, b_transposed ? call.n : call.k,
        b_transposed ? call.k : call.n, call.ldb));
    TRAINBENCH_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&plan->layout_d, call.output_type, call.m, call.n, call.ldd));

    cublasLtMatmulPreference_t preference = nullptr;
    TRAINBENCH_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
    const uint64_t workspace_bytes = workspace_bytes_;
    const auto set_preference = [&](cublasLtMatmulPreferenceAttributes_t attribute, const void* value,
                                    size_t size) {
        const cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(preference, attribute, value, size);
        if (status != CUBLAS_STATUS_SUCCESS) {
            cublasLtMatmulPreferenceDestroy(preference);
            TRAINBENCH_CUBLAS_CHECK(status);
        }
    };
    set_preference(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes, sizeof(workspace_bytes));
    set_preference(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof(align_a));
    set_preference(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof(align_b));
    set_preference(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d, sizeof(align_d));
    set_preference(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d, sizeof(align_d));

    cublasLtMatmulHeuristicResult_t result{};
    int returned = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
        handle_, plan->desc, plan->layout_a, plan->layout_b, plan->layout_d, plan->layout_d,
        preference, 1, &result, &returned);
    cublasLtMatmulPreferenceDestroy(preference);
    if (status == CUBLAS_STATUS_SUCCESS && returned > 0) {
        plan->supported = true;
        plan->algo = result.algo;
    } else if (status != CUBLAS_STATUS_NOT_SUPPORTED && status != CUBLAS_STATUS_SUCCESS) {
        TRAINBENCH_CUBLAS_CHECK(status);
    }
    plans_.push_back(owner.release());
    return *plan;
}

bool GemmRunner::run(const GemmCall& call, cudaStream_t stream) {
    if (call.m == 0 || call.n == 0) return true;
    Plan& plan = plan_for(call);
    if (!plan.supported) return false;
    if (call.epilogue != GemmEpilogue::none) {
        TRAINBENCH_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
            plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &call.bias, sizeof(call.bias)));
    }
    const float alpha = 1.0f;
    TRAINBENCH_CUBLAS_CHECK(cublasLtMatmul(handle_, plan.desc, &alpha, call.a, plan.layout_a,
                                           call.b, plan.layout_b, &call.beta, call.d,
                                           plan.layout_d, call.d, plan.layout_d, &plan.algo,
                                           workspace_, workspace_bytes_, stream));
    return true;
}

std::vector<float> time_gemm_ms(GemmRunner& gemm, const GemmCall& call, cudaStream_t stream, int warmup, int repeats) {
    for (int i = 0; i < warmup; ++i)
        if (!gemm.run(call, stream)) throw Error("cuBLASLt has no algorithm for this product");
    cudaEvent_t start = nullptr, stop = nullptr;
    TRAINBENCH_CUDA_CHECK(cudaEventCreate(&start));
    TRAINBENCH_CUDA_CHECK(cudaEventCreate(&stop));
    std::vector<float> times;
    try {
        for (int i = 0; i < repeats; ++i) {
            TRAINBENCH_CUDA_CHECK(cudaEventRecord(start, stream));
            gemm.run(call, stream);
            TRAINBENCH_CUDA_CHECK(cudaEventRecord(stop, stream));
            TRAINBENCH_CUDA_CHECK(cudaEventSynchronize(stop));
            float ms = 0.0f;
            TRAINBENCH_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
            times.push_back(ms);
        }
        TRAINBENCH_CUDA_CHECK(cudaGetLastError());
    } catch (...) {
        cudaEventDestroy(start);
        cudaEventDestroy(stop);
        throw;
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return times;
}

}  // namespace trainbench::cuda
