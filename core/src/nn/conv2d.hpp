#pragma once
// torch.nn.Conv2d (square kernel, stride 1, "same" zero padding kernel / 2, odd kernels) over
// NCHW activations, as im2col and the engine's Linear products: each output position is a row
// whose inputs are its receptive field (in_channels x kernel x kernel, in the order torch
// flattens the weight [out, in, k, k]), so the convolution is a Linear layer with W viewed as
// [out, in*k*k] over batch x height x width rows. The products give rows of out_channels
// (NHWC); a transpose per sample puts them back in torch's NCHW, which flatten then reads in
// torch's order, so the weights of the layers after it keep torch's layout too.
#include <cstdint>

#include "nn/linear.hpp"
#include "nn/packed_weights.hpp"

namespace trainbench {

struct ConvShape {
    int64_t in_channels = 1, out_channels = 1, height = 1, width = 1, kernel = 3;
    int64_t padding() const { return kernel / 2; }
    int64_t positions() const { return height * width; }           // output rows per sample
    int64_t patch() const { return in_channels * kernel * kernel; }  // a row's inputs
};

// Kernel scratch (floats) for `samples`: the rows' receptive fields (in the backward pass, then
// their gradients) and the rows of the output or of its gradient.
int64_t conv2d_scratch_floats(const ConvShape& shape, int64_t samples);

// out [N, out, H, W] = conv(in [N, in, H, W]) + bias, W packed as PackedOperand::weights with
// in = patch(), out = out_channels (the bias after it, as a Linear layer's). An epilogue (in
// place only) applies the activation that follows while the product's blocks are in cache.
void conv2d_forward(const ConvShape& shape, const PackedLayout& layout, const float* packed, const float* bias,
                    const float* input, float* output, int64_t samples, float* scratch,
                    const ProductEpilogue* epilogue = nullptr);

// dW, db (written as `write` says) and, when grad_input is not null, dX (overwritten), with
// W^T packed as PackedOperand::weights_transposed.
void conv2d_backward(const ConvShape& shape, const PackedLayout& transposed, const float* packed_transposed,
                     const float* input, const float* grad_output, float* grad_weight, float* grad_bias,
                     float* grad_input, int64_t samples, GradientWrite write, float* scratch);

}  // namespace trainbench
