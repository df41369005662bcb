#pragma once
// The LoRA fixtures' model, data and training loop (tests/fixtures/make_lora_fixtures.py), for
// the LoRA and QLoRA suites.
#include <QtTest>

#include <cmath>
#include <cstring>

#include "backend/compute_engine.hpp"
#include "core/torch_fixtures.hpp"
#include "model/build_model.hpp"
#include "trainbench/weights.hpp"

namespace lora_fixture {

using namespace trainbench;

inline const std::string kDir = std::string(TRAINBENCH_FIXTURES_DIR) + "/lora/";
inline const std::string kGptDir = std::string(TRAINBENCH_FIXTURES_DIR) + "/gpt/";
constexpr int64_t B = 3, T = 16, kRank = 4;
constexpr double kAlpha = 8.0;

inline GptShape fixture_shape(int64_t rank = kRank) {
    GptShape s;
    s.n_layer = 2, s.n_head = 4, s.n_embd = 32, s.block_size = T, s.vocab = 65;
    s.lora.rank = rank;
    s.lora.alpha = kAlpha;
    s.lora.targets = parse_lora_targets("attn,mlp");
    return s;
}

inline EngineSpec fixture_spec(Precision precision = Precision::fp32, bool checkpointing = false, int threads = 2,
                               int64_t rank = kRank) {
    EngineSpec spec;
    spec.precision = precision;
    spec.model = build_gpt(fixture_shape(rank));
    spec.optimizer = testing::gpt_fixture_adamw();
    spec.max_micro_batch = spec.max_eval_batch = B;
    spec.threads = threads;
    spec.gradient_checkpointing = checkpointing;
    return spec;
}

// make_gpt_fixtures' micro-batches, which the LoRA fixtures train on.
struct FixtureData {
    std::vector<std::vector<int32_t>> inputs, targets;  // per micro-batch, B * T ids
    FixtureData() {
        const auto train = testing::read_fixture_tensors(kGptDir + "gpt_train.safetensors");
        const NamedTensor& x = train.at("train.inputs");
        const NamedTensor& y = train.at("train.targets");
        for (int64_t m = 0; m < static_cast<int64_t>(x.data.size()) / (B * T); ++m) {
            inputs.push_back(testing::fixture_ids(x, m * B * T, B * T));
            targets.push_back(testing::fixture_ids(y, m * B * T, B * T));
        }
    }
    MicroBatch batch(size_t m) const {
        MicroBatch b;
        b.tokens = inputs[m].data();
        b.labels = targets[m].data();
        b.count = B;
        return b;
    }
};

struct Trace {
    std::vector<double> losses, norms;
};

// make_lora_fixtures' loop: 2 micro-batches per update normalised by the update's tokens,
// clipping at 1.0, AdamW lr 3e-3.
inline Trace train(ComputeEngine& engine, int updates) {
    const FixtureData data;
    Trace trace;
    for (int u = 0; u < updates; ++u) {
        engine.zero_grad();
        double loss = 0.0;
        const double tokens = 2.0 * B * T;
        for (size_t m = 2 * static_cast<size_t>(u); m < 2 * static_cast<size_t>(u) + 2; ++m)
            loss += engine.forward_backward(data.batch(m), tokens, 1.0);
        const double norm = std::sqrt(engine.grad_norm_squared());
        engine.optimizer_step(3e-3, std::min(1.0, 1.0 / (norm + 1e-6)), u + 1);
        trace.losses.push_back(loss / tokens);
        trace.norms.push_back(norm);
    }
    return trace;
}

inline void expect_close(const std::string& name, const std::vector<float>& got, const std::vector<float>& want,
                         double tolerance) {
    QCOMPARE(got.size(), want.size());
    const double error = testing::max_relative_error(got, want);
    QVERIFY2(error < tolerance, qPrintable(QString("%1: relative error %2").arg(QString::fromStdString(name)).arg(error)));
}

inline bool same_floats(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

inline int64_t adapter_elements(const ModelDesc& model) {
    int64_t n = 0;
    for (const ParamDesc& p : model.params)
        if (is_lora_adapter(p.name)) n += p.numel();
    return n;
}

}  // namespace lora_fixture
