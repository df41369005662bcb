// A whole GPT on the CPU executor against PyTorch (tests/fixtures/make_gpt_fixtures.py, nanoGPT's
// model at L2 H4 C32 T16 V65), as llm.c's test_gpt2 does: from identical safetensors weights the
// loss and every gradient of one micro-batch, then loss, gradient norm and weights over 10 AdamW
// updates with step_size 2 and clipping. Then what the engine promises beyond PyTorch:
// accumulation and checkpointing change nothing, reruns are bit-identical, the plan is the
// allocation, and the steady state allocates nothing. And mixed precision: bf16 and fp16
// follow fp32's losses within their rounding and halve the activations.
#include <QtTest>

#include <cmath>
#include <cstring>
#include <map>

#include "backend/compute_engine.hpp"
#include "core/peak_equals_plan.hpp"
#include "core/allocation_counter.hpp"
#include "core/same_bits.hpp"
#include "core/torch_fixtures.hpp"
#include "model/build_model.hpp"
#include "model/init_weights.hpp"
#include "trainbench/weights.hpp"

using namespace trainbench;

namespace {

const std::string kDir = std::string(TRAINBENCH_FIXTURES_DIR) + "/gpt/";
constexpr int64_t B = 3, T = 16;
// Largest relative difference of a 16-bit run's loss to fp32's over 10 fixture updates: one unit
// roundoff of the format, 2^-9 for bf16 (8 significant bits) and 2^-12 for fp16 (11 bits). The
// activations and products' operands are rounded at every op, but the errors are independent
// and the loss averages 96 terms, so the loss stays well inside one rounding of itself
// (measured with AVX2 products: bf16 2.5e-4, fp16 2.6e-5, about 8x inside), while a 16-bit
// path that lost a scale or a gradient would be off by far more.
constexpr double kBf16LossTolerance = 0x1p-9;
constexpr double kFp16LossTolerance = 0x1p-12;

std::map<std::string, NamedTensor> read_all(const std::string& file) { return testing::read_fixture_tensors(kDir + file); }

// A micro-batch of `count` windows: tokens x, next tokens y (both outlive the batch).
MicroBatch token_batch(const std::vector<int32_t>& x, const std::vector<int32_t>& y, int64_t count) {
    MicroBatch batch;
    batch.tokens = x.data();
    batch.labels = y.data();
    batch.count = count;
    return batch;
}

GptShape fixture_shape() {
    GptShape s;
    s.n_layer = 2, s.n_head = 4, s.n_embd = 32, s.block_size = T, s.vocab = 65;
    return s;
}

EngineSpec fixture_spec(int threads = 2, bool checkpointing = false, int64_t micro_batch = B,
                        Precision precision = Precision::fp32, bool fused = true) {
    EngineSpec spec;
    spec.fused = fused;
    spec.precision = precision;
    spec.model = build_gpt(fixture_shape());
    spec.optimizer = testing::gpt_fixture_adamw();
    spec.max_micro_batch = spec.max_eval_batch = micro_batch;
    spec.threads = threads;
    spec.gradient_checkpointing = checkpointing;
    return spec;
}

using testing::fixture_ids;

using testing::max_relative_error;

bool is_key_bias(const std::string& name) { return name.find("attn.c_attn.bias") != std::string::npos; }

// max|a-b| / max|b|, except that elements whose reference is pure rounding noise (the key
// bias's gradient, mathematically zero: softmax ignores a shift of a whole row) are held to
// an absolute bound instead.
void compare_tensor(const std::string& name, const std::vector<float>& got, const std::vector<float>& want,
                    double tolerance, double key_bias_absolute) {
    QCOMPARE(got.size(), want.size());
    if (is_key_bias(name)) {
        // [q | k | v] biases of 32 each: the middle third's gradient is zero in exact arithmetic.
        const size_t third = want.size() / 3;
        for (size_t i = third; i < 2 * third; ++i)
            QVERIFY2(std::abs(got[i] - want[i]) < key_bias_absolute, qPrintable(QString::fromStdString(name) + QString(" %1 vs %2").arg(got[i]).arg(want[i])));
        std::vector<float> g(got), w(want);
        std::fill(g.begin() + third, g.begin() + 2 * third, 0.0f);
        std::fill(w.begin() + third, w.begin() + 2 * third, 0.0f);
        const double error = max_relative_error(g, w);
        QVERIFY2(error < tolerance, qPrintable(QString("%1: %2").arg(QString::fromStdString(name)).arg(error)));
        return;
    }
    const double error = max_relative_error(got, want);
    QVERIFY2(error < tolerance, qPrintable(QString("%1: relative error %2").arg(QString::fromStdString(name)).arg(error)));
}

struct Trace {
    std::vector<double> losses, norms;
    ModelWeights weights;
};

// Updates as the training loop runs them: step_size micro-batches normalised by the update's
// token count, clipping at 1.0, AdamW; the gradients multiplied by loss_scale and the norm and
// the update divided by it again, as for fp16.
Trace train_fixture(ComputeEngine& engine, int updates, const std::vector<int64_t>& split, double loss_scale = 1.0) {
    const auto train = read_all("gpt_train.safetensors");
    const NamedTensor& inputs = train.at("train.inputs");
    const NamedTensor& targets = train.at("train.targets");
    Trace trace;
    int64_t window = 0;
    for (int u = 0; u < updates; ++u) {
        engine.zero_grad();
        double loss = 0.0;
        const double tokens = 2.0 * B * T;
        for (int64_t count : split) {
            const auto x = fixture_ids(inputs, window * T, count * T);
            const auto y = fixture_ids(targets, window * T, count * T);
            loss += engine.forward_backward(token_batch(x, y, count), tokens, loss_scale);
            window += count;
        }
        const double norm = std::sqrt(engine.grad_norm_squared()) / loss_scale;
        const double clip = 1.0 / (norm + 1e-6);
        engine.optimizer_step(3e-3, (clip < 1.0 ? clip : 1.0) / loss_scale, u + 1);
        trace.losses.push_back(loss / tokens);
        trace.norms.push_back(norm);
    }
    trace.weights = engine.weights();
    return trace;
}

}  // namespace

