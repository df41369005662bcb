#pragma once
// The three matrix products of a Linear layer in the CUDA engine's layouts, described once for
// the engine (cuda_engine.cpp) and the benchmark that times them (bench/gpu/
// cuda_products.cpp). Activations and their gradients are column-major [features x count];
// a weight is torch's row-major [out, in], i.e. the column-major [in x out] matrix W^T.
#include <cstdint>

#include "backend/cuda/gemm.hpp"

namespace trainbench::cuda {

// output [out x count] = W [out x in] · input [in x count] (+ bias, ReLU by the epilogue).
inline GemmCall linear_forward_product(int64_t in, int64_t out, int64_t count, const void* weight,
                                       const void* input, void* output, cudaDataType_t type,
                                       const void* bias, GemmEpilogue epilogue) {
    GemmCall call;
    call.trans_a = CUBLAS_OP_T;
    call.trans_b = CUBLAS_OP_N;
    call.m = out;
    call.n = count;
    call.k = in;
    call.a = weight;
    call.lda = in;
    call.b = input;
    call.ldb = in;
    call.d = output;
    call.ldd = out;
    call.input_type = call.output_type = type;
    call.bias = bias;
    call.epilogue = epilogue;
    return call;
}

// dW^T [in x out] (+)= input [in x count] · dz^T, in fp32: overwritten by the first micro-batch
// of an update, added to by the later ones.
inline GemmCall linear_weight_grad_product(int64_t in, int64_t out, int64_t count, const void* input,
                                           const void* dz, float* weight_grad, cudaDataType_t type,
                                           bool accumulate) {
    GemmCall call;
    call.trans_a = CUBLAS_OP_N;
    call.trans_b = CUBLAS_OP_T;
    call.m = in;
    call.n = out;
    call.k = count;
    call.a = input;
    call.lda = in;
    call.b = dz;
    call.ldb = out;
    call.d = weight_grad;
    call.ldd = in;
    call.input_type = type;
    call.output_type = CUDA_R_32F;
    call.beta = accumulate ? 1.0f : 0.0f;
    return call;
}

// d_input [in x count] = W^T [in x out] · dz [out x count], W and dz in `type`, d_input in fp32
// (activation gradients stay fp32 in every precision, as on the CPU).
inline GemmCall linear_input_grad_product(int64_t in, int64_t out, int64_t count, const void* weight,
                                          const void* dz, float* d_input, cudaDataType_t type) {
    GemmCall call;
    call.trans_a = CUBLAS_OP_N;
    call.trans_b = CUBLAS_OP_N;
    call.m = in;
    call.n = count;
    call.k = out;
    call.a = weight;
    call.lda = in;
    call.b = dz;
    call.ldb = out;
    call.d = d_input;
    call.ldd = in;
    call.input_type = type;
    call.output_type = CUDA_R_32F;
    return call;
}

}  // namespace trainbench::cuda
