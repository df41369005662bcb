// --fused on|off, the knob that does what torch.compile does: the pairs the planner fuses
// (a product and the activation after it, a residual add and the LayerNorm after it, never
// across checkpointing segments), each fused kernel against the ops it replaces (bit for bit in
// fp32, and in 16-bit runs with the stored rounding in between; the activations on 16-bit codes
// against widening, activating and rounding), eager attention and the eager
// optimizer against their fused forms, the whole GPT, MLP and CNN training the same up to float
// rounding either way, and the bytes the plan counts: fewer fused, by exactly the passes that
// write an intermediate and read it back. The GPT and CNN against PyTorch, fused and eager, are
// in test_gpt_model and test_cnn_model.
#include <QtTest>

#include <cmath>
#include <random>
#include <vector>

#include "backend/compute_engine.hpp"
#include "core/same_bits.hpp"
#include "core/weights_difference.hpp"
#include "model/build_model.hpp"
#include "model/init_weights.hpp"
#include "nn/activation.hpp"
#include "nn/attention.hpp"
#include "nn/layernorm.hpp"
#include "nn/loss.hpp"
#include "nn/onednn_matmul.hpp"
#include "nn/packed_weights.hpp"
#include "optim/optimizer_step.hpp"
#include "parallel/worker_team.hpp"
#include "plan/graph_plan.hpp"
#include "plan/memory_traffic.hpp"
#include "precision/half_float.hpp"

using namespace trainbench;

namespace {

std::vector<float> random_values(size_t n, uint32_t seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng);
    return v;
}

double max_relative(const std::vector<float>& a, const std::vector<float>& b) {
    double scale = 0.0, difference = 0.0;
    for (size_t i = 0; i < a.size(); ++i) {
        scale = std::max(scale, static_cast<double>(std::fabs(b[i])));
        difference = std::max(difference, static_cast<double>(std::fabs(a[i] - b[i])));
    }
    return difference / std::max(scale, 1e-30);
}

GptShape small_gpt() {
    GptShape s;
    s.n_layer = 2, s.n_head = 2, s.n_embd = 32, s.block_size = 16, s.vocab = 40;
    return s;
}

ModelDesc model_named(const QString& name) {
    if (name == "gpt") return build_gpt(small_gpt());
    if (name == "cnn") {
        CnnShape s;
        s.height = s.width = 8;
        s.channels = {4, 8};
        s.hidden = {16};
        return build_cnn(s);
    }
    const Activation activation = name == "mlp-gelu" ? Activation::gelu : name == "mlp-tanh" ? Activation::tanh : Activation::relu;
    return build_mlp({12, 24, 24, 5}, activation, 5);
}

// The micro-batches a model trains on: token windows, images or features, with labels.
struct Inputs {
    std::vector<float> x;
    std::vector<int32_t> tokens, labels;
    MicroBatch batch(const ModelDesc& model, int64_t first, int64_t count) const {
        MicroBatch b;
        b.count = count;
        if (model.token_input) {
            b.tokens = tokens.data() + first * model.input_per_sample;
            b.labels = labels.data() + first * model.input_per_sample;
        } else {
            b.x = x.data() + first * model.input_per_sample;
            b.labels = labels.data() + first;
        }
        return b;
    }
};

Inputs inputs_for(const ModelDesc& model, int64_t samples) {
    Inputs in;
    const int64_t n = samples * model.input_per_sample;
    if (model.token_input) {
        for (int64_t i = 0; i < n; ++i) in.tokens.push_back(static_cast<int32_t>((i * 7 + i / 5) % model.classes));
        for (int64_t i = 0; i < n; ++i) in.labels.push_back(static_cast<int32_t>((i * 3 + 1) % model.classes));
    } else {
        in.x = random_values(static_cast<size_t>(n), 11);
        for (int64_t i = 0; i < samples; ++i) in.labels.push_back(static_cast<int32_t>(i % model.classes));
    }
    return in;
}

// The attention key bias's true gradient is exactly zero (a constant added to every score of a
// query does not change its softmax), so AdamW turns float noise into steps of the learning
// rate: its third of c_attn.bias is left out of the comparison, as test_gpt_model does.
ModelWeights without_key_biases(ModelWeights weights) {
    for (NamedTensor& t : weights.tensors) {
        if (t.name.find("attn.c_attn.bias") == std::string::npos) continue;
        const size_t C = t.data.size() / 3;
        std::fill(t.data.begin() + static_cast<std::ptrdiff_t>(C), t.data.begin() + static_cast<std::ptrdiff_t>(2 * C), 0.0f);
    }
    return weights;
}

struct Run {
    std::vector<double> losses;
    ModelWeights weights;
};

