#pragma once
#include <cstdint>

namespace trainbench {

// Softmax cross-entropy over logits [classes x batch]. Returns the sum of per-sample losses
// (in double). When grad is not null, writes d(grad_scale * sum loss)/d logits into it
// (may alias logits). When correct is not null, adds the number of argmax hits.
double softmax_cross_entropy(const float* logits, const int32_t* labels, int64_t classes,
                             int64_t batch, float* grad, float grad_scale, int64_t* correct);

// --fused off: the same as F.cross_entropy runs it in eager PyTorch, log_softmax then nll_loss,
// each a pass of its own: log-probabilities written [classes x batch], the loss read from them;
// with a gradient, nll_loss's backward writes d/d log-probabilities and log_softmax's backward
// turns them into grad. Both intermediates live in `scratch` (eager_cross_entropy_scratch_floats).
// Equal to softmax_cross_entropy up to float rounding.
int64_t eager_cross_entropy_scratch_floats(int64_t classes, int64_t batch);
double softmax_cross_entropy_eager(const float* logits, const int32_t* labels, int64_t classes, int64_t batch,
                                   float* grad, float grad_scale, float* scratch);

// Squared error of one output per sample: loss_i = (y_i - t_i)^2 (torch MSELoss per sample).
double mean_squared_error(const float* outputs, const float* targets, int64_t batch, float* grad,
                          float grad_scale);

}  // namespace trainbench
