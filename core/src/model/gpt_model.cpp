#include <algorithm>
#include <cmath>
#include <string>

#include "model/build_model.hpp"
#include "trainbench/error.hpp"

namespace trainbench {
namespace {

// Appends ops and tensors while reading like nanoGPT's modules.
class GptBuilder {
public:
    explicit GptBuilder(const GptShape& s) : s_(s) {}

    ModelDesc build() {
        const int64_t C = s_.n_embd, T = s_.block_size, V = s_.vocab;
        m_.family = ModelFamily::gpt;
        m_.token_input = true;
        m_.input_per_sample = T;
        m_.loss_terms_per_sample = T;
        m_.classes = V;
        m_.summary = "GPT L" + std::to_string(s_.n_layer) + " H" + std::to_string(s_.n_head) + " C" +
                     std::to_string(C) + " T" + std::to_string(T) + " V" + std::to_string(V);

        const int wte = param("transformer.wte.weight", {V, C}, true, InitRule::normal, 0.02f);
        m_.params[static_cast<size_t>(wte)].alias = "lm_head.weight";
        const int wpe = param("transformer.wpe.weight", {T, C}, true, InitRule::normal, 0.02f);
        // Parameters in state_dict order: the blocks' come before ln_f.
        int x = tensor("embedding.out", T * C);
        op(OpKind::embedding, {}, {x}, {wte, wpe}, -1);
        for (int64_t l = 0; l < s_.n_layer; ++l) x = block(x, static_cast<int>(l));
        const int lnf_w = param("transformer.ln_f.weight", {C}, false, InitRule::ones, 0.0f);
        const int lnf_b = param("transformer.ln_f.bias", {C}, false, InitRule::zeros, 0.0f);
        const int lnf = layernorm(x, "transformer.ln_f", lnf_w, lnf_b, -1);
        const int logits = tensor("logits", T * V);
        op(OpKind::linear, {lnf}, {logits}, {wte}, -1);
        op(OpKind::cross_entropy, {logits}, {}, {}, -1);
        if (s_.lora.rank > 0) freeze_base_and_append_adapters();
        // llm.c's count: 6 FLOPs per parameter per token (the tied wte/lm_head counted once)
        // plus causal attention's QK^T and att.V, 6 L C T per token. A frozen weight has no
        // weight gradient: 2 FLOPs forward and 2 for its input's gradient, 4 per token.
        const auto N = static_cast<double>(m_.parameter_count());
        const auto trainable = static_cast<double>(m_.trainable_parameter_count());
        const double L = static_cast<double>(s_.n_layer);
        m_.training_flops_per_sample =
            static_cast<double>(T) * (6.0 * trainable + 4.0 * (N - trainable) + 6.0 * L * double(C) * double(T));
        return m_;
    }

private:
    int block(int x, int l) {
        const int64_t C = s_.n_embd, T = s_.block_size;
        const std::string h = "transformer.h." + std::to_string(l);
        // nanoGPT scales the residual projections' init by 1/sqrt(2 n_layer).
        const float proj_std = 0.02f / std::sqrt(2.0f * static_cast<float>(s_.n_layer));
        const int ln1_w = param(h + ".ln_1.weight", {C}, false, InitRule::ones, 0.0f);
        const int ln1_b = param(h + ".ln_1.bias", {C}, false, InitRule::zeros, 0.0f);
        const int attn_w = param(h + ".attn.c_attn.weight", {3 * C, C}, true, InitRule::normal, 0.02f);
        const int attn_b = param(h + ".attn.c_attn.bias", {3 * C}, false, InitRule::zeros, 0.0f);
        const int aproj_w = param(h + ".attn.c_proj.weight", {C, C}, true, InitRule::normal, proj_std);
        const int aproj_b = param(h + ".attn.c_proj.bias", {C}, false, InitRule::zeros, 0.0f);
        const int ln2_w = param(h + ".ln_2.weight", {C}, false, InitRule::ones, 0.0f);
        const int ln2_b = param(h + ".ln_2.bias", {C}, false, InitRule::zeros, 0.0f);
        const int fc_w = param(h + ".mlp.c_fc.weight", {4 * C, C}, true, InitRule::normal, 0.02f);
        const int fc_b = param(h + ".mlp.c_fc.bias", {4 * C}, false, InitRule::zeros, 0.0f);
        const int mproj_w = param(h + ".mlp.c_proj.weight", {C, 4 * C}, true, InitRule::normal, proj_std);
        const int mproj_b = param(h + ".mlp.c_proj.bias", {C}, false, InitRule::zeros, 0.0f);

        const int ln1 = layernorm(x, h + ".ln_1", ln1_w, ln1_b, l);
        const int qkv = tensor(h + ".attn.qkv", T * 3 * C);
        target_linear(ln1, qkv, attn_w, attn_b, s_.lora.targets.c_attn, l);
        const int y = tensor(h + ".attn.y", T * C);
        const int probabilities = tensor(h + ".attn.probabilities", s_.n_head * T * T);
        op(OpKind::attention, {qkv}, {y, probabilities}, {}, l).heads = s_.n_head;
        const int attn_out = tensor(h + ".attn.out", T * C);
        target_linear(y, attn_out, aproj_w, aproj_b, s_.lora.targets.attn_c_proj, l);
        const int x_mid = tensor(h + ".residual_1", T * C);
        op(OpKind::residual_add, {x, attn_out}, {x_mid}, {}, l);
        const int ln2 = layernorm(x_mid, h + ".ln_2", ln2_w, ln2_b, l);
        const int fc = tensor(h + ".mlp.fc", T * 4 * C);
        target_linear(ln2, fc, fc_w, fc_b, s_.lora.targets.c_fc, l);
        const int gelu = tensor(h + ".mlp.gelu", T * 4 * C);
        op(OpKind::activation, {fc}, {gelu}, {}, l).activation = Activation::gelu;
        const int mlp_out = tensor(h + ".mlp.out", T * C);
        target_linear(gelu, mlp_out, mproj_w, mproj_b, s_.lora.targets.mlp_c_proj, l);
        const int x_out = tensor(h + ".residual_2", T * C);
        op(OpKind::residual_add, {x_mid, mlp_out}, {x_out}, {}, l);
        return x_out;
    }

