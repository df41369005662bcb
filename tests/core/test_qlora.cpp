// QLoRA on the CPU engine: the LoRA fixtures' GPT with the adapted layers' base stored as NF4.
// Its products multiply the dequantized base, so a QLoRA run is a LoRA run on the dequantized
// base bit for bit, in every precision, with either product library and with checkpointing.
// Then what the 4-bit base saves: the plan equals the allocation, the base takes about 4.1 bits
// a weight, the update allocates nothing, and a checkpoint restores the same 4-bit bits (which
// quantizing the dequantized values again would not).
#include <QtTest>

#include <filesystem>

#include "core/lora_fixture.hpp"
#include "memory/tracking_arena.hpp"
#include "model/param_layout.hpp"
#include "precision/half_float.hpp"
#include "precision/nf4.hpp"
#include "train/run_checkpoint.hpp"
#include "trainbench/error.hpp"
#include "trainbench/lora_weights.hpp"

using namespace lora_fixture;

namespace {

EngineSpec qlora_spec(Precision precision, bool checkpointing = false, CpuProducts products = CpuProducts::automatic) {
    EngineSpec spec = fixture_spec(precision, checkpointing);
    GptShape shape = fixture_shape();
    shape.lora.nf4_base = true;
    spec.model = build_gpt(shape);
    spec.cpu_products = products;
    return spec;
}

ModelWeights initial_weights() { return load_weights(kDir + "lora_weights.safetensors"); }

void expect_same_weights(const ModelWeights& got, const ModelWeights& want) {
    QCOMPARE(got.tensors.size(), want.tensors.size());
    for (const NamedTensor& t : want.tensors) QVERIFY2(same_floats(got.find(t.name)->data, t.data), t.name.c_str());
}

}  // namespace

class TestQlora : public QObject {
    Q_OBJECT
private slots:
    void only_the_adapted_layers_base_is_nf4() {
        const EngineSpec spec = qlora_spec(Precision::fp32);
        int nf4 = 0;
        for (const ParamDesc& p : spec.model.params) {
            if (!p.nf4) continue;
            ++nf4;
            QVERIFY2(!p.trainable && p.shape.size() == 2 && p.name.ends_with(".weight"), p.name.c_str());
            QVERIFY(p.name.find("c_attn") != std::string::npos || p.name.find("c_proj") != std::string::npos ||
                    p.name.find("c_fc") != std::string::npos);
        }
        QCOMPARE(nf4, 2 * 4);  // 4 targets in each of 2 blocks
        QVERIFY(spec.model.summary.find("QLoRA r4") != std::string::npos);
        const ParamLayout layout = make_param_layout(spec.model);
        QCOMPARE(layout.trainable_end, adapter_elements(spec.model));
        int64_t stored = 0, quantized = 0;
        for (size_t p = 0; p < spec.model.params.size(); ++p) {
            (layout.nf4_offset[p] >= 0 ? quantized : stored) += spec.model.params[p].numel();
            QCOMPARE(layout.offset[p] < 0, layout.nf4_offset[p] >= 0);
        }
        QCOMPARE(layout.count, stored);
        QCOMPARE(stored + quantized, spec.model.parameter_count());
    }

    // The engine's weights() give the dequantized base; a LoRA engine started from them
    // computes every update to the same bits.
    void qlora_is_lora_on_its_dequantized_base_data() {
        QTest::addColumn<int>("precision");
        QTest::addColumn<int>("products");
        QTest::addColumn<bool>("checkpointing");
        for (Precision p : {Precision::fp32, Precision::bf16, Precision::fp16})
            for (CpuProducts products : {CpuProducts::eigen, CpuProducts::onednn})
                for (bool checkpointing : {false, true})
                    QTest::newRow((to_string(p) + " " + to_string(products) + (checkpointing ? " ckpt" : "")).c_str())
                        << int(p) << int(products) << checkpointing;
    }
    void qlora_is_lora_on_its_dequantized_base() {
        QFETCH(int, precision);
        QFETCH(int, products);
        QFETCH(bool, checkpointing);
        const EngineSpec q_spec = qlora_spec(Precision(precision), checkpointing, CpuProducts(products));
        EngineSpec l_spec = fixture_spec(Precision(precision), checkpointing);
        l_spec.cpu_products = CpuProducts(products);
        auto qlora = make_cpu_engine(q_spec);
        auto lora = make_cpu_engine(l_spec);
        const ModelWeights initial = initial_weights();
        qlora->set_weights(initial);
        const ModelWeights dequantized = qlora->weights();
        // The NF4 base moved from the file's values (within NF4's error); the rest did not.
        for (const ParamDesc& p : q_spec.model.params) {
            const auto& got = dequantized.find(p.name)->data;
            const auto& want = initial.find(p.name)->data;
            if (p.nf4) {
                QVERIFY2(!same_floats(got, want), p.name.c_str());
                QVERIFY2(testing::max_relative_error(got, want) < 0.2, p.name.c_str());
            } else if (Precision(precision) == Precision::fp32 || p.trainable) {
                QVERIFY2(same_floats(got, want), p.name.c_str());
            }
        }
        lora->set_weights(dequantized);
        const Trace a = train(*qlora, 3), b = train(*lora, 3);
        QCOMPARE(a.losses, b.losses);
        QCOMPARE(a.norms, b.norms);
        // A 16-bit run's products read the dequantized base rounded to 16 bits, which is what
        // the LoRA run holds (and reads back); QLoRA reads back the NF4 values themselves.
        const ModelWeights got = qlora->weights(), want = lora->weights();
        for (const NamedTensor& t : want.tensors) {
            std::vector<float> values = got.find(t.name)->data;
            if (q_spec.model.params[size_t(q_spec.model.find_param(t.name))].nf4 && Precision(precision) != Precision::fp32)
                round_to_16bit(Precision(precision), values.data(), int64_t(values.size()));
            QVERIFY2(same_floats(values, t.data), t.name.c_str());
        }
    }

