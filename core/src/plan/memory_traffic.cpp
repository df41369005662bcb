#include "plan/memory_traffic.hpp"

#include "nn/conv2d.hpp"
#include "optim/eager_optimizer.hpp"
#include "precision/nf4.hpp"

namespace trainbench {
namespace {

class TrafficCounter {
public:
    explicit TrafficCounter(const GraphPlan& plan) : plan_(plan), m_(plan.model) {}

    // Bytes of tensor t at the plan's micro-batch, as stored.
    int64_t tensor(int t) const { return plan_.tensor_elements[static_cast<size_t>(t)] * plan_.element_bytes(t); }
    // fp32 bytes of a tensor's size (gradients, stagings and scratch are fp32).
    int64_t fp32(int t) const { return plan_.tensor_elements[static_cast<size_t>(t)] * 4; }
    int64_t param(int p) const {
        const ParamDesc& d = m_.params[static_cast<size_t>(p)];
        if (!d.nf4) return d.numel() * 4;
        // QLoRA: the 4-bit storage read, the weight dequantized into the NF4 tile and read from
        // there by the product; Eigen's products pack it first, a write and a read more.
        const int64_t tile = d.numel() * (plan_.products == ProductKernel::onednn_bf16 ? 2 : 4);
        return nf4_sizes(d.numel()).total_bytes() + (plan_.products == ProductKernel::eigen ? 4 : 2) * tile;
    }
    int64_t params(const OpDesc& op) const {
        int64_t bytes = 0;
        for (int p : op.params) bytes += param(p);
        return bytes;
    }
    bool has_grad(int t) const { return plan_.grad_offset[static_cast<size_t>(t)] >= 0; }
    bool in_place(int t) const { return plan_.tensor_alias[static_cast<size_t>(t)] >= 0; }
    // Op a's backward writes its input's gradient as the bf16 codes of the product before it.
    bool hands_codes(int a) const { return plan_.hands_dy_codes(a, plan_.micro_batch); }

    int64_t forward(int o) const {
        const OpDesc& op = m_.ops[static_cast<size_t>(o)];
        if (plan_.fused_into[static_cast<size_t>(o)] >= 0) return 0;  // its partner's kernel counts it
        const int with = plan_.fused_with[static_cast<size_t>(o)];
        switch (op.kind) {
            case OpKind::linear: {
                int64_t bytes = tensor(op.inputs[0]) + params(op) + tensor(op.outputs[0]);
                // The epilogue writes the activation beside the product (in place it is the same write).
                if (with >= 0 && !in_place(m_.ops[static_cast<size_t>(with)].outputs[0]))
                    bytes += tensor(m_.ops[static_cast<size_t>(with)].outputs[0]);
                return bytes;
            }
            case OpKind::lora_linear: {
                // The frozen product, then x A^T (down) and down B^T added onto the output.
                int64_t bytes = tensor(op.inputs[0]) + params(op) + tensor(op.outputs[0]) + tensor(op.inputs[0]) +
                                2 * tensor(op.outputs[1]) + 2 * tensor(op.outputs[0]);
                // DoRA: the norms read W, A and B again; the output is read, scaled and written,
                // and the unscaled result written beside it.
                if (has_dora_magnitude(op))
                    bytes += param(op.params[0]) + param(op.params[2]) + param(op.params[3]) + 2 * tensor(op.outputs[0]) +
                             tensor(op.outputs[2]);
                return bytes;
            }
            case OpKind::conv2d: {
                // im2col (receptive fields), the product into rows, the rows transposed into planes.
                const ConvShape s = conv_shape(m_, op);
                const int64_t fields = plan_.micro_batch * s.positions() * s.patch() * 4;
                return tensor(op.inputs[0]) + 2 * fields + params(op) + 2 * fp32(op.outputs[0]) + tensor(op.outputs[0]);
            }
            case OpKind::activation:
            case OpKind::max_pool: return tensor(op.inputs[0]) + tensor(op.outputs[0]);
            case OpKind::embedding: return tensor(op.outputs[0]) * 2 + plan_.token_elements * 4;  // rows of wte and wpe
            case OpKind::layernorm:
                return tensor(op.inputs[0]) + params(op) + tensor(op.outputs[0]) + tensor(op.outputs[1]) +
                       tensor(op.outputs[2]);
            case OpKind::residual_add: {
                int64_t bytes = tensor(op.inputs[0]) + tensor(op.inputs[1]) + tensor(op.outputs[0]);
                if (with >= 0) {  // the LayerNorm of the sum, without reading the sum back
                    const OpDesc& ln = m_.ops[static_cast<size_t>(with)];
                    bytes += params(ln) + tensor(ln.outputs[0]) + tensor(ln.outputs[1]) + tensor(ln.outputs[2]);
                }
                return bytes;
            }
            case OpKind::attention: {
                const int64_t qkv = tensor(op.inputs[0]), att = tensor(op.outputs[1]), y = tensor(op.outputs[0]);
                // Fused: the scores are scaled, masked and normalised in cache and written once.
                // Eager: written by the product, then read and written by the scale, the mask and
                // the softmax, and read by the value product.
                return plan_.fused ? qkv + att + y : qkv + att + 3 * 2 * att + att + y;
            }
            case OpKind::cross_entropy:
                // Fused: the loss and its input's gradient in one pass. Eager: log_softmax writes
                // the log-probabilities, nll_loss's backward writes their gradient, and
                // log_softmax's backward reads both and writes the input's (nll_loss's own read
                // of one value per row is left out).
                return tensor(op.inputs[0]) + (plan_.fused ? 1 : 5) * fp32(op.inputs[0]);
            case OpKind::mean_squared_error: return tensor(op.inputs[0]) + fp32(op.inputs[0]);
            // A stage's output widened into its message, and its gradient copied in.
            case OpKind::pipeline_output: return tensor(op.inputs[0]) + 2 * fp32(op.inputs[0]);
        }
        return 0;
    }

