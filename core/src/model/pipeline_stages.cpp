#include "model/pipeline_stages.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "model/param_layout.hpp"
#include "trainbench/error.hpp"

namespace trainbench {
namespace {

// Tensors written by ops before `cut` (or the model's input) and read by ops from `cut` on.
std::set<int> crossing_tensors(const ModelDesc& model, int cut) {
    std::set<int> made_before;
    if (!model.token_input) made_before.insert(0);
    for (int o = 0; o < cut; ++o)
        for (int t : model.ops[static_cast<size_t>(o)].outputs) made_before.insert(t);
    std::set<int> crossing;
    for (size_t o = static_cast<size_t>(cut); o < model.ops.size(); ++o)
        for (int t : model.ops[o].inputs)
            if (made_before.count(t)) crossing.insert(t);
    return crossing;
}

bool is_layer(OpKind kind) { return kind == OpKind::linear || kind == OpKind::lora_linear || kind == OpKind::conv2d; }

}  // namespace

std::vector<int> pipeline_cut_points(const ModelDesc& model) {
    std::vector<int> cuts;
    for (int k = 1; k < static_cast<int>(model.ops.size()); ++k) {
        const OpDesc& before = model.ops[static_cast<size_t>(k - 1)];
        const OpDesc& after = model.ops[static_cast<size_t>(k)];
        const bool unit_starts = model.family == ModelFamily::gpt
                                     ? before.segment >= 0 && after.segment >= 0 && before.segment != after.segment
                                     : is_layer(after.kind);
        if (!unit_starts) continue;
        const std::set<int> crossing = crossing_tensors(model, k);
        if (crossing.size() == 1 && !(model.token_input == false && *crossing.begin() == 0)) cuts.push_back(k);
    }
    return cuts;
}

int max_pipeline_stages(const ModelDesc& model) { return static_cast<int>(pipeline_cut_points(model).size()) + 1; }

std::string pipeline_unit_name(const ModelDesc& model) {
    const int units = max_pipeline_stages(model);
    if (model.family == ModelFamily::gpt) return std::to_string(units) + (units == 1 ? " block" : " blocks");
    return std::to_string(units) + (units == 1 ? " layer" : " layers");
}

double op_forward_flops(const ModelDesc& model, int o) {
    const OpDesc& op = model.ops[static_cast<size_t>(o)];
    const auto rows = static_cast<double>(op.rows_per_sample);
    auto param_numel = [&](size_t k) { return static_cast<double>(model.params[static_cast<size_t>(op.params[k])].numel()); };
    auto per_sample = [&](int t) { return static_cast<double>(model.tensors[static_cast<size_t>(t)].per_sample); };
    switch (op.kind) {
        case OpKind::linear:
        case OpKind::lora_linear: {
            double flops = 2.0 * rows * param_numel(0);
            if (op.kind == OpKind::lora_linear) flops += 2.0 * rows * (param_numel(2) + param_numel(3));
            return flops;
        }
        case OpKind::conv2d: return 2.0 * static_cast<double>(op.height * op.width) * param_numel(0);
        case OpKind::attention: {
            // QK^T and att.V over the context: 2 * 2 * T * T * C per sample.
            const double width = per_sample(op.inputs[0]) / (3.0 * rows);
            return 4.0 * rows * rows * width;
        }
        case OpKind::pipeline_output: return 0.0;
        default: return op.outputs.empty() ? per_sample(op.inputs[0]) : per_sample(op.outputs[0]);
    }
}

StageSplit split_into_stages(const ModelDesc& model, int stages) {
    const std::vector<int> cuts = pipeline_cut_points(model);
    if (stages < 1) throw Error("--pipeline-stages must be at least 1", "pipeline_stages");
    if (stages > static_cast<int>(cuts.size()) + 1)
        throw Error("--pipeline-stages " + std::to_string(stages) + " is more than the " + model.summary + " has (" +
                        pipeline_unit_name(model) + ", a stage holds at least one): use at most " +
                        std::to_string(cuts.size() + 1),
                    "pipeline_stages");
    // Units: the ops between neighbouring cut points; their costs.
    std::vector<int> bounds{0};
    bounds.insert(bounds.end(), cuts.begin(), cuts.end());
    bounds.push_back(static_cast<int>(model.ops.size()));
    const int units = static_cast<int>(bounds.size()) - 1;
    std::vector<double> prefix(static_cast<size_t>(units) + 1, 0.0);
    for (int u = 0; u < units; ++u) {
        double cost = 0.0;
        for (int o = bounds[static_cast<size_t>(u)]; o < bounds[static_cast<size_t>(u) + 1]; ++o) cost += op_forward_flops(model, o);
        prefix[static_cast<size_t>(u) + 1] = prefix[static_cast<size_t>(u)] + cost;
    }
    // best[s][u]: the smallest largest-stage cost of the first u units in s stages; choice: where
    // the last of those stages starts. Ties go to the earliest start, so that splits are stable.
    const double inf = std::numeric_limits<double>::infinity();
    std::vector<std::vector<double>> best(static_cast<size_t>(stages) + 1, std::vector<double>(static_cast<size_t>(units) + 1, inf));
    std::vector<std::vector<int>> start(static_cast<size_t>(stages) + 1, std::vector<int>(static_cast<size_t>(units) + 1, 0));
    best[0][0] = 0.0;
    for (int s = 1; s <= stages; ++s)
        for (int u = s; u <= units; ++u)
            for (int first = s - 1; first < u; ++first) {
                const double cost = std::max(best[static_cast<size_t>(s) - 1][static_cast<size_t>(first)],
                                             prefix[static_cast<size_t>(u)] - prefix[static_cast<size_t>(first)]);
                if (cost < best[static_cast<size_t>(s)][static_cast<size_t>(u)]) {
                    best[static_cast<size_t>(s)][static_cast<size_t>(u)] = cost;
                    start[static_cast<size_t>(s)][static_cast<size_t>(u)] = first;
                }
            }
    StageSplit split;
    split.first_op.assign(static_cast<size_t>(stages) + 1, 0);
    split.forward_flops.assign(static_cast<size_t>(stages), 0.0);
    int u = units;
    for (int s = stages; s >= 1; --s) {
        const int first = start[static_cast<size_t>(s)][static_cast<size_t>(u)];
        split.first_op[static_cast<size_t>(s) - 1] = bounds[static_cast<size_t>(first)];
        split.forward_flops[static_cast<size_t>(s) - 1] = prefix[static_cast<size_t>(u)] - prefix[static_cast<size_t>(first)];
        u = first;
    }
    split.first_op.back() = static_cast<int>(model.ops.size());
    return split;
}

ModelDesc stage_model(const ModelDesc& model, const StageSplit& split, int stage) {
    const int first = split.first_op[static_cast<size_t>(stage)];
    const int end = split.first_op[static_cast<size_t>(stage) + 1];
    const bool last = stage + 1 == split.stages();
    ModelDesc s;
    s.family = model.family;
    s.summary = model.summary + ", stage " + std::to_string(stage + 1) + " of " + std::to_string(split.stages());
    s.token_input = stage == 0 && model.token_input;
    s.loss_terms_per_sample = model.loss_terms_per_sample;
    s.classes = model.classes;
    s.input_gradient = stage > 0;
    double total_flops = 0.0;
    for (double f : split.forward_flops) total_flops += f;
    s.training_flops_per_sample =
        total_flops > 0.0 ? model.training_flops_per_sample * split.forward_flops[static_cast<size_t>(stage)] / total_flops : 0.0;

    std::map<int, int> tensor_id;
    auto map_tensor = [&](int t) {
        auto [it, added] = tensor_id.insert({t, static_cast<int>(s.tensors.size())});
        if (added) {
            TensorDesc d = model.tensors[static_cast<size_t>(t)];
            s.tensors.push_back(d);
        }
        return it->second;
    };
    if (stage > 0) {
        const std::set<int> input = crossing_tensors(model, first);
        if (input.size() != 1) throw Error("internal: stage " + std::to_string(stage) + " does not start at a cut point");
        map_tensor(*input.begin());
        s.input_per_sample = s.tensors[0].per_sample;
    } else {
        if (!model.token_input) map_tensor(0);
        s.input_per_sample = model.input_per_sample;
    }
    std::map<int, int> param_id;
    std::vector<int> used_params;
    for (int o = first; o < end; ++o)
        for (int p : model.ops[static_cast<size_t>(o)].params) used_params.push_back(p);
    std::sort(used_params.begin(), used_params.end());
    used_params.erase(std::unique(used_params.begin(), used_params.end()), used_params.end());
    for (int p : used_params) {
        param_id[p] = static_cast<int>(s.params.size());
        s.params.push_back(model.params[static_cast<size_t>(p)]);
    }
    for (ParamDesc& p : s.params)
        if (p.norm_of >= 0) p.norm_of = param_id.at(p.norm_of);
    for (int o = first; o < end; ++o) {
        OpDesc op = model.ops[static_cast<size_t>(o)];
        for (int& t : op.inputs) t = map_tensor(t);
        for (int& t : op.outputs) t = map_tensor(t);
        for (int& p : op.params) p = param_id.at(p);
        s.ops.push_back(op);
    }
    if (!last) {
        const std::set<int> output = crossing_tensors(model, end);
        OpDesc send;
        send.kind = OpKind::pipeline_output;
        send.inputs = {tensor_id.at(*output.begin())};
        s.ops.push_back(send);
    }
    return s;
}

ModelWeights stage_weights(const ModelWeights& weights, const ModelDesc& stage) {
    ModelWeights out;
    out.metadata = weights.metadata;
    for (const ParamDesc& p : stage.params) {
        const NamedTensor* t = weights.find(p.name);
        if (!t && !p.alias.empty()) t = weights.find(p.alias);
        if (!t) throw Error("weights have no tensor '" + p.name + "' for pipeline stage " + stage.summary);
        out.tensors.push_back(*t);
        out.tensors.back().name = p.name;
    }
    return out;
}

namespace {

// Calls move(whole_offset, stage_offset, numel) for each trainable tensor of `stage`, its
// places in the whole model's store and in the stage's.
template <typename Move>
void for_each_stage_tensor(const ModelDesc& whole, const ModelDesc& stage, Move move) {
    const ParamLayout whole_layout = make_param_layout(whole);
    const ParamLayout stage_layout = make_param_layout(stage);
    for (size_t p = 0; p < stage.params.size(); ++p) {
        if (!stage.params[p].trainable) continue;
        const int q = whole.find_param(stage.params[p].name);
        if (q < 0) throw Error("internal: stage tensor '" + stage.params[p].name + "' is not in the whole model");
        move(whole_layout.offset[static_cast<size_t>(q)], stage_layout.offset[p], stage.params[p].numel());
    }
}

}  // namespace

void whole_to_stage_store(const ModelDesc& whole, const float* whole_store, const ModelDesc& stage, float* stage_store) {
    for_each_stage_tensor(whole, stage, [&](int64_t at_whole, int64_t at_stage, int64_t n) {
        std::copy(whole_store + at_whole, whole_store + at_whole + n, stage_store + at_stage);
    });
}

void stage_to_whole_store(const ModelDesc& stage, const float* stage_store, const ModelDesc& whole, float* whole_store) {
    for_each_stage_tensor(whole, stage, [&](int64_t at_whole, int64_t at_stage, int64_t n) {
        std::copy(stage_store + at_stage, stage_store + at_stage + n, whole_store + at_whole);
    });
}

double gpipe_bubble_fraction(int stages, int64_t micro_batches) {
    return static_cast<double>(stages - 1) / static_cast<double>(micro_batches + stages - 1);
}

}  // namespace trainbench
