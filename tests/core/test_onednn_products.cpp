// The CPU's matrix products through oneDNN (nn/onednn_matmul.hpp, nn/onednn_linear.hpp), and
// the choice between them and Eigen (--cpu-products):
// - a Linear layer's three products (forward with bias and epilogue, dX, dW written and added)
//   against fp64 references of the same operands, bf16-rounded for bf16 products, with odd
//   shapes and tails, on one thread and split across two;
// - whole runs with --cpu-products onednn against eigen: fp32 to float rounding, bf16 within
//   what bf16 itself moves a run from fp32;
// - the plan counts oneDNN's scratchpads and the engine allocates exactly the plan;
// - the automatic choice follows the CPU (reported), and eigen is honoured everywhere.
// bf16 products need a CPU that multiplies bf16 (AMX or AVX512_BF16); elsewhere those rows skip
// and say so. CTest also runs this suite with oneDNN held to lower instruction sets
// (tests/CMakeLists.txt); a hold that changes nothing on this CPU skips and says so.
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cpuid.h>
#include <cstdlib>
#include <initializer_list>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/peak_equals_plan.hpp"
#include "core/same_bits.hpp"
#include "backend/compute_engine.hpp"
#include "model/build_model.hpp"
#include "model/init_weights.hpp"
#include "nn/activation.hpp"
#include "nn/onednn_linear.hpp"
#include "parallel/parallel_range.hpp"
#include "parallel/worker_team.hpp"
#include "plan/graph_plan.hpp"
#include "precision/half_float.hpp"
#include "trainbench/trainer.hpp"

using namespace trainbench;

