// Every op kind the engines run, alone, on every backend (ggml's test-backend-ops in spirit), so
// that a kernel written without a GPU is found wrong in minutes when one is lent. Each case is a
// model of one op: a Linear feeds it (so the gradient of its input reaches a weight) and a Linear
// to logits with a cross-entropy loss reads it; the two losses are cases of their own. One
// micro-batch's loss and every trainable tensor's gradient are compared, in fp32, bf16 and fp16,
// with the fused kernels and the eager ones (--fused off):
// - everywhere: the CPU's eager forms against its fused ones;
// - with a GPU: CUDA against the CPU, each precision and form (skips, saying why, without one).
// fp32 must agree to float rounding; a 16-bit pair to twice the CPU's own distance between that
// precision and fp32 on the same case (two roundings of one computation). Each row prints what it
// measured, so a failure says which op, precision and form, and by how much.
#include <QtTest>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backend/backend_support.hpp"
#include "backend/compute_engine.hpp"
#include "model/init_weights.hpp"
#include "model/model_desc.hpp"
#include "trainbench/error.hpp"
#include "trainbench/trainer.hpp"

using namespace trainbench;

namespace {

constexpr int64_t kSamples = 3;
constexpr int64_t kRows = 5;      // rows per sample (a context of 5 positions)
constexpr int64_t kFeatures = 6;  // the input's width per row
constexpr int64_t kWidth = 8;     // the op's width
constexpr int64_t kHeads = 2;
constexpr int64_t kClasses = 7;
constexpr int64_t kVocab = 11;

// Appends parameters, tensors and ops to a one-op model.
struct OneOpModel {
    ModelDesc m;
    int64_t rows = kRows;  // rows per sample of every op
    int param(const std::string& name, std::vector<int64_t> shape) {
        const InitRule init = shape.size() == 1 ? InitRule::uniform : InitRule::normal;
        m.params.push_back({name, std::move(shape), true, init, 0.3f, {}});
        return static_cast<int>(m.params.size()) - 1;
    }
    int tensor(const std::string& name, int64_t per_sample, bool statistics = false) {
        m.tensors.push_back({name, per_sample, statistics});
        return static_cast<int>(m.tensors.size()) - 1;
    }
    OpDesc& op(OpKind kind, std::vector<int> in, std::vector<int> out, std::vector<int> params) {
        OpDesc o;
        o.kind = kind;
        o.inputs = std::move(in);
        o.outputs = std::move(out);
        o.params = std::move(params);
        o.rows_per_sample = rows;
        m.ops.push_back(o);
        return m.ops.back();
    }
    int linear(const std::string& name, int x, int64_t in, int64_t out) {
        const int y = tensor(name + ".out", rows * out);
        op(OpKind::linear, {x}, {y}, {param(name + ".weight", {out, in}), param(name + ".bias", {out})});
        return y;
    }
    // The logits and the loss after the op's output y of `width` per row.
    void head(int y, int64_t width) {
        const int logits = linear("head", y, width, kClasses);
        op(OpKind::cross_entropy, {logits}, {}, {});
    }
};

// A feature model: x [rows, features] -> Linear -> `body` -> head.
ModelDesc feature_model(const std::string& summary, const std::function<int(OneOpModel&, int)>& body) {
    OneOpModel b;
    b.m.family = ModelFamily::mlp;
    b.m.summary = summary;
    b.m.input_per_sample = kRows * kFeatures;
    b.m.loss_terms_per_sample = kRows;
    b.m.classes = kClasses;
    const int x = b.tensor("x", kRows * kFeatures);
    const int fed = b.linear("feed", x, kFeatures, kWidth);
    const int64_t width = kWidth;
    b.head(body(b, fed), width);
    return b.m;
}

struct Case {
    std::string name;
    ModelDesc model;
};

std::vector<Case> cases() {
    std::vector<Case> out;
    out.push_back({"linear", feature_model("linear", [](OneOpModel&, int fed) { return fed; })});
    for (Activation a : {Activation::relu, Activation::gelu, Activation::tanh, Activation::sigmoid}) {
        const std::string name = "activation " + to_string(a);
        out.push_back({name, feature_model(name, [a](OneOpModel& b, int fed) {
                           const int y = b.tensor("act", kRows * kWidth);
                           b.op(OpKind::activation, {fed}, {y}, {}).activation = a;
                           return y;
                       })});
    }
    out.push_back({"layernorm", feature_model("layernorm", [](OneOpModel& b, int fed) {
                       const int y = b.tensor("ln.out", kRows * kWidth);
                       const int mean = b.tensor("ln.mean", kRows, true);
                       const int rstd = b.tensor("ln.rstd", kRows, true);
                       b.op(OpKind::layernorm, {fed}, {y, mean, rstd}, {b.param("ln.weight", {kWidth}), b.param("ln.bias", {kWidth})});
                       return y;
                   })});
    // As a GPT's residual stream: the sum of a tensor and its LayerNorm (a Linear's or an
    // activation's input has one reader only, so the second addend is not another Linear of x).
    out.push_back({"residual add", feature_model("residual add", [](OneOpModel& b, int fed) {
                       const int normed = b.tensor("ln.out", kRows * kWidth);
                       const int mean = b.tensor("ln.mean", kRows, true);
                       const int rstd = b.tensor("ln.rstd", kRows, true);
                       b.op(OpKind::layernorm, {fed}, {normed, mean, rstd}, {b.param("ln.weight", {kWidth}), b.param("ln.bias", {kWidth})});
                       const int y = b.tensor("sum", kRows * kWidth);
                       b.op(OpKind::residual_add, {fed, normed}, {y}, {});
                       return y;
                   })});
    // Attention reads q, k and v side by side: the feeding Linear gives 3 x the width. Head size
    // 4 and 5 rows take cuBLAS's products on CUDA; head size 16 and 32 rows (two 16-query tiles)
    // the 16-bit tile kernels (plan/cuda_buffer_sizes.hpp, attention_in_tile_kernels).
    for (const auto& [name, rows, width] : {std::tuple{"attention", kRows, kWidth},
                                            std::tuple{"attention in 16 x 16 tiles", int64_t{32}, int64_t{32}}}) {
        OneOpModel b;
        b.rows = rows;
        b.m.family = ModelFamily::mlp;
        b.m.summary = name;
        b.m.input_per_sample = rows * kFeatures;
        b.m.loss_terms_per_sample = rows;
        b.m.classes = kClasses;
        const int x = b.tensor("x", rows * kFeatures);
        const int qkv = b.linear("qkv", x, kFeatures, 3 * width);
        const int y = b.tensor("attn.y", rows * width);
        const int probabilities = b.tensor("attn.probabilities", kHeads * rows * rows);
        b.op(OpKind::attention, {qkv}, {y, probabilities}, {}).heads = kHeads;
        b.head(y, width);
        out.push_back({name, b.m});
    }
    // The embedding reads tokens: a token model, its loss a next-token one.
    {
        OneOpModel b;
        b.m.family = ModelFamily::gpt;
        b.m.summary = "embedding";
        b.m.token_input = true;
        b.m.input_per_sample = kRows;
        b.m.loss_terms_per_sample = kRows;
        b.m.classes = kClasses;
        const int y = b.tensor("embedding.out", kRows * kWidth);
        b.op(OpKind::embedding, {}, {y}, {b.param("wte", {kVocab, kWidth}), b.param("wpe", {kRows, kWidth})});
        b.head(y, kWidth);
        out.push_back({"embedding", b.m});
    }
    // The regression loss: one output per sample.
    {
        OneOpModel b;
        b.m.family = ModelFamily::mlp;
        b.m.summary = "mean squared error";
        b.m.input_per_sample = kFeatures;
        b.m.loss_terms_per_sample = 1;
        b.m.classes = 0;
        const int x = b.tensor("x", kFeatures);
        const int y = b.tensor("y", 1);
        OpDesc& fit = b.op(OpKind::linear, {x}, {y}, {b.param("fit.weight", {1, kFeatures}), b.param("fit.bias", {1})});
        fit.rows_per_sample = 1;
        b.op(OpKind::mean_squared_error, {y}, {}, {}).rows_per_sample = 1;
        out.push_back({"mean squared error", b.m});
    }
    return out;
}

// One micro-batch's inputs for `model`, the same on every engine.
struct Batch {
    std::vector<float> x, targets;
    std::vector<int32_t> tokens, labels;
    MicroBatch view(const ModelDesc& model) const {
        MicroBatch b;
        b.count = kSamples;
        if (model.token_input) {
            b.tokens = tokens.data();
            b.labels = labels.data();
        } else {
            b.x = x.data();
            if (model.classes > 0) b.labels = labels.data();
            else b.targets = targets.data();
        }
        return b;
    }
};

Batch make_batch(const ModelDesc& model) {
    std::mt19937_64 random(17);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    Batch b;
    for (int64_t i = 0; i < kSamples * model.input_per_sample; ++i) b.x.push_back(normal(random));
    for (int64_t i = 0; i < kSamples; ++i) b.targets.push_back(normal(random));
    for (int64_t i = 0; i < kSamples * kRows; ++i) b.tokens.push_back(static_cast<int32_t>(random() % kVocab));
    for (int64_t i = 0; i < kSamples * model.loss_terms_per_sample; ++i)
        b.labels.push_back(static_cast<int32_t>(random() % std::max<int64_t>(1, model.classes)));
    return b;
}

// The loss and every trainable tensor's gradient of one micro-batch.
struct Result {
    double loss = 0.0;
    ModelWeights gradients;
};

Result run(const ModelDesc& model, Backend backend, Precision precision, bool fused,
           CpuProducts products = CpuProducts::automatic) {
    EngineSpec spec;
    spec.cpu_products = products;
    spec.model = model;
    spec.precision = precision;
    spec.fused = fused;
    spec.optimizer.kind = OptimizerKind::sgd;
    spec.max_micro_batch = spec.max_eval_batch = kSamples;
    spec.threads = 1;
    std::unique_ptr<ComputeEngine> engine;
#ifdef TRAINBENCH_WITH_CUDA
    if (backend == Backend::cuda) engine = make_cuda_engine(spec);
#endif
    if (backend == Backend::cpu) engine = make_cpu_engine(spec);
    if (!engine) throw Error("built without CUDA: no CUDA engine to test");
    engine->set_weights(init_weights(model, 3, precision));
    const Batch batch = make_batch(model);
    engine->zero_grad();
    Result r;
    r.loss = engine->forward_backward(batch.view(model), static_cast<double>(kSamples * model.loss_terms_per_sample), 1.0);
    r.gradients = engine->gradients();
    return r;
}

// How far b is from a: the largest of the loss's and each gradient's norm-wise relative
// difference, ||a - b|| / ||a||, naming the worst.
double distance(const Result& a, const Result& b, std::string* worst = nullptr) {
    double largest = std::fabs(a.loss - b.loss) / std::max(1e-12, std::fabs(a.loss));
    if (worst) *worst = "loss";
    for (const NamedTensor& t : a.gradients.tensors) {
        const NamedTensor* other = b.gradients.find(t.name);
        if (!other || other->data.size() != t.data.size()) {
            if (worst) *worst = t.name + " (missing)";
            return INFINITY;
        }
        double norm = 0.0, difference = 0.0;
        for (size_t i = 0; i < t.data.size(); ++i) {
            norm += static_cast<double>(t.data[i]) * t.data[i];
            const double d = static_cast<double>(t.data[i]) - other->data[i];
            difference += d * d;
        }
        const double relative = std::sqrt(difference) / std::max(1e-12, std::sqrt(norm));
        if (relative > largest) {
            largest = relative;
            if (worst) *worst = t.name;
        }
    }
    return largest;
}

// fp32's float rounding between two kernels' orders of summation, norm-wise.
constexpr double kFp32Tolerance = 1e-5;

const char* form(bool fused) { return fused ? "fused" : "eager"; }

}  // namespace

