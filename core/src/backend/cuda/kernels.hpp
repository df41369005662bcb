#pragma once
// Host-side launchers of the engine's own kernels. Tensors are column-major [rows x count]
// (one sample per column, so a sample's values are contiguous, as on the CPU engine), stored
// in the run's storage type: fp32, or fp16/bf16 for mixed precision. Every launcher checks
// its launch and enqueues on `stream` without synchronising.
#include <cuda_runtime.h>
#include <library_types.h>

#include <cstdint>

#include "plan/cuda_buffer_sizes.hpp"  // kSumSquaresPartials
#include "trainbench/run_config.hpp"

namespace trainbench::cuda {

enum class StorageType { f32, f16, bf16 };
inline int64_t storage_bytes(StorageType type) { return type == StorageType::f32 ? 4 : 2; }
// What a run's precision stores its activations and working weights in.
inline StorageType storage_type_for(Precision precision) {
    switch (precision) {
        case Precision::fp16: return StorageType::f16;
        case Precision::bf16: return StorageType::bf16;
        case Precision::fp32: break;
    }
    return StorageType::f32;
}
// The same type as cuBLAS/cuBLASLt name it.
inline cudaDataType_t cuda_data_type(StorageType type) {
    switch (type) {
        case StorageType::f16: return CUDA_R_16F;
        case StorageType::bf16: return CUDA_R_16BF;
        case StorageType::f32: break;
    }
    return CUDA_R_32F;
}

// --- data_kernels.cu: getting samples onto the device
void convert_from_f32(const float* source, void* destination, StorageType type, int64_t n,
                      cudaStream_t stream);
// The widening back: a tensor stored in `type` as fp32 values (a copy when type is f32).
void convert_to_f32(const void* source, StorageType type, float* destination, int64_t n,
                    cudaStream_t stream);
// Rounds fp32 values in place to the nearest value `type` holds (f32: nothing), as the CPU's
// round_to_16bit: a 16-bit product's operand kept in an fp32 buffer.
void round_to_storage(float* values, StorageType type, int64_t n, cudaStream_t stream);
// Columns indices[0..count) of a preloaded split ([features x samples], one sample per
// column): u8 pixels are scaled by 1/255 as the CPU gather does.
void gather_columns_u8(const uint8_t* pixels, const int64_t* indices, int64_t count,
                       int64_t features, void* destination, StorageType type, cudaStream_t stream);
void gather_columns_f32(const float* values, const int64_t* indices, int64_t count,
                        int64_t features, void* destination, StorageType type, cudaStream_t stream);
void gather_labels(const int32_t* labels, const int64_t* indices, int64_t count,
                   int32_t* destination, cudaStream_t stream);
void gather_targets(const float* targets, const int64_t* indices, int64_t count,
                    float* destination, cudaStream_t stream);
void fill_f32(float* destination, float value, int64_t n, cudaStream_t stream);

// --- activation_kernels.cu: the parts of a Linear+activation layer cuBLASLt does not fuse
// z[r, c] += bias[r], added in fp32 and stored in z's type (the bias may be stored in another:
// a 16-bit working copy added to an fp32 product).
void add_bias(void* z, StorageType z_type, const void* bias, StorageType bias_type, int64_t rows,
              int64_t cols, cudaStream_t stream);
// a = act(z); a may alias z.
void activation_forward(Activation kind, const void* z, void* a, StorageType type, int64_t n,
                        cudaStream_t stream);
// grad = grad * act'(.) in place. `saved` is the pre-activation z for gelu and the activation
// output a for relu, tanh and sigmoid (whose derivatives follow from their outputs); it may be
// stored in another type than the gradient (16-bit activations, fp32 gradients).
void activation_backward(Activation kind, void* grad, StorageType grad_type, const void* saved,
                         StorageType saved_type, int64_t n, cudaStream_t stream);
// The activation after a linear op whose backward the linear's bias pass applies (bias_grad).
struct ActivationInBiasPass {
    Activation kind = Activation::relu;
    const void* saved = nullptr;  // as for activation_backward: z for gelu, the output a otherwise
    StorageType saved_type = StorageType::f32;
};
// A linear op's output gradient dz ([features x count], fp32) in one pass:
// - where `activation` is given, dz holds the activation's output gradient, and each value is
//   first multiplied by its derivative (activation_backward's arithmetic), so that the activation
//   needs no pass of its own;
// - where `out` is given, the values are stored there as out_type: 16-bit codes, the operand
//   16-bit products read, or fp32 (out may be dz itself);
// - grad_bias[f] (+)= the sum over the samples of the values as stored: stored when `accumulate`
//   is false (the first micro-batch of an update), added otherwise. Summed per fixed chunk of
//   samples in fp32 into `partials` (bias_grad_partials_floats(features)), then the chunks in
//   order in double, so the same inputs give the same bits on every run and every GPU.
void bias_grad(const float* dz, int64_t features, int64_t count, const ActivationInBiasPass* activation, void* out,
               StorageType out_type, float* partials, float* grad_bias, bool accumulate, cudaStream_t stream);

// --- loss_kernels.cu: per-sample loss (in double, as nn/loss.cpp), and the gradient of
// grad_scale * loss wrt the outputs logits [classes x count]. dlogits may be null (evaluation).
void softmax_cross_entropy(const void* logits, StorageType type, const int32_t* labels,
                           int64_t classes, int64_t count, float grad_scale, void* dlogits,
                           double* sample_loss, int32_t* sample_correct, cudaStream_t stream);
// outputs [1 x count]; loss (y - t)^2; doutputs may be null.
void mean_squared_error(const void* outputs, StorageType type, const float* targets,
                        int64_t count, float grad_scale, void* doutputs, double* sample_loss,
                        cudaStream_t stream);

// --- reduction_kernels.cu: deterministic sums (fixed partition, fixed order)
// totals[0] = sum of sample_loss; totals[1] = sum of sample_correct (when not null).
void sum_sample_losses(const double* sample_loss, const int32_t* sample_correct, int64_t count,
                       double* totals, cudaStream_t stream);
// Two passes: per-block partial sums of squares in double, then one block adds them in order.
// inf/NaN propagate into the result.
void sum_of_squares(const float* values, int64_t n, double* partials /*kSumSquaresPartials*/,
                    double* result, cudaStream_t stream);

// --- optimizer_kernels.cu: one fused kernel per optimizer over the flat parameter array.
// Scalars are derived on the host in double and rounded to float exactly as the CPU rule
// (optim/optimizer_step.cpp) does, so both engines run the same float arithmetic.
struct OptimizerLaunch {
    float* params = nullptr;
    const float* grads = nullptr;
    float* state = nullptr;  // optimizer_state_slots consecutive buffers of n floats
    int64_t n = 0;
    void* params_16 = nullptr;  // mixed precision: refreshed 16-bit working copy, else null
    StorageType type_16 = StorageType::f32;
    // Weight decay applies to [0, decay_end) only (ParamLayout puts the decayed tensors first,
    // as nanoGPT's parameter groups); -1 decays all n.
    int64_t decay_end = -1;
};
void optimizer_step_device(const OptimizerConfig& config, const OptimizerLaunch& launch,
                           double lr, double grad_multiplier, int64_t step, cudaStream_t stream);

}  // namespace trainbench::cuda
