// LoRA fine-tuning of the GPT against PyTorch (tests/fixtures/make_lora_fixtures.py: nanoGPT at
// L2 H4 C32 T16 V65, rank 4, alpha 8, adapters on attn and mlp, B nonzero so A has a gradient
// from the first step): the loss and every adapter's gradient, then 10 AdamW updates with
// step_size 2, with the base weights bit-unchanged. Then what only the adapters may hold:
// gradients and optimizer state, exactly their bytes; no fp32 master copy of frozen weights in
// mixed precision; plan == allocation; checkpointing changes no bit; the update allocates
// nothing; merged weights compute what the adapters do.
#include <QtTest>

#include <cmath>
#include <cstring>
#include <map>

#include "backend/compute_engine.hpp"
#include "core/lora_fixture.hpp"
#include "core/torch_fixtures.hpp"
#include "memory/tracking_arena.hpp"
#include "model/build_model.hpp"
#include "model/init_weights.hpp"
#include "model/param_layout.hpp"
#include "trainbench/error.hpp"
#include "trainbench/lora_weights.hpp"
#include "trainbench/weights.hpp"

using namespace trainbench;

using namespace lora_fixture;

class TestLora : public QObject {
    Q_OBJECT
private slots:
    void adapters_are_named_as_peft_and_only_they_train() {
        const ModelDesc model = build_gpt(fixture_shape());
        const auto file = load_weights(kDir + "lora_weights.safetensors");
        check_weights_shape(file, model);
        int adapters = 0;
        for (const ParamDesc& p : model.params) {
            QCOMPARE(p.trainable, is_lora_adapter(p.name));
            adapters += p.trainable ? 1 : 0;
        }
        QCOMPARE(adapters, 2 * 4 * 2);  // A and B, 4 targets, 2 blocks
        const int a = model.find_param("transformer.h.1.mlp.c_fc.lora_A.weight");
        const int b = model.find_param("transformer.h.1.mlp.c_fc.lora_B.weight");
        QVERIFY(a >= 0 && b >= 0);
        QCOMPARE(model.params[size_t(a)].shape, (std::vector<int64_t>{kRank, 32}));
        QCOMPARE(model.params[size_t(b)].shape, (std::vector<int64_t>{128, kRank}));
        const ParamLayout layout = make_param_layout(model);
        QCOMPARE(layout.trainable_end, adapter_elements(model));
        QCOMPARE(layout.count, model.parameter_count());
        // The base is drawn as without LoRA: adapters come after it in the state_dict.
        const ModelWeights plain = init_weights(build_gpt(fixture_shape(0)), 7);
        const ModelWeights with_lora = init_weights(model, 7);
        for (const NamedTensor& t : plain.tensors) QVERIFY(with_lora.find(t.name)->data == t.data);
        QVERIFY_EXCEPTION_THROWN(parse_lora_targets("attn,q_proj"), trainbench::Error);
    }

    void loss_and_adapter_gradients_match_pytorch() {
        auto engine = make_cpu_engine(fixture_spec());
        engine->set_weights(load_weights(kDir + "lora_weights.safetensors"));
        const auto step0 = testing::read_fixture_tensors(kDir + "lora_step0.safetensors");
        engine->zero_grad();
        const double loss = engine->forward_backward(FixtureData().batch(0), double(B * T), 1.0) / double(B * T);
        QVERIFY(std::abs(loss - step0.at("step0.loss").data[0]) < 1e-6 * loss);
        const ModelWeights grads = engine->gradients();
        QCOMPARE(int(grads.tensors.size()), 16);  // the adapters' only
        for (const NamedTensor& g : grads.tensors) {
            QVERIFY(is_lora_adapter(g.name));
            expect_close(g.name, g.data, step0.at("grad." + g.name).data, 1e-5);
        }
    }

    void ten_adamw_updates_match_pytorch_and_leave_the_base_unchanged() {
        auto engine = make_cpu_engine(fixture_spec());
        const ModelWeights initial = load_weights(kDir + "lora_weights.safetensors");
        engine->set_weights(initial);
        const Trace trace = train(*engine, 10);
        const auto want = testing::read_fixture_tensors(kDir + "lora_train.safetensors");
        for (int u = 0; u < 10; ++u) {
            QVERIFY(std::abs(trace.losses[u] - want.at("train.losses").data[u]) < 1e-5 * trace.losses[u]);
            QVERIFY(std::abs(trace.norms[u] - want.at("train.grad_norms").data[u]) < 1e-4 * trace.norms[u]);
        }
        for (const NamedTensor& w : engine->weights().tensors) {
            if (is_lora_adapter(w.name)) {
                expect_close(w.name, w.data, want.at("final." + w.name).data, 1e-4);
            } else {
                QVERIFY2(same_floats(w.data, initial.find(w.name)->data), w.name.c_str());
            }
        }
    }

