#include "nn/loss.hpp"

#include <cmath>

namespace trainbench {

double softmax_cross_entropy(const float* logits, const int32_t* labels, int64_t classes,
                             int64_t batch, float* grad, float grad_scale, int64_t* correct) {
    double loss_sum = 0.0;
    int64_t hits = 0;
    for (int64_t s = 0; s < batch; ++s) {
        const float* z = logits + s * classes;
        int64_t argmax = 0;
        float max_logit = z[0];
        for (int64_t c = 1; c < classes; ++c) {
            if (z[c] > max_logit) {
                max_logit = z[c];
                argmax = c;
            }
        }
        double exp_sum = 0.0;
        for (int64_t c = 0; c < classes; ++c) exp_sum += std::exp(static_cast<double>(z[c] - max_logit));
        const int32_t label = labels[s];
        const double log_sum = std::log(exp_sum);
        loss_sum += log_sum - static_cast<double>(z[label] - max_logit);
        hits += argmax == label;
        if (grad) {
            float* g = grad + s * classes;
            const double inv_sum = 1.0 / exp_sum;
            for (int64_t c = 0; c < classes; ++c) {
                const double p = std::exp(static_cast<double>(z[c] - max_logit)) * inv_sum;
                g[c] = static_cast<float>((p - (c == label ? 1.0 : 0.0)) * grad_scale);
            }
        }
    }
    if (correct) *correct += hits;
    return loss_sum;
}

double mean_squared_error(const float* outputs, const float* targets, int64_t batch, float* grad,
                          float grad_scale) {
    double loss_sum = 0.0;
    for (int64_t s = 0; s < batch; ++s) {
        const float diff = outputs[s] - targets[s];
        loss_sum += static_cast<double>(diff) * diff;
        if (grad) grad[s] = 2.0f * diff * grad_scale;
    }
    return loss_sum;
}

}  // namespace trainbench
