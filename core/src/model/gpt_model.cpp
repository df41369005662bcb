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
        // llm.c's count: 6 FLOPs per parameter per token (the tied wte/lm_head counted once)
        // plus causal attention's QK^T and att.V, 6 L C T per token.
        const auto N = static_cast<double>(m_.parameter_count());
        const double L = static_cast<double>(s_.n_layer);
        m_.training_flops_per_sample = static_cast<double>(T) * (6.0 * N + 6.0 * L * double(C) * double(T));
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
        op(OpKind::linear, {ln1}, {qkv}, {attn_w, attn_b}, l);
        const int y = tensor(h + ".attn.y", T * C);
        const int probabilities = tensor(h + ".attn.probabilities", s_.n_head * T * T);
        op(OpKind::attention, {qkv}, {y, probabilities}, {}, l).heads = s_.n_head;
        const int attn_out = tensor(h + ".attn.out", T * C);
        op(OpKind::linear, {y}, {attn_out}, {aproj_w, aproj_b}, l);
        const int x_mid = tensor(h + ".residual_1", T * C);
        op(OpKind::residual_add, {x, attn_out}, {x_mid}, {}, l);
        const int ln2 = layernorm(x_mid, h + ".ln_2", ln2_w, ln2_b, l);
        const int fc = tensor(h + ".mlp.fc", T * 4 * C);
        op(OpKind::linear, {ln2}, {fc}, {fc_w, fc_b}, l);
        const int gelu = tensor(h + ".mlp.gelu", T * 4 * C);
        op(OpKind::activation, {fc}, {gelu}, {}, l).activation = Activation::gelu;
        const int mlp_out = tensor(h + ".mlp.out", T * C);
        op(OpKind::linear, {gelu}, {mlp_out}, {mproj_w, mproj_b}, l);
        const int x_out = tensor(h + ".residual_2", T * C);
        op(OpKind::residual_add, {x_mid, mlp_out}, {x_out}, {}, l);
        return x_out;
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

ModelDesc build_gpt(const GptShape& shape) {
    if (shape.n_layer < 1 || shape.n_head < 1 || shape.n_embd < 1 || shape.block_size < 1 || shape.vocab < 1)
        throw Error("a GPT needs at least one layer, head, channel, position and token");
    if (shape.n_embd % shape.n_head != 0)
        throw Error("invalid --n-head: " + std::to_string(shape.n_head) + " heads do not divide --n-embd " +
                    std::to_string(shape.n_embd));
    return GptBuilder(shape).build();
}

}  // namespace trainbench