    int64_t backward(int o) const {
        const OpDesc& op = m_.ops[static_cast<size_t>(o)];
        if (op.outputs.empty() || !has_grad(op.outputs[0])) return 0;
        const int64_t dout = fp32(op.outputs[0]);
        const bool dinput = !op.inputs.empty() && has_grad(op.inputs[0]);
        switch (op.kind) {
            case OpKind::linear:
            case OpKind::lora_linear: {
                // 16-bit runs round the output gradient first, unless the op after it handed it
                // over as codes; dW reads dout and the input, dX reads dout and writes the input's
                // gradient.
                int64_t bytes = plan_.sixteen_bit() && !hands_codes(o + 1) ? 2 * dout : 0;
                bool weight_grad = false;
                for (int p : op.params) weight_grad = weight_grad || m_.params[static_cast<size_t>(p)].trainable;
                if (op.kind == OpKind::linear && weight_grad) bytes += dout + tensor(op.inputs[0]) + params(op);
                if (op.kind == OpKind::lora_linear)
                    bytes += 2 * dout + tensor(op.inputs[0]) + 2 * tensor(op.outputs[1]) + param(op.params[2]) +
                             param(op.params[3]);
                // DoRA: dm reads dout and the unscaled result; the scaled gradient is written.
                if (has_dora_magnitude(op)) bytes += 2 * dout + tensor(op.outputs[2]);
                if (dinput) bytes += dout + param(op.params[0]) + fp32(op.inputs[0]);
                return bytes;
            }
            case OpKind::conv2d: {
                const ConvShape s = conv_shape(m_, op);
                const int64_t fields = plan_.micro_batch * s.positions() * s.patch() * 4;
                // dout into rows, the input's fields again, dW; dX's fields and their col2im.
                int64_t bytes = (plan_.sixteen_bit() ? 2 * dout : 0) + 2 * dout + tensor(op.inputs[0]) + 2 * fields +
                                params(op);
                if (dinput) bytes += dout + 2 * fields + fp32(op.inputs[0]);
                return bytes;
            }
            case OpKind::activation:  // in place over dout, or into the product's codes
                return dout + (hands_codes(o) ? dout / 2 : dout) + tensor(op.inputs[0]);
            case OpKind::max_pool: return dinput ? dout + tensor(op.inputs[0]) + fp32(op.inputs[0]) : 0;
            case OpKind::embedding: return dout + tensor(op.outputs[0]) * 2;  // rows of dwte and dwpe
            case OpKind::layernorm:
                return dout + tensor(op.inputs[0]) + tensor(op.outputs[1]) + tensor(op.outputs[2]) + params(op) +
                       (dinput ? 2 * fp32(op.inputs[0]) : 0);
            case OpKind::residual_add: {
                int64_t bytes = dout;
                for (int t : op.inputs)
                    if (has_grad(t)) bytes += 2 * fp32(t);
                return bytes;
            }
            case OpKind::attention: {
                const int64_t qkv = tensor(op.inputs[0]), att = tensor(op.outputs[1]);
                const int64_t dqkv = hands_codes(o) ? fp32(op.inputs[0]) / 2 : fp32(op.inputs[0]);
                if (plan_.fused) return dout + qkv + att + dqkv;
                // datt = dy v^T and dv; the softmax's, mask's and scale's passes over datt; dq, dk.
                const int64_t datt = plan_.tensor_elements[static_cast<size_t>(op.outputs[1])] * 4;
                return dout + qkv + att + datt + (2 * datt + att) + 2 * datt + 2 * datt + datt + dqkv;
            }
            case OpKind::cross_entropy:
            case OpKind::mean_squared_error:
            case OpKind::pipeline_output: return 0;  // counted with the forward
        }
        return 0;
    }