class TestGptModel : public QObject {
    Q_OBJECT
private slots:
    void parameters_are_named_and_shaped_as_nanogpt() {
        const ModelDesc model = build_gpt(fixture_shape());
        const auto weights = read_all("gpt_weights.safetensors");
        QCOMPARE(model.params.size() + 1, weights.size());  // + lm_head.weight, tied to wte
        for (const ParamDesc& p : model.params) {
            QVERIFY2(weights.count(p.name), p.name.c_str());
            QCOMPARE(weights.at(p.name).shape, p.shape);
            QCOMPARE(p.decay, p.shape.size() >= 2);  // nanoGPT's configure_optimizers groups
        }
        QCOMPARE(model.find_param("lm_head.weight"), model.find_param("transformer.wte.weight"));
    }

    // Fused kernels (the default) and every op one pass at a time (--fused off) alike.
    void loss_and_every_gradient_match_pytorch_data() { fused_rows(); }
    void loss_and_every_gradient_match_pytorch() {
        QFETCH(bool, fused);
        auto engine = make_cpu_engine(fixture_spec(2, false, B, Precision::fp32, fused));
        engine->set_weights(load_weights(kDir + "gpt_weights.safetensors"));
        const auto step0 = read_all("gpt_step0.safetensors");
        const auto x = fixture_ids(step0.at("step0.inputs"), 0, B * T);
        const auto y = fixture_ids(step0.at("step0.targets"), 0, B * T);
        const MicroBatch batch = token_batch(x, y, B);
        engine->zero_grad();
        const double loss = engine->forward_backward(batch, double(B * T), 1.0) / double(B * T);
        const double want = step0.at("step0.loss").data[0];
        QVERIFY2(std::abs(loss - want) / want < 1e-6, qPrintable(QString("loss %1 vs torch %2").arg(loss).arg(want)));
        const ModelWeights grads = engine->gradients();
        int compared = 0;
        for (const NamedTensor& g : grads.tensors) {
            if (g.name == "lm_head.weight") continue;  // the tied wte's gradient holds both uses
            compare_tensor(g.name, g.data, step0.at("grad." + g.name).data, 1e-5, 1e-9);
            ++compared;
        }
        QCOMPARE(compared, 28);
    }