    // Every category as planned; the base's parameters are its NF4 bytes, about 4.1 bits a
    // weight, beside the frozen tensors QLoRA leaves in the run's precision and the adapters.
    void plan_equals_allocation_and_the_base_takes_4_bits_data() { add_precision_rows(); }
    void plan_equals_allocation_and_the_base_takes_4_bits() {
        QFETCH(int, precision);
        const auto p = Precision(precision);
        for (bool checkpointing : {false, true}) {
            const EngineSpec spec = qlora_spec(p, checkpointing);
            BytesByCategory planned{};
            expect_plan_equals_allocation(spec, initial_weights(), planned);
            if (QTest::currentTestFailed()) return;
            const ParamLayout layout = make_param_layout(spec.model);
            int64_t quantized = 0;
            for (const ParamDesc& d : spec.model.params) quantized += d.nf4 ? d.numel() : 0;
            const double bits = 8.0 * double(layout.nf4_bytes) / double(quantized);
            QVERIFY2(bits > 4.1 && bits < 4.2, qPrintable(QString::number(bits)));
            const int64_t element = p == Precision::fp32 ? 4 : 2;
            QCOMPARE(planned[size_t(MemoryCategory::parameters)],
                     TrackingArena::rounded_size(layout.count * element) + TrackingArena::rounded_size(layout.nf4_bytes));
            // Against LoRA with the same base in the run's precision: the quantized weights' bytes
            // shrink from 4 (or 2) to about half a byte.
            const BytesByCategory lora = plan_cpu_engine_memory(fixture_spec(p, checkpointing));
            QVERIFY(planned[size_t(MemoryCategory::parameters)] <
                    lora[size_t(MemoryCategory::parameters)] - quantized * (element - 1));
        }
    }

    void updates_do_not_allocate_data() { add_precision_rows(); }
    void updates_do_not_allocate() {
        QFETCH(int, precision);
        expect_updates_allocate_nothing(qlora_spec(Precision(precision), true), initial_weights());
    }

    // A checkpoint carries the NF4 storage: resuming continues on the same 4-bit base, bit for
    // bit. Quantizing the dequantized values again gives another base (double quantization's
    // offset is the mean of the blocks' absmax, which dequantization moves).
    void a_checkpoint_restores_the_same_4_bit_base() {
        const EngineSpec spec = qlora_spec(Precision::fp32);
        auto first = make_cpu_engine(spec);
        first->set_weights(initial_weights());
        train(*first, 2);
        QTemporaryDir folder;
        QVERIFY(folder.isValid());
        LoopState state;
        state.update = 2;
        write_checkpoint(folder.path().toStdString(), checkpoint_tensors(*first), state, "{}");
        auto resumed = make_cpu_engine(spec);
        read_checkpoint(folder.path().toStdString(), *resumed, spec.model);
        QCOMPARE(resumed->quantized_weights().size(), first->quantized_weights().size());
        for (size_t t = 0; t < first->quantized_weights().size(); ++t)
            QVERIFY(resumed->quantized_weights()[t].data == first->quantized_weights()[t].data);
        const Trace a = train(*first, 2), b = train(*resumed, 2);
        QCOMPARE(a.losses, b.losses);
        expect_same_weights(resumed->weights(), first->weights());

        auto requantized = make_cpu_engine(spec);
        requantized->set_weights(first->weights());
        bool moved = false;
        for (size_t t = 0; t < first->quantized_weights().size(); ++t)
            moved = moved || requantized->quantized_weights()[t].data != first->quantized_weights()[t].data;
        QVERIFY(moved);
    }

    void damaged_or_missing_nf4_storage_is_refused() {
        const EngineSpec spec = qlora_spec(Precision::fp32);
        auto engine = make_cpu_engine(spec);
        engine->set_weights(initial_weights());
        std::vector<NamedTensor> storage = engine->quantized_weights();
        QCOMPARE(int(storage.size()), 8);
        QVERIFY(storage[0].name.rfind(kNf4StoragePrefix, 0) == 0);
        storage[3].data[5] = 256.0f;
        QVERIFY_EXCEPTION_THROWN(engine->set_quantized_weights(storage), trainbench::Error);
        storage.pop_back();
        QVERIFY_EXCEPTION_THROWN(engine->set_quantized_weights(storage), trainbench::Error);
        // A LoRA run's checkpoint has no NF4 storage to resume QLoRA from.
        auto lora = make_cpu_engine(fixture_spec());
        lora->set_weights(initial_weights());
        QTemporaryDir folder;
        write_checkpoint(folder.path().toStdString(), checkpoint_tensors(*lora), LoopState{}, "{}");
        QVERIFY_EXCEPTION_THROWN(read_checkpoint(folder.path().toStdString(), *engine, spec.model), trainbench::Error);
    }

    // --save-weights of a QLoRA run: the dequantized base + (alpha / r) B A, which a plain GPT
    // evaluates as the adapted one does.
    void merged_weights_compute_what_the_adapters_do() {
        auto qlora = make_cpu_engine(qlora_spec(Precision::fp32));
        qlora->set_weights(initial_weights());
        train(*qlora, 2);
        expect_merged_weights_compute_the_same(*qlora);
    }
};

QTEST_APPLESS_MAIN(TestQlora)
#include "test_qlora.moc"
