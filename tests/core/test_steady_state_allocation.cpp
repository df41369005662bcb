// "No heap allocation in the steady-state training step": this executable interposes the C
// allocator and counts calls made while updates run, after the first few (which fill the
// arena's cache). The observer and the loop itself must not allocate either.
#include <QTemporaryDir>
#include <QtTest>

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "backend/compute_engine.hpp"
#include "core/allocation_counter.hpp"
#include "model/build_model.hpp"
#include "model/init_weights.hpp"
#include "model/pipeline_stages.hpp"
#include "parallel/pipeline_schedule.hpp"
#include "trainbench/trainer.hpp"

using namespace trainbench;

namespace {

// Trains `config` (40 updates) and counts the allocations of updates 5 to 35, after the first
// ones have filled the arena's cache. Inside oneDNN's executions (the products with
// --cpu-products onednn) its own bookkeeping is allowed, and bounded: at most 7 blocks per
// product (a node per argument in its argument map, the map's buckets and its thread loop's
// closure), each freed before the product returns (allocation_counter.hpp says why).
void expect_no_allocation_in_updates_5_to_35(const RunConfig& config, std::shared_ptr<const Dataset> data) {
    long during = 0, inside_onednn = 0, freed_inside_onednn = 0;
    int64_t products = 0;
    Observer observer;
    observer.on_update = [&](const StepMetrics& m) {
        if (m.update == 5) {
            allocations = 0;
            allocations_inside_onednn = 0;
            frees_inside_onednn = 0;
            products = onednn_executions();
            counting = true;
        }
        if (m.update == 35) {
            counting = false;
            during = allocations.load();
            inside_onednn = allocations_inside_onednn.load();
            freed_inside_onednn = frees_inside_onednn.load();
            products = onednn_executions() - products;
        }
    };
    const RunResult result = train(config, observer, nullptr, std::move(data));
    QVERIFY2(result.reason == StopReason::max_steps, result.message.c_str());
    qInfo("products: %s; %lld oneDNN products, which allocated %ld blocks and freed %ld inside them",
          to_string(config.cpu_products).c_str(), static_cast<long long>(products), inside_onednn, freed_inside_onednn);
    QVERIFY2(during == 0, qPrintable(QString("%1 allocations during 30 updates").arg(during)));
    QVERIFY2(inside_onednn <= 7 * products, "oneDNN allocated more than its per-execution bookkeeping");
    QCOMPARE(freed_inside_onednn, inside_onednn);
    if (config.cpu_products == CpuProducts::eigen) QCOMPARE(products, int64_t{0});
}

}  // namespace

class TestSteadyStateAllocation : public QObject {
    Q_OBJECT
private slots:
    void updates_do_not_allocate_data() {
        QTest::addColumn<QString>("precision");
        QTest::addColumn<bool>("checkpointing");
        QTest::addColumn<int>("prefetch");
        QTest::addColumn<QString>("products");
        for (const char* products : {"eigen", "onednn"}) {
            const std::string p(products);
            QTest::newRow(("fp32-" + p).c_str()) << "fp32" << false << 0 << products;
            QTest::newRow(("bf16-checkpointing-" + p).c_str()) << "bf16" << true << 0 << products;
            QTest::newRow(("fp16-prefetch-" + p).c_str()) << "fp16" << false << 2 << products;
        }
    }
    void updates_do_not_allocate() {
        SKIP_WITHOUT_ALLOCATION_COUNTER();
        QFETCH(QString, precision);
        QFETCH(bool, checkpointing);
        QFETCH(int, prefetch);
        QFETCH(QString, products);
        DataOptions options;
        options.synthetic_samples = 20000;
        const auto data = std::make_shared<const Dataset>(load_dataset("spirals", options));
        RunConfig config;
        config.hidden = {256, 256, 256, 256};
        config.batch_size = 256;  // products large enough for Eigen's blocked, threaded kernels
        config.step_size = 4;
        config.max_steps = 40;
        config.threads = 2;
        config.precision = parse_precision(precision.toStdString());
        config.gradient_checkpointing = checkpointing;
        config.prefetch = prefetch;
        config.cpu_products = parse_cpu_products(products.toStdString());
        expect_no_allocation_in_updates_5_to_35(config, data);
    }