    // A block's Linear layer, with a LoRA adapter when it is a target. The adapter's tensors
    // are appended here and moved after the base tensors once the model is complete.
    void target_linear(int x, int out, int weight, int bias, bool adapted, int segment) {
        if (s_.lora.rank <= 0 || !adapted) {
            op(OpKind::linear, {x}, {out}, {weight, bias}, segment);
            return;
        }
        const ParamDesc& base = m_.params[static_cast<size_t>(weight)];
        const std::string module = base.name.substr(0, base.name.rfind(".weight"));  // "...attn.c_attn"
        const int64_t rows_out = base.shape[0], in = base.shape[1];
        const int64_t r = s_.lora.rank;
        // PEFT: kaiming_uniform_(lora_A.weight, a=sqrt(5)), i.e. U(-1/sqrt(in), 1/sqrt(in)); B = 0.
        const int a = param(module + kLoraASuffix, {r, in}, true, InitRule::uniform,
                            1.0f / std::sqrt(static_cast<float>(in)));
        const int b = param(module + kLoraBSuffix, {rows_out, r}, true, InitRule::zeros, 0.0f);
        const int down = tensor(module + ".lora_down", s_.block_size * r);
        m_.params[static_cast<size_t>(weight)].nf4 = s_.lora.nf4_base;
        std::vector<int> params{weight, bias, a, b};
        std::vector<int> outputs{out, down};
        if (s_.lora.dora) {
            // PEFT: the magnitude starts as the norms of W's rows; 1-D, so nanoGPT's groups do
            // not decay it.
            const int magnitude = param(module + kDoraMagnitudeSuffix, {rows_out}, false, InitRule::row_norms, 0.0f);
            m_.params[static_cast<size_t>(magnitude)].norm_of = weight;
            params.push_back(magnitude);
            outputs.push_back(tensor(module + ".dora_unscaled", s_.block_size * rows_out));
        }
        op(OpKind::lora_linear, {x}, outputs, params, segment).lora_scale =
            static_cast<float>(s_.lora.alpha / static_cast<double>(r));
    }