    void ten_adamw_updates_with_accumulation_and_clipping_match_pytorch_data() { fused_rows(); }
    void ten_adamw_updates_with_accumulation_and_clipping_match_pytorch() {
        QFETCH(bool, fused);
        auto engine = make_cpu_engine(fixture_spec(2, false, B, Precision::fp32, fused));
        engine->set_weights(load_weights(kDir + "gpt_weights.safetensors"));
        const Trace trace = train_fixture(*engine, 10, {B, B});
        const auto train = read_all("gpt_train.safetensors");
        for (int u = 0; u < 10; ++u) {
            QVERIFY(std::abs(trace.losses[u] - train.at("train.losses").data[u]) < 1e-4 * trace.losses[u]);
            QVERIFY(std::abs(trace.norms[u] - train.at("train.grad_norms").data[u]) < 1e-4 * trace.norms[u]);
        }
        for (const NamedTensor& w : trace.weights.tensors) {
            if (w.name == "lm_head.weight") continue;
            // The key bias moves only by AdamW's answer to rounding noise, whose size depends on
            // where the loss rounds (eager keeps float log-probabilities): 3e-5 after 10 steps.
            compare_tensor(w.name, w.data, train.at("final." + w.name).data, 1e-4, 3e-5);
        }
    }

    // The same 6 windows per update as one micro-batch, 3 + 3 or 2 + 2 + 2, or 4 + 2 (uneven).
    void accumulation_gives_the_update_of_one_batch() {
        const ModelWeights initial = load_weights(kDir + "gpt_weights.safetensors");
        auto run = [&](std::vector<int64_t> split) {
            auto engine = make_cpu_engine(fixture_spec(2, false, 6));
            engine->set_weights(initial);
            return train_fixture(*engine, 5, split);
        };
        const Trace whole = run({6});
        for (const auto& split : {std::vector<int64_t>{3, 3}, {2, 2, 2}, {4, 2}}) {
            const Trace parts = run(split);
            for (size_t t = 0; t < whole.weights.tensors.size(); ++t) {
                // As the MLP's accumulation test: ||a - b|| / ||b|| per tensor, key bias aside
                // (its gradient is rounding noise that Adam's normalisation magnifies).
                const NamedTensor& w = whole.weights.tensors[t];
                if (is_key_bias(w.name)) continue;
                double diff = 0.0, norm = 0.0;
                for (size_t i = 0; i < w.data.size(); ++i) {
                    diff += std::pow(double(parts.weights.tensors[t].data[i]) - w.data[i], 2);
                    norm += std::pow(double(w.data[i]), 2);
                }
                QVERIFY2(std::sqrt(diff / norm) < 1e-5, w.name.c_str());
            }
            for (int u = 0; u < 5; ++u) QVERIFY(std::abs(parts.losses[u] - whole.losses[u]) < 1e-6 * whole.losses[u]);
        }
    }

    // The executor evaluates a batch larger than the plan's micro-batch a micro-batch at a time
    // (exec/plan_executor.cpp): each chunk's tokens and targets at the right offsets, so the
    // totals are one pass's up to rounding (the products may block 4 rows and 6 differently).
    void evaluation_in_chunks_matches_one_pass() {
        const ModelWeights initial = load_weights(kDir + "gpt_weights.safetensors");
        const auto train = read_all("gpt_train.safetensors");
        const int64_t samples = 6;
        const auto x = fixture_ids(train.at("train.inputs"), 0, samples * T);
        const auto y = fixture_ids(train.at("train.targets"), 0, samples * T);
        MicroBatch batch = token_batch(x, y, samples);
        auto whole = make_cpu_engine(fixture_spec(2, false, samples));
        auto chunked = make_cpu_engine(fixture_spec(2, false, 4));  // chunks of 4 and 2
        whole->set_weights(initial);
        chunked->set_weights(initial);
        const EvalTotals want = whole->evaluate(batch);
        const EvalTotals got = chunked->evaluate(batch);
        QVERIFY2(std::abs(got.loss_sum - want.loss_sum) < 1e-6 * want.loss_sum,
                 qPrintable(QString("%1 vs %2").arg(got.loss_sum, 0, 'g', 17).arg(want.loss_sum, 0, 'g', 17)));
        QCOMPARE(got.correct, want.correct);
        // A different last chunk would change the sum far beyond that.
        batch.count = 4;
        QVERIFY(std::abs(whole->evaluate(batch).loss_sum - want.loss_sum) > 1e-3 * want.loss_sum);
    }

