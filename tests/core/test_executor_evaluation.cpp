// The executor (exec/plan_executor.cpp) evaluates a batch larger than the plan's micro-batch a
// micro-batch at a time, for every backend: each chunk's inputs, labels and targets taken at the
// right offsets, the totals summed. Here an MLP's chunks against one pass, for classification and
// regression, in fp32 and bf16 (the loss widening its 16-bit input); the GPT's token offsets are
// test_gpt_model.cpp's evaluation_in_chunks_matches_one_pass.
#include <QtTest>

#include <cmath>

#include "backend/compute_engine.hpp"
#include "model/build_model.hpp"
#include "model/init_weights.hpp"

using namespace trainbench;

namespace {

constexpr int64_t kFeatures = 7, kSamples = 23;

EngineSpec mlp_spec(int64_t classes, int64_t micro_batch, Precision precision) {
    EngineSpec spec;
    spec.model = build_mlp({kFeatures, 16, 16, classes > 0 ? classes : 1}, Activation::tanh, classes);
    spec.precision = precision;
    spec.max_micro_batch = spec.max_eval_batch = micro_batch;
    spec.threads = 1;
    return spec;
}

}  // namespace

class TestExecutorEvaluation : public QObject {
    Q_OBJECT
private slots:
    void chunks_match_one_pass_data() {
        QTest::addColumn<int>("classes");
        QTest::addColumn<int>("precision");
        for (int classes : {3, 0})
            for (Precision p : {Precision::fp32, Precision::bf16})
                QTest::newRow(qPrintable(QString("%1 %2").arg(classes ? "classification" : "regression").arg(to_string(p).c_str())))
                    << classes << static_cast<int>(p);
    }
    void chunks_match_one_pass() {
        QFETCH(int, classes);
        QFETCH(int, precision);
        std::vector<float> x(static_cast<size_t>(kFeatures * kSamples)), targets(static_cast<size_t>(kSamples));
        std::vector<int32_t> labels(static_cast<size_t>(kSamples));
        for (size_t i = 0; i < x.size(); ++i) x[i] = float((i * 37) % 97) / 48.0f - 1.0f;
        for (size_t i = 0; i < labels.size(); ++i) {
            labels[i] = int32_t((i * 5) % 3);
            targets[i] = float(i % 4) - 1.5f;
        }
        MicroBatch batch;
        batch.x = x.data();
        batch.labels = classes > 0 ? labels.data() : nullptr;
        batch.targets = classes > 0 ? nullptr : targets.data();
        batch.count = kSamples;

        const auto p = static_cast<Precision>(precision);
        auto whole = make_cpu_engine(mlp_spec(classes, kSamples, p));
        auto chunked = make_cpu_engine(mlp_spec(classes, 5, p));  // chunks of 5, 5, 5, 5 and 3
        const ModelWeights weights = init_weights(mlp_spec(classes, 1, p).model, 3);
        whole->set_weights(weights);
        chunked->set_weights(weights);
        const EvalTotals want = whole->evaluate(batch);
        const EvalTotals got = chunked->evaluate(batch);
        QVERIFY2(std::abs(got.loss_sum - want.loss_sum) < 1e-6 * std::abs(want.loss_sum),
                 qPrintable(QString("%1 vs %2").arg(got.loss_sum, 0, 'g', 17).arg(want.loss_sum, 0, 'g', 17)));
        QCOMPARE(got.correct, want.correct);
        // Leaving out the last chunk's 3 samples moves the sum far beyond that tolerance.
        batch.count = kSamples - 3;
        QVERIFY(std::abs(whole->evaluate(batch).loss_sum - want.loss_sum) > 1e-3 * std::abs(want.loss_sum));
    }
};

QTEST_APPLESS_MAIN(TestExecutorEvaluation)
#include "test_executor_evaluation.moc"