namespace {

using Floats = std::vector<float>;

Floats random_values(size_t n, uint32_t seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, scale);
    Floats v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

// max |got - want| / max |want|
double relative_error(const Floats& got, const std::vector<double>& want) {
    double diff = 0.0, scale = 0.0;
    for (size_t i = 0; i < got.size(); ++i) {
        const double d = std::abs(static_cast<double>(got[i]) - want[i]);
        diff = std::isnan(d) ? INFINITY : std::max(diff, d);
        scale = std::max(scale, std::abs(want[i]));
    }
    return diff / std::max(1e-30, scale);
}

// The operands as a product reads them: bf16 codes, or the fp32 values themselves.
struct Operand {
    Floats values;                // what the reference multiplies (rounded to bf16 for bf16)
    std::vector<uint16_t> codes;  // bf16 only
    const void* data(MatmulOperands operands) const {
        return operands == MatmulOperands::bf16 ? static_cast<const void*>(codes.data()) : values.data();
    }
};
Operand operand(size_t n, uint32_t seed, MatmulOperands operands) {
    Operand o{random_values(n, seed), {}};
    if (operands == MatmulOperands::bf16) {
        o.codes.resize(n);
        store_16bit(Precision::bf16, o.values.data(), o.codes.data(), static_cast<int64_t>(n));
        load_16bit(Precision::bf16, o.codes.data(), o.values.data(), static_cast<int64_t>(n));
    }
    return o;
}

bool native_bf16_or_skip_reason(MatmulOperands operands, QString* reason) {
    if (operands == MatmulOperands::f32 || onednn_has_native_bf16()) return true;
    *reason = QString("this CPU does not multiply bf16 natively (oneDNN's ISA here: %1; needs AMX or AVX512_BF16): "
                      "the engine runs bf16 runs' products in fp32 here, as the fp32 rows check")
                  .arg(onednn_isa_name(true));
    return false;
}

// Whether this CPU has instructions that oneDNN uses above `cap` (a DNNL_MAX_CPU_ISA value, as
// CTest sets it): AMX above AVX512_CORE_BF16, AVX-512 (F, DQ, BW, VL) above AVX2, AVX above SSE41.
// Where it has none, the capped run repeats core/test_onednn_products instruction for
// instruction. An unknown cap, or a CPU whose operating system withholds what it has, runs anyway.
bool cpu_has_more_than(const std::string& cap) {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return true;
    const auto bit = [](unsigned reg, int n) { return (reg >> n) & 1u; };
    if (cap == "AVX512_CORE_BF16") return bit(edx, 22) && bit(edx, 24);          // AMX-BF16, AMX-TILE
    if (cap == "AVX2") return bit(ebx, 16) && bit(ebx, 17) && bit(ebx, 30) && bit(ebx, 31);  // F DQ BW VL
    return true;
}

// A text long enough for windows of 32 tokens in both splits, written once per process.
std::string gpt_text_path() {
    static QTemporaryDir folder;
    static const std::string path = [] {
        const QString file = folder.filePath("text.txt");
        QFile text(file);
        if (!text.open(QIODevice::WriteOnly)) qFatal("cannot write %s", qPrintable(file));
        for (int i = 0; i < 400; ++i)
            text.write(QString("In the beginning %1 created the heaven and the earth; verse %2.\n")
                           .arg(i % 3 ? "God" : "the Word")
                           .arg(i)
                           .toUtf8());
        return file.toStdString();
    }();
    return path;
}

RunConfig small_gpt(Precision precision, CpuProducts products) {
    RunConfig config = default_config(ModelFamily::gpt);
    config.dataset = "text:" + gpt_text_path();
    config.n_layer = 2;
    config.n_head = 4;
    config.n_embd = 64;
    config.block_size = 32;
    config.batch_size = 16;
    config.step_size = 2;
    config.max_steps = 20;
    config.eval_every = 0;
    config.sample_chars = 0;
    config.threads = 2;
    config.seed = 3;
    config.precision = precision;
    config.cpu_products = products;
    return config;
}

RunConfig small_mlp(Precision precision, CpuProducts products) {
    RunConfig config;
    config.dataset = "spirals";
    config.synthetic_samples = 1000;
    config.hidden = {96, 80};  // odd widths: tails in every product
    config.activation = Activation::gelu;
    config.batch_size = 50;
    config.step_size = 2;
    config.max_steps = 30;
    config.threads = 2;
    config.seed = 5;
    config.precision = precision;
    config.cpu_products = products;
    return config;
}

std::vector<float> flat_weights(const RunResult& result) {
    std::vector<float> flat;
    for (const NamedTensor& t : result.weights.tensors) flat.insert(flat.end(), t.data.begin(), t.data.end());
    return flat;
}

double distance(const std::vector<float>& a, const std::vector<float>& b) {
    double d = 0.0, n = 0.0;
    for (size_t i = 0; i < a.size(); ++i) {
        d += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
        n += double(b[i]) * b[i];
    }
    return std::sqrt(d / std::max(n, 1e-30));
}

// A linear layer of `in` x `out` over `rows` rows followed by an activation, as a test row.
struct ActivationShape {
    const char* name;
    int in, out, rows;
};
struct ActivationCase {
    Activation kind;
    int threads, in, out, rows;
};

// A QtTest data table: GELU and ReLU on 1 and 2 threads over each of `shapes`.
void add_activation_rows(std::initializer_list<ActivationShape> shapes) {
    QTest::addColumn<int>("activation");
    QTest::addColumn<int>("threads");
    QTest::addColumn<int>("in");
    QTest::addColumn<int>("out");
    QTest::addColumn<int>("rows");
    for (Activation kind : {Activation::gelu, Activation::relu})
        for (int threads : {1, 2})
            for (const ActivationShape& shape : shapes)
                QTest::newRow((std::string(kind == Activation::gelu ? "gelu" : "relu") + "-" + std::to_string(threads) +
                               "t-" + shape.name).c_str())
                    << int(kind) << threads << shape.in << shape.out << shape.rows;
}

// The current row of such a table (QFETCH reads it from the running test function's data).
ActivationCase fetch_activation_case() {
    QFETCH(int, activation);
    QFETCH(int, threads);
    QFETCH(int, in);
    QFETCH(int, out);
    QFETCH(int, rows);
    return {Activation(activation), threads, in, out, rows};
}

}  // namespace

