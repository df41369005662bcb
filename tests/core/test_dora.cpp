// DoRA fine-tuning of the GPT against PyTorch (tests/fixtures/make_dora_fixtures.py: the LoRA
// fixtures' model and adapters with PEFT's use_dora=True formula and magnitudes away from the
// row norms): the loss and every adapter's gradient (A, B and the magnitude m), then 10 AdamW
// updates with step_size 2. Then: a fresh adapter computes the base model exactly (fp32 and
// bf16); one micro-batch of 6 against two of 3; checkpointing changes no bit; plan ==
// allocation; the update allocates nothing; merged weights compute what the adapters do.
#include <QtTest>

#include "core/lora_fixture.hpp"
#include "memory/tracking_arena.hpp"
#include "model/init_weights.hpp"
#include "model/param_layout.hpp"
#include "trainbench/lora_weights.hpp"

using namespace lora_fixture;

namespace {

const std::string kDoraDir = std::string(TRAINBENCH_FIXTURES_DIR) + "/dora/";

EngineSpec dora_spec(Precision precision = Precision::fp32, bool checkpointing = false, int64_t micro_batch = B) {
    EngineSpec spec = fixture_spec(precision, checkpointing);
    GptShape shape = fixture_shape();
    shape.lora.dora = true;
    spec.model = build_gpt(shape);
    spec.max_micro_batch = spec.max_eval_batch = micro_batch;
    return spec;
}

ModelWeights dora_weights() { return load_weights(kDoraDir + "dora_weights.safetensors"); }

}  // namespace

class TestDora : public QObject {
    Q_OBJECT
private slots:
    void magnitudes_are_named_as_peft_and_not_decayed() {
        const ModelDesc model = dora_spec().model;
        check_weights_shape(dora_weights(), model);
        QVERIFY(model.summary.find("DoRA r4") != std::string::npos);
        int magnitudes = 0;
        for (const ParamDesc& p : model.params) {
            if (!p.name.ends_with(kDoraMagnitudeSuffix)) continue;
            ++magnitudes;
            QVERIFY(p.trainable && !p.decay && p.shape.size() == 1 && is_lora_adapter(p.name));
            QCOMPARE(model.params[size_t(p.norm_of)].name + "", p.name.substr(0, p.name.size() - kDoraMagnitudeSuffix.size()) + ".weight");
        }
        QCOMPARE(magnitudes, 2 * 4);
        const ModelWeights adapters = peft_adapters(dora_weights());
        QVERIFY(adapters.find("base_model.model.transformer.h.1.mlp.c_fc.lora_magnitude_vector"));
        QCOMPARE(int(adapters.tensors.size()), 24);
    }

    void loss_and_adapter_gradients_match_pytorch() {
        auto engine = make_cpu_engine(dora_spec());
        engine->set_weights(dora_weights());
        const auto step0 = testing::read_fixture_tensors(kDoraDir + "dora_step0.safetensors");
        engine->zero_grad();
        const double loss = engine->forward_backward(FixtureData().batch(0), double(B * T), 1.0) / double(B * T);
        QVERIFY2(std::abs(loss - step0.at("step0.loss").data[0]) < 1e-6 * loss,
                 qPrintable(QString("%1 vs %2").arg(loss, 0, 'g', 9).arg(step0.at("step0.loss").data[0], 0, 'g', 9)));
        const ModelWeights grads = engine->gradients();
        QCOMPARE(int(grads.tensors.size()), 24);
        for (const NamedTensor& g : grads.tensors) expect_close(g.name, g.data, step0.at("grad." + g.name).data, 1e-5);
    }

    void ten_adamw_updates_match_pytorch_and_leave_the_base_unchanged() {
        auto engine = make_cpu_engine(dora_spec());
        const ModelWeights initial = dora_weights();
        engine->set_weights(initial);
        const Trace trace = train(*engine, 10);
        const auto want = testing::read_fixture_tensors(kDoraDir + "dora_train.safetensors");
        for (int u = 0; u < 10; ++u) {
            QVERIFY(std::abs(trace.losses[u] - want.at("train.losses").data[u]) < 1e-5 * trace.losses[u]);
            QVERIFY(std::abs(trace.norms[u] - want.at("train.grad_norms").data[u]) < 1e-4 * trace.norms[u]);
        }
        for (const NamedTensor& w : engine->weights().tensors) {
            if (is_lora_adapter(w.name))
                expect_close(w.name, w.data, want.at("final." + w.name).data, 1e-4);
            else
                QVERIFY2(same_floats(w.data, initial.find(w.name)->data), w.name.c_str());
        }
    }