class BackendOpsTest : public QObject {
    Q_OBJECT

    void add_rows() {
        QTest::addColumn<int>("which");
        QTest::addColumn<int>("precision");
        QTest::addColumn<bool>("fused");
        const std::vector<Case> all = cases();
        for (size_t c = 0; c < all.size(); ++c)
            for (Precision p : {Precision::fp32, Precision::bf16, Precision::fp16})
                for (bool fused : {true, false})
                    QTest::newRow((all[c].name + " " + to_string(p) + " " + form(fused)).c_str())
                        << static_cast<int>(c) << static_cast<int>(p) << fused;
    }

    // What a 16-bit pair may differ by on this case: twice the CPU's distance from fp32.
    static double tolerance(const ModelDesc& model, Precision precision, bool fused) {
        if (precision == Precision::fp32) return kFp32Tolerance;
        return 2.0 * distance(run(model, Backend::cpu, Precision::fp32, fused), run(model, Backend::cpu, precision, fused));
    }

private slots:
    void cpuEagerMatchesFused_data() {
        QTest::addColumn<int>("which");
        QTest::addColumn<int>("precision");
        QTest::addColumn<int>("products");
        const std::vector<Case> all = cases();
        for (size_t c = 0; c < all.size(); ++c)
            for (Precision p : {Precision::fp32, Precision::bf16, Precision::fp16})
                for (CpuProducts products : {CpuProducts::automatic, CpuProducts::eigen})
                    QTest::newRow((all[c].name + " " + to_string(p) + " " + to_string(products)).c_str())
                        << static_cast<int>(c) << static_cast<int>(p) << static_cast<int>(products);
    }
    // The eager forms round at the fused ones' points, so even in 16 bits the two agree to far
    // less than a 16-bit step: an eighth of the distance to fp32 (measured: under 1e-7).
    void cpuEagerMatchesFused() {
        QFETCH(int, which);
        QFETCH(int, precision);
        QFETCH(int, products);
        const Case c = cases()[static_cast<size_t>(which)];
        const auto p = static_cast<Precision>(precision);
        const auto kernels = static_cast<CpuProducts>(products);
        std::string worst;
        const double d = distance(run(c.model, Backend::cpu, p, true, kernels), run(c.model, Backend::cpu, p, false, kernels),
                                  &worst);
        const double allowed = p == Precision::fp32 ? kFp32Tolerance : tolerance(c.model, p, true) / 16.0;
        qInfo("%s %s, %s products: eager against fused %.3g (worst: %s), allowed %.3g", c.name.c_str(), to_string(p).c_str(),
              to_string(kernels).c_str(), d, worst.c_str(), allowed);
        QVERIFY2(d <= allowed, qPrintable(QString::fromStdString(worst)));
    }

    void cudaMatchesCpu_data() { add_rows(); }
    void cudaMatchesCpu() {
        if (const std::string reason = cuda_unavailable_reason(); !reason.empty())
            QSKIP(("CUDA against the CPU not tested: " + reason).c_str());
        QFETCH(int, which);
        QFETCH(int, precision);
        QFETCH(bool, fused);
        const Case c = cases()[static_cast<size_t>(which)];
        if (const std::string why = unsupported_in(Backend::cuda, c.model); !why.empty()) QSKIP(why.c_str());
        const auto p = static_cast<Precision>(precision);
        std::string worst;
        const double d = distance(run(c.model, Backend::cpu, p, fused), run(c.model, Backend::cuda, p, fused), &worst);
        const double allowed = tolerance(c.model, p, fused);
        qInfo("%s %s %s: CUDA against the CPU %.3g (worst: %s), allowed %.3g", c.name.c_str(), to_string(p).c_str(),
              form(fused), d, worst.c_str(), allowed);
        QVERIFY2(d <= allowed, qPrintable(QString::fromStdString(worst)));
    }
};

QTEST_GUILESS_MAIN(BackendOpsTest)
#include "test_backend_ops.moc"