    // Gradients and optimizer state hold the adapters only; a 16-bit run keeps no fp32 copy of
    // the frozen weights; every category is what the plan says.
    void memory_holds_state_for_the_adapters_only_data() { add_precision_rows(); }
    void memory_holds_state_for_the_adapters_only() {
        QFETCH(int, precision);
        const auto p = Precision(precision);
        for (bool checkpointing : {false, true}) {
            const EngineSpec spec = fixture_spec(p, checkpointing);
            BytesByCategory planned{};
            expect_plan_equals_allocation(spec, load_weights(kDir + "lora_weights.safetensors"), planned);
            if (QTest::currentTestFailed()) return;
            const int64_t adapters = adapter_elements(spec.model), all = spec.model.parameter_count();
            auto bytes = [&](MemoryCategory c) { return planned[size_t(c)]; };
            QCOMPARE(bytes(MemoryCategory::gradients), TrackingArena::rounded_size(adapters * 4));
            QCOMPARE(bytes(MemoryCategory::optimizer_state), TrackingArena::rounded_size(2 * adapters * 4));
            if (p == Precision::fp32) {
                QCOMPARE(bytes(MemoryCategory::parameters), TrackingArena::rounded_size(all * 4));
                QCOMPARE(bytes(MemoryCategory::master_weights), int64_t{0});
            } else {
                QCOMPARE(bytes(MemoryCategory::parameters), TrackingArena::rounded_size(all * 2));
                QCOMPARE(bytes(MemoryCategory::master_weights), TrackingArena::rounded_size(adapters * 4));
            }
        }
    }

    // Frozen weights in 16 bits: the losses follow fp32's within the format's rounding, and the
    // base reads back as its 16-bit rounding.
    void sixteen_bit_follows_fp32() {
        auto fp32 = make_cpu_engine(fixture_spec());
        auto bf16 = make_cpu_engine(fixture_spec(Precision::bf16));
        const ModelWeights initial = load_weights(kDir + "lora_weights.safetensors");
        fp32->set_weights(initial);
        bf16->set_weights(initial);
        const Trace a = train(*fp32, 4), b = train(*bf16, 4);
        for (int u = 0; u < 4; ++u) QVERIFY(std::abs(a.losses[u] - b.losses[u]) < 0x1p-8 * a.losses[u]);
        const ModelWeights after = bf16->weights();
        const NamedTensor& wte = *after.find("transformer.wte.weight");
        QVERIFY(testing::max_relative_error(wte.data, initial.find("transformer.wte.weight")->data) < 0x1p-8);
        QVERIFY(!same_floats(wte.data, initial.find("transformer.wte.weight")->data));
    }

    // (Across thread counts the products' blocking differs, so bits may too: not promised.)
    void checkpointing_and_reruns_change_no_bit() {
        const ModelWeights initial = load_weights(kDir + "lora_weights.safetensors");
        auto run = [&](bool checkpointing) {
            auto engine = make_cpu_engine(fixture_spec(Precision::fp32, checkpointing));
            engine->set_weights(initial);
            const Trace trace = train(*engine, 3);
            return std::make_pair(trace.losses, engine->weights());
        };
        const auto reference = run(false);
        for (bool checkpointing : {true, false}) {
            const auto other = run(checkpointing);
            QCOMPARE(other.first, reference.first);
            for (const NamedTensor& t : reference.second.tensors)
                QVERIFY2(same_floats(other.second.find(t.name)->data, t.data), t.name.c_str());
        }
    }

    void updates_do_not_allocate_data() { add_precision_rows(); }
    void updates_do_not_allocate() {
        QFETCH(int, precision);
        expect_updates_allocate_nothing(fixture_spec(Precision(precision), true), load_weights(kDir + "lora_weights.safetensors"));
    }

    // --save-weights of a LoRA run: W + (alpha / r) B A, which a plain GPT evaluates as the
    // adapted one does; --save-adapters: PEFT's names.
    void merged_weights_compute_what_the_adapters_do() {
        auto lora = make_cpu_engine(fixture_spec());
        lora->set_weights(load_weights(kDir + "lora_weights.safetensors"));
        train(*lora, 2);
        const ModelWeights trained = lora->weights();
        EngineSpec plain_spec = fixture_spec(Precision::fp32, false, 2, 0);
        auto plain = make_cpu_engine(plain_spec);
        const ModelWeights merged = merge_lora_adapters(trained, kAlpha / double(kRank));
        plain->set_weights(merged);  // checks that exactly the plain model's tensors are there
        const FixtureData data;
        const MicroBatch batch = data.batch(5);
        const double want = lora->evaluate(batch).loss_sum, got = plain->evaluate(batch).loss_sum;
        QVERIFY2(std::abs(got - want) < 1e-5 * want, qPrintable(QString("%1 vs %2").arg(got).arg(want)));
        const ModelWeights adapters = peft_adapters(trained);
        QCOMPARE(int(adapters.tensors.size()), 16);
        QVERIFY(adapters.find("base_model.model.transformer.h.0.attn.c_attn.lora_A.weight"));
        QVERIFY(adapters.find("base_model.model.transformer.h.1.mlp.c_proj.lora_B.weight"));
    }

    // --init-weights of a plain model file starts the adapters as a fresh LoRA run draws them.
    void a_plain_model_file_starts_fresh_adapters() {
        const ModelDesc model = build_gpt(fixture_shape());
        const ModelWeights base = load_weights(kGptDir + "gpt_weights.safetensors");
        QVERIFY_EXCEPTION_THROWN(check_weights_shape(base, model), trainbench::Error);
        const ModelWeights start = with_initial_adapters(base, model, 3);
        check_weights_shape(start, model);
        const ModelWeights fresh = init_weights(model, 3);
        for (const ParamDesc& p : model.params) {
            const auto& want = (is_lora_adapter(p.name) ? fresh : base).find(p.name)->data;
            QVERIFY(start.find(p.name)->data == want);
        }
    }
};

QTEST_APPLESS_MAIN(TestLora)
#include "test_lora.moc"