    // LoRA: every base tensor frozen, the adapters after them in the state_dict.
    void freeze_base_and_append_adapters() {
        std::vector<int> order;
        for (int pass = 0; pass < 2; ++pass)
            for (size_t p = 0; p < m_.params.size(); ++p)
                if (is_lora_adapter(m_.params[p].name) == (pass == 1)) order.push_back(static_cast<int>(p));
        std::vector<int> new_id(m_.params.size());
        std::vector<ParamDesc> params;
        for (int p : order) {
            new_id[static_cast<size_t>(p)] = static_cast<int>(params.size());
            params.push_back(m_.params[static_cast<size_t>(p)]);
            params.back().trainable = is_lora_adapter(params.back().name);
        }
        for (ParamDesc& p : params)
            if (p.norm_of >= 0) p.norm_of = new_id[static_cast<size_t>(p.norm_of)];
        m_.params = std::move(params);
        for (OpDesc& o : m_.ops)
            for (int& p : o.params) p = new_id[static_cast<size_t>(p)];
        m_.summary += std::string(s_.lora.dora ? " DoRA r" : s_.lora.nf4_base ? " QLoRA r" : " LoRA r") +
                      std::to_string(s_.lora.rank);
    }

    int layernorm(int x, const std::string& name, int weight, int bias, int segment) {
        const int64_t T = s_.block_size;
        const int out = tensor(name + ".out", T * s_.n_embd);
        const int mean = tensor(name + ".mean", T, true);
        const int rstd = tensor(name + ".rstd", T, true);
        op(OpKind::layernorm, {x}, {out, mean, rstd}, {weight, bias}, segment);
        return out;
    }

    int param(const std::string& name, std::vector<int64_t> shape, bool decay, InitRule init, float scale) {
        m_.params.push_back({name, std::move(shape), decay, init, scale, {}});
        return static_cast<int>(m_.params.size()) - 1;
    }
    int tensor(const std::string& name, int64_t per_sample, bool statistics = false) {
        m_.tensors.push_back({name, per_sample, statistics});
        return static_cast<int>(m_.tensors.size()) - 1;
    }
    OpDesc& op(OpKind kind, std::vector<int> in, std::vector<int> out, std::vector<int> params, int segment) {
        OpDesc o;
        o.kind = kind;
        o.inputs = std::move(in);
        o.outputs = std::move(out);
        o.params = std::move(params);
        o.rows_per_sample = s_.block_size;
        o.segment = segment;
        m_.ops.push_back(o);
        return m_.ops.back();
    }

    GptShape s_;
    ModelDesc m_;
};

}  // namespace

LoraTargets parse_lora_targets(const std::string& list) {
    LoraTargets targets;
    size_t begin = 0;
    while (begin <= list.size()) {
        const size_t comma = std::min(list.find(',', begin), list.size());
        const std::string name = list.substr(begin, comma - begin);
        if (name == "c_attn") targets.c_attn = true;
        else if (name == "c_proj") targets.attn_c_proj = targets.mlp_c_proj = true;
        else if (name == "c_fc") targets.c_fc = true;
        else if (name == "attn") targets.c_attn = targets.attn_c_proj = true;
        else if (name == "mlp") targets.c_fc = targets.mlp_c_proj = true;
        else
            throw Error("unknown LoRA target '" + name + "'; use c_attn, c_proj, c_fc, attn or mlp, comma-separated "
                        "(e.g. --lora-targets attn,mlp)");
        begin = comma + 1;
    }
    return targets;
}

bool is_lora_adapter(const std::string& name) {
    return name.ends_with(kLoraASuffix) || name.ends_with(kLoraBSuffix) || name.ends_with(kDoraMagnitudeSuffix);
}

ModelDesc build_gpt(const GptShape& shape) {
    if (shape.n_layer < 1 || shape.n_head < 1 || shape.n_embd < 1 || shape.block_size < 1 || shape.vocab < 1)
        throw Error("a GPT needs at least one layer, head, channel, position and token");
    if (shape.n_embd % shape.n_head != 0)
        throw Error("invalid --n-head: " + std::to_string(shape.n_head) + " heads do not divide --n-embd " +
                    std::to_string(shape.n_embd));
    if (shape.lora.rank < 0) throw Error("a LoRA rank is at least 1 (0 trains every weight)");
    if (shape.lora.rank > 0 && !shape.lora.targets.any())
        throw Error("LoRA needs at least one target layer; e.g. --lora-targets attn,mlp");
    if (shape.lora.dora && shape.lora.nf4_base)
        throw Error("DoRA on a 4-bit base (QDoRA) is not supported yet; use --dora or --lora-base nf4, not both");
    return GptBuilder(shape).build();
}

}  // namespace trainbench
