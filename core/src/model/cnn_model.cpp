#include <cmath>
#include <string>

#include "model/build_model.hpp"
#include "trainbench/error.hpp"

namespace trainbench {

ModelDesc build_cnn(const CnnShape& s) {
    constexpr int64_t kKernel = 3;
    ModelDesc m;
    m.family = ModelFamily::cnn;
    m.classes = s.classes;
    m.input_per_sample = s.in_channels * s.height * s.width;
    m.summary = "CNN " + std::to_string(s.in_channels) + "x" + std::to_string(s.height) + "x" + std::to_string(s.width);
    int64_t channels = s.in_channels, height = s.height, width = s.width;
    int current = 0;
    m.tensors.push_back({"input", m.input_per_sample, false});
    auto add_op = [&m](OpKind kind, std::vector<int> inputs, std::vector<int> params, const std::string& out_name,
                       int64_t out_per_sample, int segment) -> OpDesc& {
        const int out = static_cast<int>(m.tensors.size());
        m.tensors.push_back({out_name, out_per_sample, false});
        OpDesc op;
        op.kind = kind;
        op.inputs = std::move(inputs);
        op.outputs = {out};
        op.params = std::move(params);
        op.segment = segment;
        m.ops.push_back(op);
        return m.ops.back();
    };
    auto add_linear_params = [&m](const std::string& name, std::vector<int64_t> weight_shape, int64_t fan_in) {
        // torch's default init for Conv2d and Linear alike: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
        const float bound = 1.0f / std::sqrt(static_cast<float>(fan_in));
        const int weight = static_cast<int>(m.params.size());
        const int64_t out = weight_shape.front();
        m.params.push_back({name + ".weight", std::move(weight_shape), true, InitRule::uniform, bound, {}});
        m.params.push_back({name + ".bias", {out}, true, InitRule::uniform, bound, {}});
        return weight;
    };

    for (size_t b = 0; b < s.channels.size(); ++b) {
        if (height < 2 || width < 2)
            throw Error("--channels has " + std::to_string(s.channels.size()) + " entries, but " + std::to_string(b) +
                        " blocks already halve a " + std::to_string(s.height) + "x" + std::to_string(s.width) +
                        " image below 2x2 pixels; use at most " + std::to_string(b) + " entries");
        const int64_t out = s.channels[b];
        const std::string name = "conv" + std::to_string(b + 1);
        const int weight = add_linear_params(name, {out, channels, kKernel, kKernel}, channels * kKernel * kKernel);
        const int segment = static_cast<int>(b);
        OpDesc& conv = add_op(OpKind::conv2d, {current}, {weight, weight + 1}, name + ".out", out * height * width, segment);
        conv.height = height;
        conv.width = width;
        conv.rows_per_sample = height * width;
        current = conv.outputs[0];
        m.training_flops_per_sample += 6.0 * static_cast<double>(out * channels * kKernel * kKernel * height * width);
        OpDesc& act = add_op(OpKind::activation, {current}, {}, name + ".act", out * height * width, segment);
        act.activation = s.activation;
        current = act.outputs[0];
        OpDesc& pool = add_op(OpKind::max_pool, {current}, {}, name + ".pool", out * (height / 2) * (width / 2), segment);
        pool.height = height;
        pool.width = width;
        current = pool.outputs[0];
        channels = out;
        height /= 2;
        width /= 2;
        m.summary += (b ? "-c" : " c") + std::to_string(out);
    }
    // Flatten is free: NCHW samples are already contiguous in torch's flatten order.
    std::vector<int64_t> widths{channels * height * width};
    widths.insert(widths.end(), s.hidden.begin(), s.hidden.end());
    widths.push_back(s.classes);
    m.summary += " ";
    for (size_t i = 0; i + 1 < widths.size(); ++i) {
        const int64_t in = widths[i], out = widths[i + 1];
        const std::string name = "fc" + std::to_string(i + 1);
        const int weight = add_linear_params(name, {out, in}, in);
        const bool last = i + 2 == widths.size();
        current = add_op(OpKind::linear, {current}, {weight, weight + 1}, last ? "logits" : name + ".out", out, -1).outputs[0];
        m.training_flops_per_sample += 6.0 * static_cast<double>(in * out);
        m.summary += std::to_string(out) + (last ? "" : "-");
        if (last) break;
        OpDesc& act = add_op(OpKind::activation, {current}, {}, name + ".act", out, -1);
        act.activation = s.activation;
        current = act.outputs[0];
    }
    OpDesc loss;
    loss.kind = OpKind::cross_entropy;
    loss.inputs = {current};
    m.ops.push_back(loss);
    return m;
}

}  // namespace trainbench
