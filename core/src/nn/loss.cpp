#include "nn/loss.hpp"

#include <algorithm>
#include <cmath>

#include "parallel/parallel_range.hpp"

namespace trainbench {

namespace {

// Samples are cut into at most kSampleChunks chunks fixed by the batch size alone; each chunk's
// loss is summed in sample order, and the chunk sums in chunk order, so the returned sum does
// not depend on the number of threads. (Up to 64 samples, one per chunk, it is the plain
// running sum.) The partial sums live on the stack: nothing is allocated.
constexpr int64_t kSampleChunks = 64;
// Classes whose exponentials a sample keeps for its gradient: 8 KiB of stack.
constexpr int64_t kKeptExponentials = 1024;

struct ChunkTotals {
    double loss = 0.0;
    int64_t hits = 0;
};

// Samples [first, end): the per-sample arithmetic of the single-threaded version, unchanged,
// so the gradient's bits are what they were.
ChunkTotals cross_entropy_samples(const float* logits, const int32_t* labels, int64_t classes, float* grad,
                                  float grad_scale, int64_t first, int64_t end) {
    ChunkTotals totals;
    for (int64_t s = first; s < end; ++s) {
        const float* z = logits + s * classes;
        int64_t argmax = 0;
        float max_logit = z[0];
        for (int64_t c = 1; c < classes; ++c) {
            if (z[c] > max_logit) {
                max_logit = z[c];
                argmax = c;
            }
        }
        // The gradient reuses the sum's exponentials where they fit on the stack (libm's exp,
        // one value at a time, is most of this loss's time); larger vocabularies compute them
        // again. The same values either way.
        const bool kept = grad && classes <= kKeptExponentials;
        double exponentials[kKeptExponentials];
        double exp_sum = 0.0;
        for (int64_t c = 0; c < classes; ++c) {
            const double e = std::exp(static_cast<double>(z[c] - max_logit));
            if (kept) exponentials[c] = e;
            exp_sum += e;
        }
        const int32_t label = labels[s];
        const double log_sum = std::log(exp_sum);
        totals.loss += log_sum - static_cast<double>(z[label] - max_logit);
        totals.hits += argmax == label;
        if (grad) {
            float* g = grad + s * classes;
            const double inv_sum = 1.0 / exp_sum;
            for (int64_t c = 0; c < classes; ++c) {
                const double e = kept ? exponentials[c] : std::exp(static_cast<double>(z[c] - max_logit));
                g[c] = static_cast<float>((e * inv_sum - (c == label ? 1.0 : 0.0)) * grad_scale);
            }
        }
    }
    return totals;
}

}  // namespace

double softmax_cross_entropy(const float* logits, const int32_t* labels, int64_t classes,
                             int64_t batch, float* grad, float grad_scale, int64_t* correct) {
    const int64_t chunks = std::min(batch, kSampleChunks);
    if (chunks <= 0) return 0.0;
    ChunkTotals chunk_totals[kSampleChunks];
    // About 20 multiply-adds' time per exp, one or two exps per logit.
    const int64_t work_per_chunk = (batch / chunks + 1) * classes * (grad ? 40 : 20);
    parallel_range(chunks, work_per_chunk, [&](int64_t first, int64_t end) {
        for (int64_t c = first; c < end; ++c)
            chunk_totals[c] = cross_entropy_samples(logits, labels, classes, grad, grad_scale, batch * c / chunks,
                                                    batch * (c + 1) / chunks);
    });
    double loss_sum = 0.0;
    int64_t hits = 0;
    for (int64_t c = 0; c < chunks; ++c) {
        loss_sum += chunk_totals[c].loss;
        hits += chunk_totals[c].hits;
    }
    if (correct) *correct += hits;
    return loss_sum;
}

int64_t eager_cross_entropy_scratch_floats(int64_t classes, int64_t batch) { return 2 * classes * batch; }

double softmax_cross_entropy_eager(const float* logits, const int32_t* labels, int64_t classes, int64_t batch,
                                   float* grad, float grad_scale, float* scratch) {
    float* log_probabilities = scratch;
    float* d_log_probabilities = scratch + classes * batch;
    // log_softmax: z - max - log(sum exp(z - max)) per sample.
    parallel_range(batch, classes * 20, [&](int64_t first, int64_t end) {
        for (int64_t s = first; s < end; ++s) {
            const float* z = logits + s * classes;
            float* out = log_probabilities + s * classes;
            const float max_logit = *std::max_element(z, z + classes);
            double exp_sum = 0.0;
            for (int64_t c = 0; c < classes; ++c) exp_sum += std::exp(static_cast<double>(z[c] - max_logit));
            const float log_sum = static_cast<float>(std::log(exp_sum));
            for (int64_t c = 0; c < classes; ++c) out[c] = (z[c] - max_logit) - log_sum;
        }
    });
    // nll_loss: minus the log-probability of each label, summed in sample order.
    double loss_sum = 0.0;
    for (int64_t s = 0; s < batch; ++s) loss_sum -= static_cast<double>(log_probabilities[s * classes + labels[s]]);
    if (!grad) return loss_sum;
    // nll_loss's backward: -grad_scale at each label, 0 elsewhere.
    parallel_range(batch, classes, [&](int64_t first, int64_t end) {
        std::fill(d_log_probabilities + first * classes, d_log_probabilities + end * classes, 0.0f);
        for (int64_t s = first; s < end; ++s) d_log_probabilities[s * classes + labels[s]] = -grad_scale;
    });
    // log_softmax's backward: g - exp(log p) * sum(g) per sample.
    parallel_range(batch, classes * 20, [&](int64_t first, int64_t end) {
        for (int64_t s = first; s < end; ++s) {
            const float* g = d_log_probabilities + s * classes;
            const float* log_p = log_probabilities + s * classes;
            float* out = grad + s * classes;
            float sum = 0.0f;
            for (int64_t c = 0; c < classes; ++c) sum += g[c];
            for (int64_t c = 0; c < classes; ++c) out[c] = g[c] - std::exp(log_p[c]) * sum;
        }
    });
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