// 5 updates of 2 micro-batches of 3 samples each, the gradients scaled by 0.8 as a clipped
// update's are.
Run train(const ModelDesc& model, Precision precision, bool checkpointing, bool fused, OptimizerConfig optimizer) {
    EngineSpec spec;
    spec.model = model;
    spec.optimizer = optimizer;
    spec.precision = precision;
    spec.max_micro_batch = spec.max_eval_batch = 3;
    spec.threads = 2;
    spec.gradient_checkpointing = checkpointing;
    spec.fused = fused;
    auto engine = make_cpu_engine(spec);
    engine->set_weights(init_weights(model, 5));
    const Inputs in = inputs_for(model, 6);
    const double terms = 6.0 * static_cast<double>(model.loss_terms_per_sample);
    Run run;
    for (int64_t u = 1; u <= 5; ++u) {
        engine->zero_grad();
        double loss = engine->forward_backward(in.batch(model, 0, 3), terms, 1.0);
        loss += engine->forward_backward(in.batch(model, 3, 3), terms, 1.0);
        run.losses.push_back(loss / terms);
        engine->optimizer_step(1e-2, 0.8, u);
    }
    run.weights = engine->weights();
    return run;
}

GraphPlan plan(const ModelDesc& model, bool fused, bool checkpointing = false, Precision precision = Precision::fp32,
               OptimizerConfig optimizer = {}, ProductKernel products = ProductKernel::eigen) {
    return make_graph_plan(model, 4,
                           {.threads = 2, .optimizer = optimizer, .checkpointing = checkpointing, .precision = precision,
                            .fused = fused, .products = products});
}

int op_index(const ModelDesc& model, OpKind kind, const std::string& output_name) {
    for (size_t o = 0; o < model.ops.size(); ++o)
        if (model.ops[o].kind == kind && !model.ops[o].outputs.empty() &&
            model.tensors[static_cast<size_t>(model.ops[o].outputs[0])].name == output_name)
            return static_cast<int>(o);
    return -1;
}

}  // namespace

class TestFusedKernels : public QObject {
    Q_OBJECT

private slots:
    void initTestCase() { WorkerTeam::shared().resize(2); }

    void the_planner_fuses_neighbours_within_a_segment() {
        const ModelDesc gpt = build_gpt(small_gpt());
        auto pair = [&](const GraphPlan& p, OpKind kind, const std::string& out) {
            const int o = op_index(gpt, kind, out);
            return p.fused_with[static_cast<size_t>(o)];
        };
        const int fc_gelu = op_index(gpt, OpKind::activation, "transformer.h.0.mlp.gelu");
        const int ln_2 = op_index(gpt, OpKind::layernorm, "transformer.h.0.ln_2.out");
        const int next_ln_1 = op_index(gpt, OpKind::layernorm, "transformer.h.1.ln_1.out");
        const int ln_f = op_index(gpt, OpKind::layernorm, "transformer.ln_f.out");
        const GraphPlan fused = plan(gpt, true);
        QCOMPARE(pair(fused, OpKind::linear, "transformer.h.0.mlp.fc"), fc_gelu);
        QCOMPARE(fused.fused_into[static_cast<size_t>(fc_gelu)], op_index(gpt, OpKind::linear, "transformer.h.0.mlp.fc"));
        QCOMPARE(pair(fused, OpKind::residual_add, "transformer.h.0.residual_1"), ln_2);
        QCOMPARE(pair(fused, OpKind::residual_add, "transformer.h.0.residual_2"), next_ln_1);
        QCOMPARE(pair(fused, OpKind::residual_add, "transformer.h.1.residual_2"), ln_f);
        // The other products' outputs are read by attention, a residual add or the loss.
        QCOMPARE(pair(fused, OpKind::linear, "transformer.h.0.attn.qkv"), -1);
        // Checkpointing recomputes a block alone: nothing fuses across blocks.
        const GraphPlan checkpointed = plan(gpt, true, true);
        QCOMPARE(pair(checkpointed, OpKind::residual_add, "transformer.h.0.residual_1"), ln_2);
        QCOMPARE(pair(checkpointed, OpKind::residual_add, "transformer.h.0.residual_2"), -1);
        QCOMPARE(pair(checkpointed, OpKind::residual_add, "transformer.h.1.residual_2"), -1);
        QCOMPARE(pair(checkpointed, OpKind::linear, "transformer.h.0.mlp.fc"), fc_gelu);
        // Eager: nothing.
        const GraphPlan eager = plan(gpt, false);
        for (size_t o = 0; o < gpt.ops.size(); ++o) {
            QCOMPARE(eager.fused_with[o], -1);
            QCOMPARE(eager.fused_into[o], -1);
        }
        // Every hidden layer of an MLP and every convolution of a CNN takes its activation.
        for (const QString name : {"mlp-relu", "cnn"}) {
            const ModelDesc model = model_named(name);
            const GraphPlan p = plan(model, true);
            for (size_t o = 0; o < model.ops.size(); ++o)
                if (model.ops[o].kind == OpKind::activation)
                    QVERIFY2(p.fused_into[o] >= 0, qPrintable(name + " op " + QString::number(o)));
        }
    }