    // A GPT on a text: token windows through the loader, attention, LayerNorm, embedding and
    // the --eval-every evaluations inside the counted updates.
    void gpt_updates_do_not_allocate_data() {
        QTest::addColumn<bool>("checkpointing");
        QTest::addColumn<int>("prefetch");
        QTest::addColumn<QString>("precision");
        QTest::addColumn<QString>("products");
        for (const char* products : {"eigen", "onednn"}) {
            const std::string p(products);
            QTest::newRow(("fp32-" + p).c_str()) << false << 0 << "fp32" << products;
            QTest::newRow(("bf16-" + p).c_str()) << false << 0 << "bf16" << products;
            QTest::newRow(("checkpointing-prefetch-" + p).c_str()) << true << 2 << "fp32" << products;
        }
    }
    void gpt_updates_do_not_allocate() {
        SKIP_WITHOUT_ALLOCATION_COUNTER();
        QFETCH(bool, checkpointing);
        QFETCH(int, prefetch);
        QFETCH(QString, precision);
        QFETCH(QString, products);
        QTemporaryDir folder;
        QVERIFY(folder.isValid());
        QFile text(folder.filePath("text.txt"));
        QVERIFY(text.open(QIODevice::WriteOnly));
        for (int i = 0; i < 1000; ++i) text.write("And God said, Let there be light: and there was light.\n");
        text.close();
        RunConfig config = default_config(ModelFamily::gpt);
        config.dataset = "text:" + text.fileName().toStdString();
        config.n_layer = 2;
        config.n_embd = 64;
        config.block_size = 32;
        config.batch_size = 16;
        config.step_size = 2;
        config.max_steps = 40;
        config.threads = 2;
        config.eval_every = 10;
        config.eval_samples = 16;
        config.gradient_checkpointing = checkpointing;
        config.prefetch = prefetch;
        config.precision = parse_precision(precision.toStdString());
        config.cpu_products = parse_cpu_products(products.toStdString());
        expect_no_allocation_in_updates_5_to_35(config, nullptr);
    }