class TestOnednnProducts : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() {
        if (const char* cap = std::getenv("DNNL_MAX_CPU_ISA"); cap && !cpu_has_more_than(cap))
            QSKIP(qPrintable(QString("this CPU has no instructions above %1: oneDNN held to it runs what "
                                     "core/test_onednn_products ran").arg(cap)));
        qInfo("oneDNN's instructions on this CPU: bf16 products %s, fp32 products %s", onednn_isa_name(true),
              onednn_isa_name(false));
    }

    void linear_products_match_fp64_data() {
        QTest::addColumn<int>("operands");
        QTest::addColumn<int>("threads");
        QTest::addColumn<int>("in");
        QTest::addColumn<int>("out");
        QTest::addColumn<int>("rows");
        for (MatmulOperands operands : {MatmulOperands::f32, MatmulOperands::bf16})
            for (int threads : {1, 2}) {
                const std::string name = std::string(operands == MatmulOperands::bf16 ? "bf16" : "fp32") + "-" +
                                         std::to_string(threads) + "t";
                // odd everything; one row; a K of 1; products big enough to split across two
                QTest::newRow((name + "-37x29x83").c_str()) << int(operands) << threads << 37 << 29 << 83;
                QTest::newRow((name + "-one-row").c_str()) << int(operands) << threads << 45 << 19 << 1;
                QTest::newRow((name + "-depth-1").c_str()) << int(operands) << threads << 1 << 33 << 70;
                QTest::newRow((name + "-split-161x130x517").c_str()) << int(operands) << threads << 161 << 130 << 517;
                // fewer rows than inputs: on two threads the bf16 weight gradient is split by its
                // rows over dY^T's codes (the MLP's layers), with tiles and tails both ways
                QTest::newRow((name + "-transposed-300x130x163").c_str()) << int(operands) << threads << 300 << 130 << 163;
            }
    }
    // Y = X W^T + b with a GELU epilogue, dX = dY W, dW = dY^T X then dW += dY^T X, db (+)= colsum dY.
    void linear_products_match_fp64() {
        QFETCH(int, operands);
        QFETCH(int, threads);
        QFETCH(int, in);
        QFETCH(int, out);
        QFETCH(int, rows);
        const auto type = MatmulOperands(operands);
        QString reason;
        if (!native_bf16_or_skip_reason(type, &reason)) QSKIP(qPrintable(reason));
        WorkerTeam::shared().resize(threads);
        const Operand x = operand(size_t(rows) * in, 1, type), w = operand(size_t(out) * in, 2, type);
        // The reference multiplies dY rounded to bf16; the bf16 backward is given it unrounded,
        // as the engine gives it, and must round it itself.
        const Operand dy = operand(size_t(rows) * out, 3, type);
        const Floats dy_given = random_values(size_t(rows) * out, 3);
        const Floats bias = random_values(size_t(out), 4);

        const int64_t scratchpad = onednn_linear_scratchpad_bytes(type, in, out, rows, true, true, threads);
        std::vector<char> scratchpads(size_t(std::max<int64_t>(1, scratchpad * threads)));
        OnednnProducts products(threads, scratchpads.data(), scratchpad);

        // forward, with the epilogue a fused GELU applies (rounding first in 16-bit runs)
        Floats y(size_t(rows) * out, NAN), activated(size_t(rows) * out, NAN);
        const ProductEpilogue epilogue{.activation = Activation::gelu, .activated = activated.data(),
                                       .rounding = type == MatmulOperands::bf16 ? Precision::bf16 : Precision::fp32};
        onednn_linear_forward(products, type, x.data(type), w.data(type), bias.data(), y.data(), in, out, rows, &epilogue);
        std::vector<double> want_y(y.size()), want_dx(size_t(rows) * in), want_dw(size_t(out) * in), want_db(static_cast<size_t>(out));
        for (int r = 0; r < rows; ++r)
            for (int o = 0; o < out; ++o) {
                double s = bias[size_t(o)];
                for (int i = 0; i < in; ++i) s += double(x.values[size_t(r) * in + i]) * w.values[size_t(o) * in + i];
                want_y[size_t(r) * out + o] = s;
            }
        for (int r = 0; r < rows; ++r)
            for (int i = 0; i < in; ++i) {
                double s = 0.0;
                for (int o = 0; o < out; ++o) s += double(dy.values[size_t(r) * out + o]) * w.values[size_t(o) * in + i];
                want_dx[size_t(r) * in + i] = s;
            }
        for (int o = 0; o < out; ++o) {
            for (int i = 0; i < in; ++i) {
                double s = 0.0;
                for (int r = 0; r < rows; ++r) s += double(dy.values[size_t(r) * out + o]) * x.values[size_t(r) * in + i];
                want_dw[size_t(o) * in + i] = s;
            }
            double s = 0.0;
            for (int r = 0; r < rows; ++r) s += dy.values[size_t(r) * out + o];
            want_db[size_t(o)] = s;
        }
        // The epilogue's output from the product's own (rounded) values.
        Floats y_rounded = y;
        Floats want_activated(y.size());
        activation_forward(Activation::gelu, y_rounded.data(), want_activated.data(), int64_t(y.size()));
        // Each output is a sum of `depth` products in fp32 (from exact products for bf16
        // operands): a few fp32 roundings of the largest partial sums.
        const double tolerance = 1e-5;
        // y was rounded to bf16 in place by the epilogue: compare within a bf16 step then.
        const double y_tolerance = type == MatmulOperands::bf16 ? 1.0 / 256 : tolerance;
        QVERIFY2(relative_error(y, want_y) < y_tolerance, qPrintable(QString::number(relative_error(y, want_y))));
        QCOMPARE(activated, want_activated);

        Floats scratch(size_t(onednn_linear_scratch_floats(type, in, out, rows, threads)));
        Floats dx(size_t(rows) * in, NAN), dw(size_t(out) * in, NAN), db(static_cast<size_t>(out), NAN);
        Floats dy_values = type == MatmulOperands::bf16 ? dy_given : dy.values;
        float* dy_in = dy_values.data();
        onednn_linear_backward(products, type, x.data(type), w.data(type), dy_in, dw.data(), db.data(),
                               dx.data(), in, out, rows, GradientWrite::overwrite, scratch.data());
        const double dx_error = relative_error(dx, want_dx), dw_error = relative_error(dw, want_dw);
        const double db_error = relative_error(db, want_db);
        qInfo("dX %.2g, dW %.2g, db %.2g", dx_error, dw_error, db_error);
        QVERIFY(dx_error < tolerance && dw_error < tolerance && db_error < tolerance);
        // The next micro-batch adds to dW and db, dX is written again.
        onednn_linear_backward(products, type, x.data(type), w.data(type), dy_in, dw.data(), db.data(),
                               dx.data(), in, out, rows, GradientWrite::accumulate, scratch.data());
        for (double& v : want_dw) v *= 2;
        for (double& v : want_db) v *= 2;
        QVERIFY(relative_error(dw, want_dw) < tolerance && relative_error(db, want_db) < tolerance);
        QVERIFY(relative_error(dx, want_dx) < tolerance);
        WorkerTeam::shared().resize(1);
    }

    // A bf16 run's activation after a product rounds its input gradient straight into the codes
    // the product's backward reads (dY's values never written): the bits of the activation's
    // backward in place and the product's backward rounding dY itself. GELU saves its input,
    // ReLU its output; shapes whose weight gradient transposes dY (two threads, fewer rows than
    // inputs) cannot take codes and say so.
    void activation_codes_give_the_bits_of_separate_passes_data() {
        // dY longer than the activation's blocks, with a tail; and a shape whose weight gradient
        // transposes dY on two threads
        add_activation_rows({{"37x29x83", 37, 29, 83}, {"161x130x517", 161, 130, 517},
                             {"transposed-300x130x163", 300, 130, 163}});
    }
    void activation_codes_give_the_bits_of_separate_passes() {
        const auto [kind, threads, in, out, rows] = fetch_activation_case();
        const auto type = MatmulOperands::bf16;
        QString reason;
        if (!native_bf16_or_skip_reason(type, &reason)) QSKIP(qPrintable(reason));
        WorkerTeam::shared().resize(threads);
        const int64_t n = rows * out;
        const Operand x = operand(size_t(rows) * in, 1, type), w = operand(size_t(out) * in, 2, type);
        // The tensor f' reads, stored in bf16: the product's output z (GELU) or the activation's.
        std::vector<uint16_t> saved(static_cast<size_t>(n));
        Floats z = random_values(static_cast<size_t>(n), 5, 3.0f), activated(static_cast<size_t>(n));
        activation_forward(kind, z.data(), activated.data(), n);
        store_16bit(Precision::bf16, (activation_needs_input(kind) ? z : activated).data(), saved.data(), n);
        const Floats activation_grad = random_values(size_t(n), 6);
        const int64_t scratchpad = onednn_linear_scratchpad_bytes(type, in, out, rows, true, true, threads);
        std::vector<char> scratchpads(size_t(std::max<int64_t>(1, scratchpad * threads)));
        OnednnProducts products(threads, scratchpads.data(), scratchpad);
        Floats staging(static_cast<size_t>(n)), scratch(static_cast<size_t>(onednn_linear_scratch_floats(type, in, out, rows, threads)));

        // Two passes: the activation's backward in place, the product's rounding dY itself.
        Floats dy = activation_grad;
        activation_backward_16bit(kind, Precision::bf16, saved.data(), staging.data(), dy.data(), n);
        Floats dx(size_t(rows) * in), dw(size_t(out) * in), db(static_cast<size_t>(out));
        onednn_linear_backward(products, type, x.data(type), w.data(type), dy.data(), dw.data(), db.data(), dx.data(),
                               in, out, rows, GradientWrite::overwrite, scratch.data());

        Floats given = activation_grad;
        std::fill(scratch.begin(), scratch.end(), NAN);
        if (!onednn_linear_takes_dy_codes(in, out, rows, true, true, threads)) {
            QVERIFY(threads > 1 && rows < in);
            QVERIFY_THROWS_EXCEPTION(std::logic_error,
                                     onednn_linear_backward(products, type, x.data(type), w.data(type), nullptr,
                                                            dw.data(), db.data(), dx.data(), in, out, rows,
                                                            GradientWrite::overwrite, scratch.data(), Precision::fp32,
                                                            onednn_linear_dy_codes(scratch.data())));
            WorkerTeam::shared().resize(1);
            return;
        }
        activation_backward_16bit(kind, Precision::bf16, saved.data(), staging.data(), given.data(), n,
                                  onednn_linear_dy_codes(scratch.data()));
        QVERIFY(same_bits(given, activation_grad));  // only read
        std::vector<uint16_t> want_codes(static_cast<size_t>(n));
        store_16bit(Precision::bf16, dy.data(), want_codes.data(), n);
        QVERIFY(std::equal(want_codes.begin(), want_codes.end(), onednn_linear_dy_codes(scratch.data())));
        Floats dx_codes(dx.size(), NAN), dw_codes(dw.size(), NAN), db_codes(db.size(), NAN);
        onednn_linear_backward(products, type, x.data(type), w.data(type), nullptr, dw_codes.data(), db_codes.data(),
                               dx_codes.data(), in, out, rows, GradientWrite::overwrite, scratch.data(), Precision::fp32,
                               onednn_linear_dy_codes(scratch.data()));
        QVERIFY(same_bits(dx_codes, dx) && same_bits(dw_codes, dw) && same_bits(db_codes, db));
        WorkerTeam::shared().resize(1);
    }

    // A bf16 run's product fused with its activation: oneDNN rounding the product into codes and
    // each member activating its rows of those codes gives the bits of the fp32 product with the
    // epilogue rounding and activating it (GELU keeps the product's codes, ReLU runs in place).
    void activated_codes_give_the_bits_of_the_epilogue_data() {
        add_activation_rows({{"37x29x83", 37, 29, 83}, {"128x512x300", 128, 512, 300}});
    }
    void activated_codes_give_the_bits_of_the_epilogue() {
        const auto [kind, threads, in, out, rows] = fetch_activation_case();
        const auto type = MatmulOperands::bf16;
        QString reason;
        if (!native_bf16_or_skip_reason(type, &reason)) QSKIP(qPrintable(reason));
        WorkerTeam::shared().resize(threads);
        const size_t n = size_t(rows) * out;
        const Operand x = operand(size_t(rows) * in, 1, type), w = operand(size_t(out) * in, 2, type);
        const Floats bias = random_values(size_t(out), 3);
        const int64_t scratchpad = onednn_linear_scratchpad_bytes(type, in, out, rows, true, false, threads);
        std::vector<char> scratchpads(size_t(std::max<int64_t>(1, scratchpad * threads)));
        OnednnProducts products(threads, scratchpads.data(), scratchpad);
        const bool in_place = kind == Activation::relu;

        Floats y(n, NAN);
        std::vector<uint16_t> want_product(n), want_activated(n);
        ProductEpilogue epilogue{.activation = kind, .rounding = Precision::bf16,
                                 .output_codes = in_place ? nullptr : want_product.data(),
                                 .activated_codes = want_activated.data()};
        onednn_linear_forward(products, type, x.data(type), w.data(type), bias.data(), y.data(), in, out, rows, &epilogue);

        std::vector<uint16_t> product(n, 0xffff), activated(n, 0xffff);
        epilogue.output_codes = nullptr;
        epilogue.activated_codes = in_place ? product.data() : activated.data();
        onednn_linear_forward_bf16(products, x.data(type), w.data(type), bias.data(), product.data(), in, out, rows,
                                   &epilogue);
        if (in_place) {
            QVERIFY(product == want_activated);
        } else {
            QVERIFY(product == want_product);
            QVERIFY(activated == want_activated);
        }
        WorkerTeam::shared().resize(1);
    }

    // 16-bit activations with fp32 products (fp16 runs, and bf16 on CPUs without bf16 products):
    // the forward whose members widen their input rows and round their output rows themselves,
    // block by block (several blocks a member where W is small, one where it is not), with and
    // without an epilogue, and the backward that rounds dY as it transposes it, give the bits of
    // widening, multiplying (the same blocks) and rounding as passes of their own.
    void sixteen_bit_rows_give_the_bits_of_separate_passes_data() {
        QTest::addColumn<int>("precision");
        QTest::addColumn<int>("threads");
        QTest::addColumn<int>("in");
        QTest::addColumn<int>("out");
        QTest::addColumn<int>("rows");
        QTest::addColumn<int>("blocks");  // products of the forward
        for (Precision precision : {Precision::fp16, Precision::bf16})
            for (int threads : {1, 2}) {
                const std::string name = to_string(precision) + "-" + std::to_string(threads) + "t";
                QTest::newRow((name + "-37x29x83").c_str()) << int(precision) << threads << 37 << 29 << 83 << 1;
                // Blocks of 192 rows: 192 + 192 + 133; on two threads 192 + 80 and 192 + 53.
                QTest::newRow((name + "-split-161x130x517").c_str())
                    << int(precision) << threads << 161 << 130 << 517 << (threads == 1 ? 3 : 4);
                // W over 256 KiB: each member multiplies its rows as one block.
                QTest::newRow((name + "-whole-slices-300x260x97").c_str())
                    << int(precision) << threads << 300 << 260 << 97 << threads;
            }
    }
    void sixteen_bit_rows_give_the_bits_of_separate_passes() {
        QFETCH(int, precision);
        QFETCH(int, threads);
        QFETCH(int, in);
        QFETCH(int, out);
        QFETCH(int, rows);
        QFETCH(int, blocks);
        const auto p = Precision(precision);
        WorkerTeam::shared().resize(threads);
        const auto type = MatmulOperands::f32;
        auto codes_of = [&](const Floats& values) {
            std::vector<uint16_t> codes(values.size());
            store_16bit(p, values.data(), codes.data(), int64_t(values.size()));
            return codes;
        };
        const std::vector<uint16_t> x16 = codes_of(random_values(size_t(rows) * in, 1));
        const Floats w = random_values(size_t(out) * in, 2), bias = random_values(size_t(out), 4);
        const int64_t scratchpad = std::max(onednn_linear_scratchpad_bytes(type, in, out, rows, true, true, threads),
                                            onednn_linear_16bit_rows_scratchpad_bytes(in, out, rows, true, threads));
        std::vector<char> scratchpads(size_t(std::max<int64_t>(1, scratchpad * threads)));
        OnednnProducts products(threads, scratchpads.data(), scratchpad);

        for (bool with_epilogue : {false, true}) {
            // Passes: widen all of x, multiply block by block, round all of y (or the epilogue
            // stores the codes).
            Floats x_widened(x16.size());
            load_16bit(p, x16.data(), x_widened.data(), int64_t(x16.size()));
            Floats y_passes(size_t(rows) * out, NAN);
            std::vector<uint16_t> y_codes_passes(y_passes.size()), act_codes_passes(y_passes.size());
            ProductEpilogue passes_epilogue{.activation = Activation::gelu, .rounding = p,
                                            .output_codes = y_codes_passes.data(), .activated_codes = act_codes_passes.data()};
            const std::vector<RowBlock> row_blocks =
                onednn_linear_16bit_rows_blocks(in, out, rows, members_for(int64_t(in) * out * rows));
            QCOMPARE(int(row_blocks.size()), blocks);
            for (const RowBlock& block : row_blocks) {
                const MatmulShape shape = linear_forward_shape(type, in, out, block.count, true);
                products.prepare(shape, 1);
                products.run(shape, 0, x_widened.data() + block.first * in, w.data(), bias.data(),
                             y_passes.data() + block.first * out);
            }
            if (with_epilogue) apply_epilogue(passes_epilogue, y_passes.data(), out, 0, out, 0, rows);
            else y_codes_passes = codes_of(y_passes);
            // Rows: each member widens and rounds its own.
            Floats staging(x16.size(), NAN), y_rows(y_passes.size(), NAN);
            std::vector<uint16_t> y_codes_rows(y_passes.size()), act_codes_rows(y_passes.size());
            ProductEpilogue rows_epilogue{.activation = Activation::gelu, .rounding = p,
                                          .output_codes = y_codes_rows.data(), .activated_codes = act_codes_rows.data()};
            onednn_linear_forward_16bit_rows(products, p, x16.data(), staging.data(), w.data(), bias.data(), y_rows.data(),
                                             y_codes_rows.data(), in, out, rows, with_epilogue ? &rows_epilogue : nullptr);
            QVERIFY2(y_codes_rows == y_codes_passes, with_epilogue ? "with the epilogue" : "without an epilogue");
            if (with_epilogue) QVERIFY(act_codes_rows == act_codes_passes);
        }

        // The backward: dY rounded in place first, then fp32 products; or rounded as it is transposed.
        const Floats x_values = [&] {
            Floats v(x16.size());
            load_16bit(p, x16.data(), v.data(), int64_t(v.size()));
            return v;
        }();
        const Floats dy_given = random_values(size_t(rows) * out, 3);
        Floats scratch(size_t(onednn_linear_scratch_floats(type, in, out, rows, threads)));
        for (bool weight_grad : {true, false}) {
            Floats dy_passes = dy_given, dy_rounding = dy_given;
            round_to_16bit(p, dy_passes.data(), int64_t(dy_passes.size()));
            Floats dw_a(size_t(out) * in, NAN), db_a(size_t(out), NAN), dx_a(size_t(rows) * in, NAN);
            Floats dw_b = dw_a, db_b = db_a, dx_b = dx_a;
            onednn_linear_backward(products, type, x_values.data(), w.data(), dy_passes.data(),
                                   weight_grad ? dw_a.data() : nullptr, weight_grad ? db_a.data() : nullptr, dx_a.data(),
                                   in, out, rows, GradientWrite::overwrite, scratch.data());
            onednn_linear_backward(products, type, x_values.data(), w.data(), dy_rounding.data(),
                                   weight_grad ? dw_b.data() : nullptr, weight_grad ? db_b.data() : nullptr, dx_b.data(),
                                   in, out, rows, GradientWrite::overwrite, scratch.data(), p);
            QVERIFY2(same_bits(dy_rounding, dy_passes), "dY is rounded in place as the products read it");
            QVERIFY(same_bits(dx_b, dx_a));
            if (weight_grad) QVERIFY(same_bits(dw_b, dw_a) && same_bits(db_b, db_a));
        }
        WorkerTeam::shared().resize(1);
    }

    // Whole runs: the products in oneDNN train what Eigen's train.
    void runs_match_eigen_data() {
        QTest::addColumn<bool>("gpt");
        QTest::addColumn<int>("precision");
        for (bool gpt : {false, true})
            for (Precision p : {Precision::fp32, Precision::bf16})
                QTest::newRow(((gpt ? "gpt-" : "mlp-") + to_string(p)).c_str()) << gpt << int(p);
    }
    void runs_match_eigen() {
        QFETCH(bool, gpt);
        QFETCH(int, precision);
        const auto p = Precision(precision);
        auto config = [&](Precision q, CpuProducts products) { return gpt ? small_gpt(q, products) : small_mlp(q, products); };
        const RunResult eigen = train(config(p, CpuProducts::eigen));
        const RunResult onednn = train(config(p, CpuProducts::onednn));
        QVERIFY2(eigen.reason == StopReason::max_steps && onednn.reason == StopReason::max_steps, onednn.message.c_str());
        QCOMPARE(onednn.plan.products, describe(choose_product_kernel(CpuProducts::onednn, p)));
        QCOMPARE(eigen.plan.products, std::string("Eigen fp32"));
        const double weights = distance(flat_weights(onednn), flat_weights(eigen));
        const double loss = std::abs(onednn.last.loss - eigen.last.loss) / eigen.last.loss;
        if (p == Precision::fp32) {
            qInfo("fp32: oneDNN vs Eigen after %lld updates: loss %.2g, weights %.2g", static_cast<long long>(eigen.last.update),
                  loss, weights);
            QVERIFY(loss < 1e-5 && weights < 1e-4);
            return;
        }
        // bf16: products on bf16 operands with fp32 accumulation either way, summed in another
        // order; a value that lands on the other side of a bf16 rounding boundary grows as any
        // rounding difference does (AdamW turns noise-level gradients into full steps). The
        // yardstick is what bf16 does to the run, its distance from the fp32 run, and two bf16
        // runs may part by twice it, as two roundings of one trajectory (the bound the GPU
        // checks use for CUDA bf16 against CPU bf16).
        const RunResult fp32 = train(config(Precision::fp32, CpuProducts::eigen));
        const double bf16_cost = distance(flat_weights(eigen), flat_weights(fp32));
        qInfo("bf16: oneDNN vs Eigen: loss %.2g, weights %.2g; Eigen bf16 vs fp32: weights %.2g", loss, weights, bf16_cost);
        QVERIFY(bf16_cost > 0.0);
        QVERIFY(weights < 2 * bf16_cost);
        QVERIFY(loss < 1e-2);
    }

    // The plan counts oneDNN's scratchpads (one region per thread) and the widened weights of
    // 16-bit runs, and the engine's allocator holds exactly the plan after an update.
    void plan_equals_allocation_data() {
        QTest::addColumn<int>("precision");
        for (Precision p : {Precision::fp32, Precision::bf16, Precision::fp16}) QTest::newRow(to_string(p).c_str()) << int(p);
    }
    void plan_equals_allocation() {
        QFETCH(int, precision);
        GptShape shape;
        shape.n_layer = 2, shape.n_head = 4, shape.n_embd = 64, shape.block_size = 32, shape.vocab = 65;
        EngineSpec spec;
        spec.model = build_gpt(shape);
        spec.optimizer.kind = OptimizerKind::adamw;
        spec.precision = Precision(precision);
        spec.max_micro_batch = spec.max_eval_batch = 4;
        spec.threads = 2;
        spec.cpu_products = CpuProducts::onednn;
        spec.sample_counts = {3};  // the second micro-batch's: its products are planned and made too
        auto engine = make_cpu_engine(spec);
        engine->set_weights(init_weights(spec.model, 1));
        std::vector<int32_t> tokens(4 * 32);
        for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 7 + 3) % 65);
        MicroBatch batch;
        batch.tokens = tokens.data();
        batch.labels = tokens.data();
        batch.count = 4;
        engine->begin_update_timing();
        engine->zero_grad();
        engine->forward_backward(batch, 128.0, 1.0);
        batch.count = 3;
        engine->forward_backward(batch, 128.0, 1.0);
        engine->optimizer_step(1e-3, 1.0, 1);
        const BytesByCategory planned = plan_cpu_engine_memory(spec);
        CHECK_PEAK_EQUALS_PLAN(*engine, planned);
        // oneDNN's products read the weights where they are: no packed copies of W or W^T.
        EngineSpec eigen = spec;
        eigen.cpu_products = CpuProducts::eigen;
        const int64_t workspace = planned[size_t(MemoryCategory::workspace)];
        const int64_t eigen_workspace = plan_cpu_engine_memory(eigen)[size_t(MemoryCategory::workspace)];
        qInfo("workspace: %lld bytes with oneDNN's products, %lld with Eigen's", static_cast<long long>(workspace),
              static_cast<long long>(eigen_workspace));
    }

    void automatic_choice_follows_the_cpu() {
        const ProductKernel bf16 = choose_product_kernel(CpuProducts::automatic, Precision::bf16);
        const ProductKernel fp32 = choose_product_kernel(CpuProducts::automatic, Precision::fp32);
        qInfo("auto on this CPU: bf16 runs %s, fp32 and fp16 runs %s", describe(bf16).c_str(), describe(fp32).c_str());
        QCOMPARE(bf16 == ProductKernel::onednn_bf16, onednn_has_native_bf16());
        QCOMPARE(fp32 == ProductKernel::onednn_f32, onednn_has_avx2());
        QCOMPARE(choose_product_kernel(CpuProducts::automatic, Precision::fp16), fp32);
        for (Precision p : {Precision::fp32, Precision::bf16, Precision::fp16})
            QCOMPARE(choose_product_kernel(CpuProducts::eigen, p), ProductKernel::eigen);
    }
};

QTEST_APPLESS_MAIN(TestOnednnProducts)
#include "test_onednn_products.moc"