    // A product's epilogue computes what the activation op computes after it, bit for bit; in
    // 16-bit runs the activation of the stored (rounded) output.
    void the_epilogue_is_the_activation_after_the_product_data() {
        QTest::addColumn<int>("activation");
        QTest::addColumn<int>("rounding");
        QTest::addColumn<bool>("in_place");
        for (Activation a : {Activation::relu, Activation::gelu, Activation::tanh, Activation::sigmoid})
            for (Precision p : {Precision::fp32, Precision::bf16, Precision::fp16})
                for (bool in_place : {false, true})
                    QTest::newRow(qPrintable(QString::fromStdString(to_string(a) + "-" + to_string(p)) + (in_place ? "-in-place" : "")))
                        << int(a) << int(p) << in_place;
    }
    void the_epilogue_is_the_activation_after_the_product() {
        QFETCH(int, activation);
        QFETCH(int, rounding);
        QFETCH(bool, in_place);
        const int64_t in = 70, out = 45, batch = 600;  // more than one column block of the product
        std::vector<float> w = random_values(static_cast<size_t>(in * out), 1, 0.2f), b = random_values(out, 2);
        std::vector<float> x = random_values(static_cast<size_t>(in * batch), 3);
        const PackedLayout layout = make_packed_layout(PackedOperand::weights, in, out, 2);
        std::vector<float> packed(static_cast<size_t>(layout.total_floats()) + 64);
        float* aligned = packed.data() + ((64 - reinterpret_cast<uintptr_t>(packed.data()) % 64) % 64) / 4;
        pack_weights(layout, w.data(), aligned);
        std::vector<float> z(static_cast<size_t>(out * batch)), a(z.size());
        packed_linear_forward(layout, aligned, b.data(), x.data(), z.data(), batch);
        if (Precision(rounding) != Precision::fp32) round_to_16bit(Precision(rounding), z.data(), int64_t(z.size()));
        activation_forward(Activation(activation), z.data(), a.data(), int64_t(z.size()));

        std::vector<float> fused_z(z.size()), fused_a(z.size());
        ProductEpilogue epilogue{.activation = Activation(activation), .activated = in_place ? nullptr : fused_a.data(),
                                 .rounding = Precision(rounding)};
        packed_linear_forward(layout, aligned, b.data(), x.data(), fused_z.data(), batch, &epilogue);
        if (in_place) {
            QVERIFY(same_bits(fused_z, a));
        } else {
            QVERIFY(same_bits(fused_z, z));
            QVERIFY(same_bits(fused_a, a));
        }
    }