    int64_t recompute() const {
        int64_t bytes = 0;
        for (size_t o = 0; o < m_.ops.size(); ++o)
            if (plan_.rebuilt_in_backward(m_.ops[o].segment)) bytes += forward(static_cast<int>(o));
        return bytes;
    }

private:
    const GraphPlan& plan_;
    const ModelDesc& m_;
};

// Floats read and written per element of the optimizer's shard, in the decayed group or not.
int64_t optimizer_floats_per_element(const GraphPlan& plan, const OptimizerConfig& optimizer, bool decayed) {
    const bool decay = decayed && optimizer.resolved_weight_decay() != 0.0;
    const int slots = plan.optimizer_slots;
    if (plan.fused || !has_eager_form(optimizer))
        return 3 + 2 * slots;  // the parameter and its gradient read, the parameter written, each slot read and written
    switch (optimizer.kind) {
        case OptimizerKind::adam:
        case OptimizerKind::adamw:
            // decay (2 or 3), exp_avg's mul_ and add_ (2 + 3), exp_avg_sq's (2 + 3), denom's sqrt, div
            // and add (2 + 2 + 2), addcdiv_ (4).
            return (decay ? (optimizer.kind == OptimizerKind::adamw ? 2 : 3) : 0) + 5 + 5 + 6 + 4;
        case OptimizerKind::sgd: {
            int64_t floats = (decay ? 3 : 0) + 3;  // the decayed gradient; the parameter's add_
            if (optimizer.momentum != 0.0) floats += 5 + (optimizer.nesterov ? 3 : 0);  // the buffer's mul_ and add_
            return floats;
        }
        default: return 3 + 2 * slots;
    }
}

}  // namespace

MemoryTraffic count_memory_traffic(const GraphPlan& plan, const OptimizerConfig& optimizer) {
    const TrafficCounter counter(plan);
    MemoryTraffic traffic;
    for (size_t o = 0; o < plan.model.ops.size(); ++o) {
        traffic.forward += counter.forward(static_cast<int>(o));
        traffic.backward += counter.backward(static_cast<int>(o));
    }
    traffic.recompute = counter.recompute();
    const ShardRange shard = plan.optimizer_shard;
    const int64_t decayed = overlap(shard, {0, plan.params.decay_end}).size();
    traffic.optimizer = 4 * (decayed * optimizer_floats_per_element(plan, optimizer, true) +
                             (shard.size() - decayed) * optimizer_floats_per_element(plan, optimizer, false));
    // 16-bit runs round the master weights into the working copy: fused (one process) as the
    // update writes them, the weights that fp32 products read widened (4 bytes) and the rest as
    // codes (2); otherwise in a pass of its own that reads them again and writes every code,
    // and another that widens those weights from their codes.
    if (plan.sixteen_bit()) {
        int64_t widened = 0;
        for (const WidenedTrainableParam& w : widened_trainable_params(plan)) widened += plan.param_range(w.param).size();
        const int64_t trainable = plan.params.trainable_end;
        if (plan.fused && plan.optimizer_shard.size() == trainable)
            traffic.optimizer += (trainable - widened) * 2 + widened * 4;
        else
            traffic.optimizer += trainable * (4 + 2) + widened * (2 + 4);
    }
    return traffic;
}

}  // namespace trainbench