    // A GPT's two pipeline stages on engines of their own in this process, their messages handed
    // over by copies into preallocated buffers, in both schedules' order, with the optimizer
    // step: the stages' forward and backward passes hold several micro-batches and allocate
    // nothing once the arenas' caches are warm. (Over MPI the runner adds only Open MPI's own
    // allocations, which test_zero_shards counts apart.)
    void pipeline_stages_do_not_allocate_data() {
        QTest::addColumn<QString>("schedule");
        QTest::addColumn<QString>("precision");
        QTest::newRow("gpipe fp32") << "gpipe" << "fp32";
        QTest::newRow("1f1b bf16") << "1f1b" << "bf16";
    }
    void pipeline_stages_do_not_allocate() {
        SKIP_WITHOUT_ALLOCATION_COUNTER();
        QFETCH(QString, schedule);
        QFETCH(QString, precision);
        const PipelineSchedule kind = parse_pipeline_schedule(schedule.toStdString());
        const Precision p = parse_precision(precision.toStdString());
        const ModelDesc whole = build_gpt(GptShape{4, 4, 64, 32, 65});
        const StageSplit split = split_into_stages(whole, 2);
        constexpr int64_t kMicro = 4, kSteps = 4;
        const ModelWeights weights = init_weights(whole, 3, p);
        std::vector<std::unique_ptr<ComputeEngine>> engines;
        std::vector<ModelDesc> models;
        for (int s = 0; s < 2; ++s) {
            models.push_back(stage_model(whole, split, s));
            EngineSpec spec;
            spec.model = models.back();
            spec.optimizer.kind = OptimizerKind::adamw;
            spec.precision = p;
            spec.max_micro_batch = kMicro;
            spec.max_eval_batch = kMicro;
            spec.threads = 1;
            spec.pipeline_in_flight = pipeline_in_flight(kind, 2, s, kSteps);
            engines.push_back(make_cpu_engine(spec));
            engines.back()->set_weights(stage_weights(weights, models.back()));
        }
        const int64_t per_sample = models[1].input_per_sample;
        std::vector<int32_t> tokens(static_cast<size_t>(kMicro * 32)), labels(tokens.size());
        for (size_t i = 0; i < tokens.size(); ++i) {
            tokens[i] = static_cast<int32_t>(i % 65);
            labels[i] = static_cast<int32_t>((i * 7) % 65);
        }
        // Activations and gradients in transit, per micro-batch.
        std::vector<std::vector<float>> activations(kSteps, std::vector<float>(static_cast<size_t>(kMicro * per_sample)));
        std::vector<std::vector<float>> gradients = activations;
        const std::vector<PipelineAction> first_stage = pipeline_actions(kind, 2, 0, kSteps);
        const std::vector<PipelineAction> last_stage = pipeline_actions(kind, 2, 1, kSteps);
        const bool together = pipeline_in_flight(kind, 2, 1, kSteps) == 1;
        const size_t floats = activations[0].size() * sizeof(float);
        auto update = [&](int64_t step) {
            for (auto& e : engines) e->zero_grad();
            MicroBatch batch{nullptr, labels.data(), nullptr, nullptr, kMicro, tokens.data()};
            // Each stage runs its next action as soon as the message it needs has been handed
            // over, the last stage first: the order two processes would run them in.
            std::array<bool, kSteps> activation_sent{}, gradient_sent{};
            size_t next0 = 0, next1 = 0;
            while (next0 < first_stage.size() || next1 < last_stage.size()) {
                if (next1 < last_stage.size()) {
                    const PipelineAction& a = last_stage[next1];
                    const auto j = static_cast<size_t>(a.micro_batch);
                    if (!a.forward || activation_sent[j]) {
                        MicroBatch received = batch;
                        received.tokens = nullptr;
                        received.x = engines[1]->stage_input();
                        if (a.forward) {
                            std::memcpy(engines[1]->stage_input(), activations[j].data(), floats);
                            if (together) engines[1]->forward_backward(received, kSteps * kMicro * 32, 1.0);
                            else engines[1]->stage_forward(received, a.slot, kSteps * kMicro * 32, 1.0);
                        } else if (!together) {
                            engines[1]->stage_backward(a.slot);
                        }
                        if (a.forward == together) {
                            std::memcpy(gradients[j].data(), engines[1]->stage_input_gradient(), floats);
                            gradient_sent[j] = true;
                        }
                        ++next1;
                        continue;
                    }
                }
                const PipelineAction& a = first_stage[next0];
                const auto j = static_cast<size_t>(a.micro_batch);
                if (a.forward) {
                    engines[0]->stage_forward(batch, a.slot);
                    std::memcpy(activations[j].data(), engines[0]->stage_output(), floats);
                    activation_sent[j] = true;
                } else {
                    QVERIFY(gradient_sent[j]);
                    std::memcpy(engines[0]->stage_output_gradient(), gradients[j].data(), floats);
                    engines[0]->stage_backward(a.slot);
                }
                ++next0;
            }
            for (auto& e : engines) {
                e->grad_norm_squared();
                e->optimizer_step(1e-3, 1.0, step);
            }
        };
        for (int64_t step = 1; step <= 4; ++step) update(step);
        allocations = 0;
        allocations_inside_onednn = 0;
        frees_inside_onednn = 0;
        const int64_t products = onednn_executions();
        counting = true;
        for (int64_t step = 5; step <= 12; ++step) update(step);
        counting = false;
        const long during = allocations.load();
        QVERIFY2(during == 0, qPrintable(QString("%1 allocations during 8 pipelined updates").arg(during)));
        QVERIFY(allocations_inside_onednn.load() <= 7 * (onednn_executions() - products));
        QCOMPARE(frees_inside_onednn.load(), allocations_inside_onednn.load());
    }
};

QTEST_APPLESS_MAIN(TestSteadyStateAllocation)
#include "test_steady_state_allocation.moc"