    // A 16-bit product's epilogue straight into codes (a register at a time for GELU and ReLU,
    // the rest staged): the bits of rounding the product, storing its codes, then the activation
    // of the rounded values rounded into codes. Lengths around a register and a piece, and the
    // edges: NaNs (signalling ones too), infinities, zeros of both signs, subnormals, and values
    // fp16 rounds to infinity.
    void the_rounding_epilogue_is_rounding_then_the_activation_data() {
        QTest::addColumn<int>("activation");
        QTest::addColumn<int>("precision");
        for (Activation a : {Activation::relu, Activation::gelu, Activation::tanh, Activation::sigmoid})
            for (Precision p : {Precision::bf16, Precision::fp16})
                QTest::newRow(qPrintable(QString::fromStdString(to_string(a) + "-" + to_string(p)))) << int(a) << int(p);
    }
    void the_rounding_epilogue_is_rounding_then_the_activation() {
        QFETCH(int, activation);
        QFETCH(int, precision);
        const auto kind = Activation(activation);
        const auto p = Precision(precision);
        for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{8}, int64_t{15}, int64_t{16}, int64_t{17}, int64_t{300}, int64_t{4099}}) {
            const size_t count = static_cast<size_t>(n);
            std::vector<float> z = random_values(count, 21, 3.0f);
            const float edges[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, -1e-40f, 1e-20f, 70000.0f, -65520.0f};
            for (size_t e = 0; e < std::size(edges); ++e) z[(e * 7) % count] = edges[e];
            for (size_t i = 4; i < count; i += 89) z[i] = bits_float(i % 2 ? 0x7f800001u : 0xff812345u);
            const QString where = QString("n = %1").arg(n);

            std::vector<float> rounded = z, activated(count);
            round_to_16bit(p, rounded.data(), n);
            activation_forward(kind, rounded.data(), activated.data(), n);
            std::vector<uint16_t> want_z(count), want_a(count);
            store_16bit(p, rounded.data(), want_z.data(), n);
            store_16bit(p, activated.data(), want_a.data(), n);

            std::vector<uint16_t> got_z(count, 0x1234), got_a(count, 0x1234);
            activation_forward_rounding_serial(kind, p, z.data(), got_z.data(), got_a.data(), n);
            QVERIFY2(got_z == want_z, qPrintable("the product's codes, " + where));
            QVERIFY2(got_a == want_a, qPrintable("the activation's codes, " + where));
            std::vector<uint16_t> only_a(count, 0x1234);
            activation_forward_rounding_serial(kind, p, z.data(), nullptr, only_a.data(), n);
            QVERIFY2(only_a == want_a, qPrintable("the activation's codes alone, " + where));
        }
    }

    // Activations on 16-bit codes (sixteen at a time in registers where the build has AVX-512,
    // the rest staged): the bits of widening the codes, the fp32 activation and rounding. Lengths
    // around a register and a block, two threads (whose shares end in tails), and the edges:
    // NaNs, infinities, zeros of both signs, subnormals.
    void activations_on_codes_are_the_activation_of_the_widened_values_data() {
        QTest::addColumn<int>("activation");
        QTest::addColumn<int>("precision");
        QTest::addColumn<int>("threads");
        for (Activation a : {Activation::relu, Activation::gelu, Activation::tanh, Activation::sigmoid})
            for (Precision p : {Precision::bf16, Precision::fp16})
                for (int threads : {1, 2})
                    QTest::newRow(qPrintable(QString::fromStdString(to_string(a) + "-" + to_string(p)) +
                                             QString("-%1-threads").arg(threads)))
                        << int(a) << int(p) << threads;
    }
    void activations_on_codes_are_the_activation_of_the_widened_values() {
        QFETCH(int, activation);
        QFETCH(int, precision);
        QFETCH(int, threads);
        const auto kind = Activation(activation);
        const auto p = Precision(precision);
        WorkerTeam::shared().resize(threads);
        for (int64_t n : {int64_t{1}, int64_t{15}, int64_t{16}, int64_t{17}, int64_t{4099}, int64_t{70001}}) {
            const size_t count = static_cast<size_t>(n);
            std::vector<float> values = random_values(count, 11, 3.0f), grad = random_values(count, 12);
            const float edges[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, -1e-40f, 1e-20f, 70000.0f};
            for (size_t e = 0; e < std::size(edges); ++e) {
                values[(e * 7) % count] = edges[e];
                grad[(e * 5 + 3) % count] = edges[(e + 3) % std::size(edges)];
            }
            // Signalling NaNs in the gradient, which ReLU's backward passes on where its output is
            // positive: the rounding quiets them.
            for (size_t i = 2; i < count; i += 97) grad[i] = bits_float(i % 2 ? 0x7f800001u : 0xff812345u);
            std::vector<uint16_t> codes(count);
            store_16bit(p, values.data(), codes.data(), n);
            std::vector<float> widened(count);
            load_16bit(p, codes.data(), widened.data(), n);
            const QString where = QString("n = %1").arg(n);

            std::vector<float> activated(count);
            activation_forward(kind, widened.data(), activated.data(), n);
            std::vector<uint16_t> want_codes(count), got_codes(count, 0x1234);
            store_16bit(p, activated.data(), want_codes.data(), n);
            activation_forward_16bit_serial(kind, p, codes.data(), got_codes.data(), n);
            QVERIFY2(got_codes == want_codes, qPrintable("forward, " + where));

            // f' from the saved codes: z for GELU, the output for the others.
            std::vector<float> want_grad = grad;
            const bool from_input = activation_needs_input(kind);
            activation_backward(kind, from_input ? widened.data() : nullptr, from_input ? nullptr : widened.data(),
                                want_grad.data(), n);
            std::vector<float> got_grad = grad, staging(count);
            activation_backward_16bit(kind, p, codes.data(), staging.data(), got_grad.data(), n);
            QVERIFY2(same_bits(got_grad, want_grad), qPrintable("backward, " + where));
            if (p != Precision::bf16) continue;
            // bf16 runs hand the gradient to the product before as its codes, grad only read.
            std::vector<uint16_t> want_dy(count), got_dy(count, 0x1234);
            store_16bit(Precision::bf16, want_grad.data(), want_dy.data(), n);
            got_grad = grad;
            activation_backward_16bit(kind, p, codes.data(), staging.data(), got_grad.data(), n, got_dy.data());
            QVERIFY2(got_dy == want_dy, qPrintable("backward to codes, " + where));
            QVERIFY2(same_bits(got_grad, grad), qPrintable("backward to codes reads grad only, " + where));
        }
        WorkerTeam::shared().resize(2);
    }

    void the_residual_layernorm_is_the_add_then_the_layernorm_data() {
        QTest::addColumn<int>("rounding");
        for (Precision p : {Precision::fp32, Precision::bf16, Precision::fp16}) QTest::newRow(to_string(p).c_str()) << int(p);
    }
    void the_residual_layernorm_is_the_add_then_the_layernorm() {
        QFETCH(int, rounding);
        const int64_t rows = 37, C = 48;
        const auto a = random_values(rows * C, 4), b = random_values(rows * C, 5), w = random_values(C, 6), bias = random_values(C, 7);
        std::vector<float> sum(a.size()), y(a.size()), mean(rows), rstd(rows);
        for (size_t i = 0; i < a.size(); ++i) sum[i] = a[i] + b[i];
        if (Precision(rounding) != Precision::fp32) round_to_16bit(Precision(rounding), sum.data(), int64_t(sum.size()));
        layernorm_forward(sum.data(), w.data(), bias.data(), y.data(), mean.data(), rstd.data(), rows, C);
        std::vector<float> fused_sum(a.size()), fused_y(a.size()), fused_mean(rows), fused_rstd(rows);
        residual_layernorm_forward(a.data(), b.data(), fused_sum.data(), w.data(), bias.data(), fused_y.data(),
                                   fused_mean.data(), fused_rstd.data(), rows, C, Precision(rounding));
        QVERIFY(same_bits(fused_sum, sum));
        QVERIFY(same_bits(fused_y, y));
        QVERIFY(same_bits(fused_mean, mean));
        QVERIFY(same_bits(fused_rstd, rstd));
    }

    // Attention a pass at a time (scores, scale, mask, softmax, values) against the fused kernel.
    void eager_attention_computes_the_fused_attention() {
        const int64_t B = 3, T = 70, C = 24, H = 3;  // T past one 64-row tile
        const auto qkv = random_values(B * T * 3 * C, 8), dout = random_values(B * T * C, 9);
        std::vector<float> out(B * T * C), att(B * H * T * T), dqkv(qkv.size());
        std::vector<float> scratch(attention_scratch_floats(B, T, C, H, WorkerTeam::shared().members()));
        attention_forward(qkv.data(), out.data(), att.data(), B, T, C, H, Precision::fp32);
        attention_backward(dout.data(), qkv.data(), att.data(), dqkv.data(), B, T, C, H, scratch.data(), Precision::fp32);
        std::vector<float> eager_out(out.size()), eager_att(att.size()), eager_dqkv(qkv.size());
        std::vector<float> eager_scratch(attention_eager_scratch_floats(B, T, H));
        attention_forward_eager(qkv.data(), eager_out.data(), eager_att.data(), B, T, C, H, Precision::fp32);
        attention_backward_eager(dout.data(), qkv.data(), eager_att.data(), eager_dqkv.data(), B, T, C, H, eager_scratch.data(), Precision::fp32);
        QVERIFY2(max_relative(eager_att, att) < 1e-6, qPrintable(QString::number(max_relative(eager_att, att))));
        QVERIFY2(max_relative(eager_out, out) < 1e-6, qPrintable(QString::number(max_relative(eager_out, out))));
        QVERIFY2(max_relative(eager_dqkv, dqkv) < 1e-5, qPrintable(QString::number(max_relative(eager_dqkv, dqkv))));
        for (int64_t row = 0; row < B * H * T; ++row)  // future positions are exactly 0, as torch's
            for (int64_t j = row % T + 1; j < T; ++j) QCOMPARE(eager_att[size_t(row * T + j)], 0.0f);
    }

    // log_softmax then nll_loss, and their backwards, against the one-pass softmax cross-entropy.
    void eager_cross_entropy_computes_the_fused_loss() {
        const int64_t classes = 65, batch = 130;
        const auto logits = random_values(classes * batch, 13, 3.0f);
        std::vector<int32_t> labels(batch);
        for (int64_t s = 0; s < batch; ++s) labels[size_t(s)] = int32_t((s * 17) % classes);
        std::vector<float> grad(logits.size()), eager_grad(logits.size());
        std::vector<float> scratch(eager_cross_entropy_scratch_floats(classes, batch));
        const double loss = softmax_cross_entropy(logits.data(), labels.data(), classes, batch, grad.data(), 0.25f, nullptr);
        const double eager = softmax_cross_entropy_eager(logits.data(), labels.data(), classes, batch, eager_grad.data(), 0.25f,
                                                         scratch.data());
        QVERIFY2(std::fabs(eager - loss) <= 1e-6 * loss, qPrintable(QString("%1 vs %2").arg(eager).arg(loss)));
        QVERIFY2(max_relative(eager_grad, grad) < 1e-5, qPrintable(QString::number(max_relative(eager_grad, grad))));
    }

    // torch's single-tensor algorithm op by op against the one-pass update, for every rule.
    void the_eager_optimizer_makes_the_fused_update_data() {
        QTest::addColumn<int>("kind");
        QTest::addColumn<double>("weight_decay");
        QTest::addColumn<double>("momentum");
        QTest::addColumn<bool>("nesterov");
        QTest::newRow("adamw") << int(OptimizerKind::adamw) << 0.1 << 0.0 << false;
        QTest::newRow("adam") << int(OptimizerKind::adam) << 0.0 << 0.0 << false;
        QTest::newRow("adam-l2") << int(OptimizerKind::adam) << 0.05 << 0.0 << false;
        QTest::newRow("sgd") << int(OptimizerKind::sgd) << 0.0 << 0.0 << false;
        QTest::newRow("sgd-momentum-decay") << int(OptimizerKind::sgd) << 0.01 << 0.9 << false;
        QTest::newRow("sgd-nesterov") << int(OptimizerKind::sgd) << 0.0 << 0.9 << true;
        QTest::newRow("rmsprop") << int(OptimizerKind::rmsprop) << 0.01 << 0.5 << false;
        QTest::newRow("adagrad") << int(OptimizerKind::adagrad) << 0.0 << 0.0 << false;
    }
    void the_eager_optimizer_makes_the_fused_update() {
        QFETCH(int, kind);
        QFETCH(double, weight_decay);
        QFETCH(double, momentum);
        QFETCH(bool, nesterov);
        OptimizerConfig config;
        config.kind = OptimizerKind(kind);
        config.weight_decay = weight_decay;
        config.momentum = momentum;
        config.nesterov = nesterov;
        // Three tensors; the first two decay (decay_end at 900).
        const std::vector<ShardRange> tensors = {{0, 600}, {600, 900}, {900, 950}};
        const int64_t n = 950, state_slots = optimizer_state_slots(config);
        std::vector<float> params = random_values(n, 12), fused_params = params;
        std::vector<float> state(static_cast<size_t>(n * state_slots)), fused_state(state.size());
        optimizer_init_state(config, state.data(), n);
        optimizer_init_state(config, fused_state.data(), n);
        std::vector<float> scratch(static_cast<size_t>(eager_optimizer_scratch_floats(config, 600)));
        for (int64_t step = 1; step <= 3; ++step) {
            std::vector<float> grads = random_values(n, 20 + uint32_t(step)), fused_grads = grads;
            optimizer_step_cpu(config, fused_params.data(), fused_grads.data(), fused_state.data(), n, 1e-2, 0.7, step, 900);
            optimizer_step_eager_cpu(config, params.data(), grads.data(), state.data(), n, 1e-2, 0.7, step, 900, tensors,
                                     scratch.data());
        }
        QVERIFY2(max_relative(params, fused_params) < 1e-6, qPrintable(QString::number(max_relative(params, fused_params))));
        QVERIFY(max_relative(state, fused_state) < 1e-6 || state_slots == 0);
    }

    // The whole update, fused or one op at a time: the same losses and weights up to rounding.
    void models_train_the_same_fused_or_eager_data() {
        QTest::addColumn<QString>("model");
        QTest::addColumn<int>("precision");
        QTest::addColumn<bool>("checkpointing");
        QTest::addColumn<int>("optimizer");
        for (const QString model : {"gpt", "mlp-relu", "mlp-gelu", "mlp-tanh", "cnn"})
            for (Precision p : {Precision::fp32, Precision::bf16})
                for (bool checkpointing : {false, true})
                    QTest::newRow(qPrintable(model + "-" + QString::fromStdString(to_string(p)) + (checkpointing ? "-checkpointing" : "")))
                        << model << int(p) << checkpointing << int(model == "gpt" ? OptimizerKind::adamw : OptimizerKind::adam);
        QTest::newRow("mlp-relu-sgd-nesterov") << "mlp-relu" << int(Precision::fp32) << false << int(OptimizerKind::sgd);
    }
    void models_train_the_same_fused_or_eager() {
        QFETCH(QString, model);
        QFETCH(int, precision);
        QFETCH(bool, checkpointing);
        QFETCH(int, optimizer);
        OptimizerConfig config;
        config.kind = OptimizerKind(optimizer);
        if (config.kind == OptimizerKind::sgd) config.momentum = 0.9, config.nesterov = true, config.weight_decay = 1e-3;
        const ModelDesc desc = model_named(model);
        const Run fused = train(desc, Precision(precision), checkpointing, true, config);
        const Run eager = train(desc, Precision(precision), checkpointing, false, config);
        // Losses within 1e-5 relative in fp32. In bf16 the two forms' fp32 intermediates differ in
        // their last bits (eager attention stores the scaled scores before its softmax, fused
        // scales inside it), which now and then rounds a bf16 activation to the neighbouring code
        // (2^-8 apart), and such flips grow over the updates: there 2e-4, still 20x below one bf16
        // step. (Measured here on AVX-512: at most 6e-5 after 5 updates; 1e-5 held on AVX2.)
        const bool fp32 = Precision(precision) == Precision::fp32;
        const double loss_tolerance = fp32 ? 1e-5 : 2e-4;
        double worst_loss = 0.0;
        for (size_t u = 0; u < fused.losses.size(); ++u) {
            const double relative = std::fabs(fused.losses[u] - eager.losses[u]) / std::fabs(fused.losses[u]);
            worst_loss = std::max(worst_loss, relative);
            QVERIFY2(relative <= loss_tolerance,
                     qPrintable(QString("update %1: %2 vs %3").arg(u + 1).arg(fused.losses[u]).arg(eager.losses[u])));
        }
        qInfo("losses fused vs eager: worst relative difference %.3g (allowed %.0e)", worst_loss, loss_tolerance);
        // Within 10 x (1e-6 relative + 1e-6 absolute) per tensor in fp32. In 16 bits a value
        // rounded the other way turns, under Adam, into steps of the learning rate on weights
        // whose gradient is mostly noise; there the two forms must lie far closer to each other
        // than 16 bits lie to fp32 (a tenth of that distance), and never further than 100x.
        const double difference =
            testing::difference_in_tolerances(without_key_biases(eager.weights), without_key_biases(fused.weights));
        double allowed = 10.0;
        if (!fp32) {
            const Run reference = train(desc, Precision::fp32, checkpointing, true, config);
            const double sixteen_bits =
                testing::difference_in_tolerances(without_key_biases(reference.weights), without_key_biases(fused.weights));
            allowed = std::max(100.0, 0.1 * sixteen_bits);
            qInfo("weights fused vs eager: %.3g tolerances; 16 bits vs fp32: %.3g", difference, sixteen_bits);
        }
        QVERIFY2(difference <= allowed, qPrintable(QString("%1 tolerances (allowed %2)").arg(difference).arg(allowed)));
    }

    // Fusion saves exactly the passes that wrote an intermediate and read it back.
    void the_plan_counts_the_bytes_fusion_saves() {
        const GptShape shape = small_gpt();
        const ModelDesc gpt = build_gpt(shape);
        OptimizerConfig adamw;
        adamw.kind = OptimizerKind::adamw;
        adamw.weight_decay = 0.1;
        const GraphPlan fused_plan = plan(gpt, true, false, Precision::fp32, adamw);
        const GraphPlan eager_plan = plan(gpt, false, false, Precision::fp32, adamw);
        const MemoryTraffic fused = count_memory_traffic(fused_plan, adamw);
        const MemoryTraffic eager = count_memory_traffic(eager_plan, adamw);
        const int64_t samples = 4, T = shape.block_size, C = shape.n_embd, L = shape.n_layer;
        const int64_t fc = samples * T * 4 * C * 4, stream = samples * T * C * 4, att = samples * shape.n_head * T * T * 4;
        // Per block: GELU's read of the product's output, the LayerNorms' reads of the two sums,
        // and eager attention's three read-write passes over the scores plus the re-read of the
        // probabilities; then the loss's log-probabilities and their gradient, each written and
        // read once.
        const int64_t logits = samples * T * shape.vocab * 4;
        QCOMPARE(eager.forward - fused.forward, L * (fc + 2 * stream + 7 * att) + 4 * logits);
        QVERIFY(eager.backward > fused.backward);
        // AdamW: 7 floats per parameter in one pass; in torch's ten ops 22 where it decays (the
        // weights and embeddings), 20 where not.
        const int64_t n = gpt.trainable_parameter_count(), decayed = fused_plan.params.decay_end;
        QCOMPARE(fused.optimizer, n * 4 * 7);
        QCOMPARE(eager.optimizer, decayed * 4 * 22 + (n - decayed) * 4 * 20);
        // 16 bits: the fused update writes the working copy as it goes (2 bytes per parameter);
        // eager rounds it in a pass of its own that reads the master weights again (4 + 2).
        const MemoryTraffic fused16 = count_memory_traffic(plan(gpt, true, false, Precision::bf16, adamw), adamw);
        const MemoryTraffic eager16 = count_memory_traffic(plan(gpt, false, false, Precision::bf16, adamw), adamw);
        QCOMPARE(fused16.optimizer, n * 4 * 7 + n * 2);
        QCOMPARE(eager16.optimizer, eager.optimizer + n * 6);
        // With oneDNN's fp32 products the linear ops' weights and biases are widened for them:
        // the fused update writes those 4 bytes each instead of their codes; eager rounds every
        // code, then widens those weights in a pass reading the codes (2 + 4).
        int64_t widened = 0;
        for (const OpDesc& op : gpt.ops)
            if (op.kind == OpKind::linear)
                for (int p : op.params) widened += gpt.params[size_t(p)].numel();
        QVERIFY(widened > n / 2 && widened < n);
        auto on_onednn = [&](bool fused) {
            return count_memory_traffic(plan(gpt, fused, false, Precision::fp16, adamw, ProductKernel::onednn_f32), adamw);
        };
        const MemoryTraffic eager_onednn = count_memory_traffic(plan(gpt, false, false, Precision::fp32, adamw, ProductKernel::onednn_f32), adamw);
        QCOMPARE(on_onednn(true).optimizer, n * 4 * 7 + (n - widened) * 2 + widened * 4);
        QCOMPARE(on_onednn(false).optimizer, eager_onednn.optimizer + n * 6 + widened * 6);
        // Eager attention holds every head's gradient of the probabilities; the optimizer its
        // temporaries: more workspace.
        QVERIFY(eager_plan.planned_bytes()[size_t(MemoryCategory::workspace)] >
                fused_plan.planned_bytes()[size_t(MemoryCategory::workspace)]);
        for (const QString name : {"mlp-relu", "mlp-gelu", "cnn"}) {
            const ModelDesc model = model_named(name);
            const MemoryTraffic f = count_memory_traffic(plan(model, true), {});
            const MemoryTraffic e = count_memory_traffic(plan(model, false), {});
            QVERIFY2(f.per_update(2) < e.per_update(2), qPrintable(name));
        }
    }

    // bf16 products in oneDNN: the GELU and attention round their input's gradient into the codes
    // the product before them reads (GraphPlan::hands_dy_codes, what the engine does), so the
    // count drops the product's rounding pass and writes those gradients at half the size.
    void the_plan_counts_the_gradients_handed_over_as_codes() {
        if (!onednn_has_native_bf16())
            QSKIP("this CPU has neither AMX nor AVX512_BF16: bf16 runs multiply in Eigen and hand nothing over");
        const GptShape shape = small_gpt();
        const ModelDesc gpt = build_gpt(shape);
        for (const bool fused : {true, false}) {
            const GraphPlan onednn = plan(gpt, fused, false, Precision::bf16, {}, ProductKernel::onednn_bf16);
            const GraphPlan eigen = plan(gpt, fused, false, Precision::bf16, {}, ProductKernel::eigen);
            QVERIFY(onednn.products == ProductKernel::onednn_bf16);
            int handing = 0;
            for (size_t a = 0; a < gpt.ops.size(); ++a) {
                const OpDesc& op = gpt.ops[a];
                const bool expected = (op.kind == OpKind::activation) || (op.kind == OpKind::attention && fused);
                QCOMPARE(onednn.hands_dy_codes(int(a), onednn.micro_batch), expected);
                QVERIFY(!eigen.hands_dy_codes(int(a), eigen.micro_batch));
                handing += expected ? 1 : 0;
            }
            QCOMPARE(handing, shape.n_layer * (fused ? 2 : 1));
            // Per block: the fc product's rounding pass (read and write of its dY) and half of
            // GELU's write of it; with attention in oneDNN the same for the qkv product and dqkv.
            const int64_t samples = 4, T = shape.block_size, C = shape.n_embd;
            const int64_t fc = samples * T * 4 * C * 4, qkv = samples * T * 3 * C * 4;
            const int64_t saved = shape.n_layer * (2 * fc + fc / 2 + (fused ? 2 * qkv + qkv / 2 : 0));
            const MemoryTraffic with = count_memory_traffic(onednn, {}), without = count_memory_traffic(eigen, {});
            QCOMPARE(without.backward - with.backward, saved);
            QCOMPARE(with.forward, without.forward);
        }
        // Nothing is handed over in fp16 or fp32 runs.
        for (const Precision precision : {Precision::fp16, Precision::fp32}) {
            const GraphPlan p = plan(gpt, true, false, precision, {}, ProductKernel::onednn_f32);
            for (size_t a = 0; a < gpt.ops.size(); ++a) QVERIFY(!p.hands_dy_codes(int(a), p.micro_batch));
        }
    }
};

QTEST_APPLESS_MAIN(TestFusedKernels)
#include "test_fused_kernels.moc"