    // (Across thread counts the products' blocking differs, so bits may too: not promised.)
    void checkpointing_changes_no_bit_and_reruns_repeat_data() { precision_rows(); }
    void checkpointing_changes_no_bit_and_reruns_repeat() {
        QFETCH(int, precision);
        const ModelWeights initial = load_weights(kDir + "gpt_weights.safetensors");
        auto run = [&](int threads, bool checkpointing) {
            auto engine = make_cpu_engine(fixture_spec(threads, checkpointing, B, Precision(precision)));
            engine->set_weights(initial);
            return train_fixture(*engine, 4, {B, B}).weights;
        };
        const ModelWeights plain = run(2, false);
        QVERIFY(same_bits(run(2, true), plain));
        QVERIFY(same_bits(run(2, false), plain));
        QVERIFY(!same_bits(initial, plain));
    }

    void memory_plan_equals_the_allocation_and_checkpointing_lowers_activations_data() { precision_and_fused_rows(); }
    void memory_plan_equals_the_allocation_and_checkpointing_lowers_activations() {
        QFETCH(int, precision);
        QFETCH(bool, fused);
        GptShape shape;
        shape.n_layer = 6, shape.n_head = 4, shape.n_embd = 64, shape.block_size = 64, shape.vocab = 65;
        BytesByCategory peaks[2];
        for (int checkpointing = 0; checkpointing < 2; ++checkpointing) {
            EngineSpec spec = fixture_spec(2, checkpointing != 0, 4, Precision(precision), fused);
            spec.model = build_gpt(shape);
            auto engine = make_cpu_engine(spec);
            engine->set_weights(init_weights(spec.model, 1));
            std::vector<int32_t> tokens(4 * 64);
            for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 7 + 3) % 65);
            MicroBatch batch;
            batch.tokens = tokens.data();
            batch.labels = tokens.data();
            batch.count = 4;
            engine->begin_update_timing();
            engine->zero_grad();
            engine->forward_backward(batch, 256.0, 1.0);
            engine->optimizer_step(1e-3, 1.0, 1);
            const BytesByCategory planned = plan_cpu_engine_memory(spec);
            CHECK_PEAK_EQUALS_PLAN(*engine, planned);
            peaks[checkpointing] = planned;
        }
        const int64_t plain = peaks[0][size_t(MemoryCategory::activations)];
        const int64_t checkpointed = peaks[1][size_t(MemoryCategory::activations)];
        QVERIFY2(checkpointed * 2 <= plain, qPrintable(QString("%1 vs %2").arg(checkpointed).arg(plain)));
        // 16-bit runs: fp32 master weights beside the 16-bit working copy.
        const int64_t working = peaks[0][size_t(MemoryCategory::parameters)];
        const int64_t master = peaks[0][size_t(MemoryCategory::master_weights)];
        if (Precision(precision) == Precision::fp32) QCOMPARE(master, int64_t{0});
        else QVERIFY(std::abs(master - 2 * working) <= 64);  // one allocation's alignment
    }

    // 10 updates of the fixture in 16 bits against fp32, within the tolerances above. fp16 runs
    // with the trainer's initial loss scale, 65536, and must not overflow.
    void sixteen_bit_losses_follow_fp32_data() {
        QTest::addColumn<int>("precision");
        QTest::addColumn<double>("loss_scale");
        QTest::addColumn<double>("tolerance");
        QTest::newRow("bf16") << int(Precision::bf16) << 1.0 << kBf16LossTolerance;
        QTest::newRow("fp16") << int(Precision::fp16) << 65536.0 << kFp16LossTolerance;
    }
    void sixteen_bit_losses_follow_fp32() {
        QFETCH(int, precision);
        QFETCH(double, loss_scale);
        QFETCH(double, tolerance);
        const ModelWeights initial = load_weights(kDir + "gpt_weights.safetensors");
        auto run = [&](Precision p, double scale) {
            auto engine = make_cpu_engine(fixture_spec(2, false, B, p));
            engine->set_weights(initial);
            return train_fixture(*engine, 10, {B, B}, scale);
        };
        const Trace fp32 = run(Precision::fp32, 1.0);
        const Trace half = run(Precision(precision), loss_scale);
        double worst = 0.0;
        for (int u = 0; u < 10; ++u) {
            QVERIFY(std::isfinite(half.norms[u]));
            worst = std::max(worst, std::abs(half.losses[u] - fp32.losses[u]) / fp32.losses[u]);
        }
        qInfo("largest relative loss difference to fp32: %.3g (tolerance %.3g)", worst, tolerance);
        QVERIFY2(worst < tolerance, qPrintable(QString::number(worst)));
        QVERIFY(worst > 0.0);  // it did run in 16 bits
        QVERIFY(fp32.losses.back() < fp32.losses.front() && half.losses.back() < half.losses.front());
    }

    // The example GPT (L6 C256 T256): 16-bit storage halves the planned activations, with
    // and without checkpointing ("bf16 halves it again"). Only the int32 tokens and LayerNorm's
    // fp32 statistics keep their size.
    void sixteen_bit_halves_the_planned_activations() {
        GptShape shape;
        shape.n_layer = 6, shape.n_head = 8, shape.n_embd = 256, shape.block_size = 256, shape.vocab = 65;
        for (bool checkpointing : {false, true}) {
            auto activations = [&](Precision p) {
                EngineSpec spec = fixture_spec(2, checkpointing, 8, p);
                spec.model = build_gpt(shape);
                return plan_cpu_engine_memory(spec)[size_t(MemoryCategory::activations)];
            };
            const int64_t fp32 = activations(Precision::fp32);
            for (Precision p : {Precision::bf16, Precision::fp16}) {
                const double ratio = double(activations(p)) / double(fp32);
                qInfo("%s%s: activations %.3f of fp32's %lld bytes", to_string(p).c_str(),
                      checkpointing ? " + checkpointing" : "", ratio, static_cast<long long>(fp32));
                QVERIFY2(ratio > 0.5 && ratio < 0.51, qPrintable(QString::number(ratio)));
            }
        }
    }

    // After two warm-up updates (which fill the arena's cache) an update allocates nothing, in
    // every precision, checkpointed or not.
    void updates_do_not_allocate_data() {
        QTest::addColumn<int>("precision");
        QTest::addColumn<bool>("checkpointing");
        QTest::addColumn<bool>("fused");
        for (Precision p : {Precision::fp32, Precision::bf16, Precision::fp16})
            for (bool checkpointing : {false, true})
                for (bool fused : {true, false})
                    QTest::newRow(qPrintable(QString::fromStdString(to_string(p)) + (checkpointing ? "-checkpointing" : "") +
                                             (fused ? "" : "-eager")))
                        << int(p) << checkpointing << fused;
    }
    void updates_do_not_allocate() {
        SKIP_WITHOUT_ALLOCATION_COUNTER();
        QFETCH(int, precision);
        QFETCH(bool, checkpointing);
        QFETCH(bool, fused);
        auto engine = make_cpu_engine(fixture_spec(2, checkpointing, B, Precision(precision), fused));
        engine->set_weights(load_weights(kDir + "gpt_weights.safetensors"));
        train_fixture(*engine, 2, {B, B});
        const auto train = read_all("gpt_train.safetensors");
        const auto x = fixture_ids(train.at("train.inputs"), 0, B * T);
        const auto y = fixture_ids(train.at("train.targets"), 0, B * T);
        const MicroBatch batch = token_batch(x, y, B);
        allocations = 0;
        counting = true;
        for (int u = 0; u < 3; ++u) {
            engine->begin_update_timing();
            engine->zero_grad();
            engine->forward_backward(batch, double(B * T), 1.0);
            engine->forward_backward(batch, double(B * T), 1.0);
            engine->grad_norm_squared();
            engine->optimizer_step(1e-3, 0.5, 3 + u);  // a clipped update: eager runs scale the gradients first
            engine->evaluate(batch);
            engine->end_update_timing_ms();
        }
        counting = false;
        QCOMPARE(allocations.load(), 0L);
    }

private:
    static void precision_rows() {
        QTest::addColumn<int>("precision");
        for (Precision p : {Precision::fp32, Precision::bf16, Precision::fp16})
            QTest::newRow(to_string(p).c_str()) << int(p);
    }
    static void fused_rows() {
        QTest::addColumn<bool>("fused");
        QTest::newRow("fused") << true;
        QTest::newRow("eager") << false;
    }
    static void precision_and_fused_rows() {
        QTest::addColumn<int>("precision");
        QTest::addColumn<bool>("fused");
        for (Precision p : {Precision::fp32, Precision::bf16, Precision::fp16})
            for (bool fused : {true, false})
                QTest::newRow(qPrintable(QString::fromStdString(to_string(p)) + (fused ? "" : "-eager"))) << int(p) << fused;
    }
};

QTEST_APPLESS_MAIN(TestGptModel)
#include "test_gpt_model.moc"
