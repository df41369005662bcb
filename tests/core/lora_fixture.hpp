#pragma once
// The LoRA fixtures' model, data and training loop (tests/fixtures/make_lora_fixtures.py), and
// the checks the LoRA, QLoRA and DoRA suites share. Include it from the one source file of a
// test executable (it brings core/allocation_counter.hpp).
#include <QtTest>

#include <cmath>
#include <cstring>

#include "backend/compute_engine.hpp"
#include "core/allocation_counter.hpp"
#include "core/torch_fixtures.hpp"
#include "model/build_model.hpp"
#include "trainbench/lora_weights.hpp"
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

// After a first update of `spec` from `weights`, three more (two micro-batches, the norm, the
// step and an evaluation each) allocate nothing (core/allocation_counter.hpp).
inline void expect_updates_allocate_nothing(const EngineSpec& spec, const ModelWeights& weights) {
    SKIP_WITHOUT_ALLOCATION_COUNTER();
    auto engine = make_cpu_engine(spec);
    engine->set_weights(weights);
    train(*engine, 1);
    const FixtureData data;
    allocations = 0;
    counting = true;
    for (int u = 0; u < 3; ++u) {
        engine->zero_grad();
        engine->forward_backward(data.batch(0), double(2 * B * T), 1.0);
        engine->forward_backward(data.batch(1), double(2 * B * T), 1.0);
        engine->grad_norm_squared();
        engine->optimizer_step(1e-3, 1.0, 2 + u);
        engine->evaluate(data.batch(2));
    }
    counting = false;
    QCOMPARE(allocations.load(), 0L);
}

// One update of `spec` from `weights`, then every category's peak against the plan (the cache
// aside), which it writes to `planned`.
inline void expect_plan_equals_allocation(const EngineSpec& spec, const ModelWeights& weights, BytesByCategory& planned) {
    auto engine = make_cpu_engine(spec);
    engine->set_weights(weights);
    train(*engine, 1);
    planned = plan_cpu_engine_memory(spec);
    const MemoryReport report = engine->memory();
    for (int c = 0; c < kMemoryCategoryCount; ++c)
        if (c != int(MemoryCategory::cache)) QCOMPARE(report.peak[size_t(c)], planned[size_t(c)]);
}

// A trained adapted engine's weights merged (--save-weights) evaluate in a plain GPT as the
// adapted model does.
inline void expect_merged_weights_compute_the_same(ComputeEngine& adapted) {
    auto plain = make_cpu_engine(fixture_spec(Precision::fp32, false, 2, 0));
    plain->set_weights(merge_lora_adapters(adapted.weights(), kAlpha / double(kRank)));
    const FixtureData data;
    const double want = adapted.evaluate(data.batch(5)).loss_sum, got = plain->evaluate(data.batch(5)).loss_sum;
    QVERIFY2(std::abs(got - want) < 1e-5 * want, qPrintable(QString("%1 vs %2").arg(got).arg(want)));
}

// The rows of a test run in fp32 and bf16.
inline void add_precision_rows() {
    QTest::addColumn<int>("precision");
    for (Precision p : {Precision::fp32, Precision::bf16}) QTest::newRow(to_string(p).c_str()) << int(p);
}

}  // namespace lora_fixture