    // B = 0 and m = the norms of W's rows (as the run's precision holds W): every layer scales
    // by exactly 1, so the model computes what LoRA's fresh adapters (and the base) compute, to
    // the bit; from a plain model file too.
    void a_fresh_adapter_computes_the_base_exactly_data() { add_precision_rows(); }
    void a_fresh_adapter_computes_the_base_exactly() {
        QFETCH(int, precision);
        const auto p = Precision(precision);
        const EngineSpec spec = dora_spec(p);
        const EngineSpec lora_spec = fixture_spec(p);
        const ModelWeights plain = load_weights(kGptDir + "gpt_weights.safetensors");
        for (bool from_file : {false, true}) {
            auto dora = make_cpu_engine(spec);
            auto lora = make_cpu_engine(lora_spec);
            dora->set_weights(from_file ? with_initial_adapters(plain, spec.model, 5, p) : init_weights(spec.model, 5, p));
            lora->set_weights(from_file ? with_initial_adapters(plain, lora_spec.model, 5, p) : init_weights(lora_spec.model, 5, p));
            const FixtureData data;
            for (size_t m : {size_t{0}, size_t{7}}) {
                const double a = dora->evaluate(data.batch(m)).loss_sum, b = lora->evaluate(data.batch(m)).loss_sum;
                QVERIFY2(a == b, qPrintable(QString("%1 vs %2").arg(a, 0, 'g', 17).arg(b, 0, 'g', 17)));
            }
        }
    }

    // Two micro-batches of 3 against one of 6 with the same 6 windows: the same update up to
    // float rounding.
    void accumulation_changes_the_update_by_rounding_only() {
        const FixtureData data;
        auto whole = make_cpu_engine(dora_spec(Precision::fp32, false, 2 * B));
        auto split = make_cpu_engine(dora_spec());
        whole->set_weights(dora_weights());
        split->set_weights(dora_weights());
        for (int u = 0; u < 3; ++u) {
            std::vector<int32_t> tokens = data.inputs[size_t(2 * u)], labels = data.targets[size_t(2 * u)];
            tokens.insert(tokens.end(), data.inputs[size_t(2 * u + 1)].begin(), data.inputs[size_t(2 * u + 1)].end());
            labels.insert(labels.end(), data.targets[size_t(2 * u + 1)].begin(), data.targets[size_t(2 * u + 1)].end());
            MicroBatch batch;
            batch.tokens = tokens.data();
            batch.labels = labels.data();
            batch.count = 2 * B;
            whole->zero_grad();
            whole->forward_backward(batch, double(2 * B * T), 1.0);
            whole->optimizer_step(3e-3, 1.0, u + 1);
            split->zero_grad();
            split->forward_backward(data.batch(size_t(2 * u)), double(2 * B * T), 1.0);
            split->forward_backward(data.batch(size_t(2 * u + 1)), double(2 * B * T), 1.0);
            split->optimizer_step(3e-3, 1.0, u + 1);
        }
        const ModelWeights a = whole->weights(), b = split->weights();
        for (const NamedTensor& t : a.tensors)
            if (is_lora_adapter(t.name)) expect_close(t.name, b.find(t.name)->data, t.data, 1e-5);
    }

    void checkpointing_changes_no_bit() {
        auto run = [&](bool checkpointing) {
            auto engine = make_cpu_engine(dora_spec(Precision::fp32, checkpointing));
            engine->set_weights(dora_weights());
            const Trace trace = train(*engine, 3);
            return std::make_pair(trace.losses, engine->weights());
        };
        const auto reference = run(false), checkpointed = run(true);
        QCOMPARE(checkpointed.first, reference.first);
        for (const NamedTensor& t : reference.second.tensors)
            QVERIFY2(same_floats(checkpointed.second.find(t.name)->data, t.data), t.name.c_str());
    }

    // Every category as planned; gradients and optimizer state hold A, B and m; activations
    // hold one more [rows, out] tensor per layer than LoRA's (the unscaled result).
    void plan_equals_allocation_data() { add_precision_rows(); }
    void plan_equals_allocation() {
        QFETCH(int, precision);
        const auto p = Precision(precision);
        for (bool checkpointing : {false, true}) {
            const EngineSpec spec = dora_spec(p, checkpointing);
            BytesByCategory planned{};
            expect_plan_equals_allocation(spec, dora_weights(), planned);
            if (QTest::currentTestFailed()) return;
            const int64_t adapters = adapter_elements(spec.model);
            QCOMPARE(planned[size_t(MemoryCategory::gradients)], TrackingArena::rounded_size(adapters * 4));
            QCOMPARE(planned[size_t(MemoryCategory::optimizer_state)], TrackingArena::rounded_size(2 * adapters * 4));
            const BytesByCategory lora = plan_cpu_engine_memory(fixture_spec(p, checkpointing));
            QVERIFY(planned[size_t(MemoryCategory::activations)] > lora[size_t(MemoryCategory::activations)]);
        }
    }

    void updates_do_not_allocate_data() { add_precision_rows(); }
    void updates_do_not_allocate() {
        QFETCH(int, precision);
        expect_updates_allocate_nothing(dora_spec(Precision(precision), true), dora_weights());
    }

    // --save-weights of a DoRA run: each adapted row m / ||W + s B A|| (W + s B A), which a
    // plain GPT evaluates as the adapted one does.
    void merged_weights_compute_what_the_adapters_do() {
        auto dora = make_cpu_engine(dora_spec());
        dora->set_weights(dora_weights());
        train(*dora, 2);
        expect_merged_weights_compute_the_same(*dora);
    }
};

QTEST_APPLESS_MAIN(TestDora)
#include "test_dora.moc"
