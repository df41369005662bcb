#include <cmath>
#include <string>

#include "model/build_model.hpp"
#include "trainbench/error.hpp"

namespace trainbench {

ModelDesc build_mlp(const std::vector<int64_t>& sizes, Activation activation, int64_t classes) {
    if (sizes.size() < 2) throw Error("the model needs an input and an output size");
    ModelDesc m;
    m.family = ModelFamily::mlp;
    m.input_per_sample = sizes.front();
    m.classes = classes;
    m.summary = "MLP ";
    for (size_t i = 0; i < sizes.size(); ++i) m.summary += (i ? "-" : "") + std::to_string(sizes[i]);

    // Gradient checkpointing's segments (exec/gradient_checkpointing.hpp): sqrt(n) hidden layers each,
    // so that the kept activations and the recomputed ones both grow as sqrt(n).
    const int64_t hidden = static_cast<int64_t>(sizes.size()) - 2;
    const int64_t per_segment =
        std::max<int64_t>(2, static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(std::max<int64_t>(hidden, 1))))));

    int current = 0;
    m.tensors.push_back({"input", sizes.front(), false});
    for (size_t i = 0; i + 1 < sizes.size(); ++i) {
        const int64_t in = sizes[i], out = sizes[i + 1];
        m.training_flops_per_sample += 6.0 * static_cast<double>(in * out);
        const float bound = 1.0f / std::sqrt(static_cast<float>(in));
        const std::string prefix = "layers." + std::to_string(i);
        const int weight = static_cast<int>(m.params.size());
        // The MLP keeps torch's plain AdamW(model.parameters()): every tensor decays.
        m.params.push_back({prefix + ".weight", {out, in}, true, InitRule::uniform, bound, {}});
        m.params.push_back({prefix + ".bias", {out}, true, InitRule::uniform, bound, {}});
        const bool last = i + 2 == sizes.size();
        const int z = static_cast<int>(m.tensors.size());
        m.tensors.push_back({last ? "logits" : prefix + ".out", out, false});
        OpDesc linear;
        linear.kind = OpKind::linear;
        linear.inputs = {current};
        linear.outputs = {z};
        linear.params = {weight, weight + 1};
        // Layer i computes A_{i+1} from A_i. Segment k holds layers k*s .. k*s+s-1, so it keeps
        // only its input A_{k*s} and recomputes A_{k*s+1} .. A_{k*s+s-1}.
        linear.segment = last ? -1 : static_cast<int>(i / per_segment);
        m.ops.push_back(linear);
        current = z;
        if (last) break;
        const int a = static_cast<int>(m.tensors.size());
        m.tensors.push_back({prefix + ".act", out, false});
        OpDesc act;
        act.kind = OpKind::activation;
        act.activation = activation;
        act.inputs = {z};
        act.outputs = {a};
        act.segment = linear.segment;
        m.ops.push_back(act);
        current = a;
    }
    OpDesc loss;
    loss.kind = classes > 0 ? OpKind::cross_entropy : OpKind::mean_squared_error;
    loss.inputs = {current};
    m.ops.push_back(loss);
    return m;
}

}  // namespace trainbench
