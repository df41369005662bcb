// Pipeline stages (model/pipeline_stages.hpp, parallel/pipeline_schedule.hpp) in one process:
// where a model may be cut and how the split balances FLOPs; the schedules' order; and a
// model's stages, each on an engine of its own and run in GPipe's and 1F1B's order with their
// messages handed over by hand, give the gradients and the update one engine gives for the
// whole model. Each stage's allocator peak equals its plan, and 1F1B holds fewer micro-batches'
// activations than GPipe once there are more micro-batches than stages. Over MPI the same
// stages run in tests/mpi/.
#include <QtTest>

#include <cmath>
#include <cstring>
#include <deque>
#include <map>
#include <random>
#include <set>

#include "backend/compute_engine.hpp"
#include "error_expectations.hpp"
#include "model/build_model.hpp"
#include "model/init_weights.hpp"
#include "model/pipeline_stages.hpp"
#include "parallel/pipeline_schedule.hpp"
#include "peak_equals_plan.hpp"
#include "trainbench/error.hpp"

using namespace trainbench;

namespace {

ModelDesc small_gpt() { return build_gpt(GptShape{4, 2, 16, 8, 11}); }
ModelDesc small_mlp() { return build_mlp({6, 20, 20, 20, 4}, Activation::relu, 4); }

// An update's micro-batches: inputs and labels for every sample, split into counts.
struct Update {
    std::vector<int64_t> counts;
    std::vector<std::vector<float>> x;
    std::vector<std::vector<int32_t>> tokens, labels;
    int64_t samples() const {
        int64_t n = 0;
        for (int64_t c : counts) n += c;
        return n;
    }
};

Update make_update(const ModelDesc& model, const std::vector<int64_t>& counts, uint32_t seed) {
    std::mt19937 rng(seed);
    Update u;
    u.counts = counts;
    for (int64_t n : counts) {
        if (model.token_input) {
            std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(model.classes) - 1);
            std::vector<int32_t> t(static_cast<size_t>(n * model.input_per_sample)), l(t.size());
            for (auto& v : t) v = token(rng);
            for (auto& v : l) v = token(rng);
            u.tokens.push_back(t);
            u.labels.push_back(l);
            u.x.emplace_back();
        } else {
            std::normal_distribution<float> value(0.0f, 1.0f);
            std::uniform_int_distribution<int32_t> label(0, static_cast<int32_t>(model.classes) - 1);
            std::vector<float> x(static_cast<size_t>(n * model.input_per_sample));
            std::vector<int32_t> l(static_cast<size_t>(n));
            for (auto& v : x) v = value(rng);
            for (auto& v : l) v = label(rng);
            u.x.push_back(x);
            u.labels.push_back(l);
            u.tokens.emplace_back();
        }
    }
    return u;
}

MicroBatch batch_of(const Update& u, size_t j, const float* x = nullptr) {
    MicroBatch b;
    b.count = u.counts[j];
    b.x = x ? x : u.x[j].data();
    b.labels = u.labels[j].data();
    if (!u.tokens[j].empty()) b.tokens = u.tokens[j].data();
    return b;
}

EngineSpec spec_for(const ModelDesc& model, Precision precision, bool checkpointing, int in_flight) {
    EngineSpec spec;
    spec.model = model;
    spec.optimizer.kind = OptimizerKind::adamw;
    spec.precision = precision;
    spec.max_micro_batch = 4;
    spec.max_eval_batch = 4;
    spec.sample_counts = {1, 2, 3};
    spec.gradient_checkpointing = checkpointing;
    spec.threads = 1;
    spec.pipeline_in_flight = in_flight;
    return spec;
}

double normaliser(const ModelDesc& model, const Update& u) {
    return static_cast<double>(u.samples() * model.loss_terms_per_sample);
}

struct Outcome {
    double loss = 0.0;
    std::map<std::string, std::vector<float>> gradients, weights;
};

void collect(const ModelWeights& from, std::map<std::string, std::vector<float>>& into, bool add) {
    for (const NamedTensor& t : from.tensors) {
        auto [it, fresh] = into.insert({t.name, t.data});
        if (!fresh && add)
            for (size_t i = 0; i < t.data.size(); ++i) it->second[i] += t.data[i];
    }
}

Outcome run_whole(const ModelDesc& model, const ModelWeights& weights, const Update& u, Precision precision,
                  bool checkpointing) {
    auto engine = make_cpu_engine(spec_for(model, precision, checkpointing, 1));
    engine->set_weights(weights);
    engine->zero_grad();
    Outcome out;
    for (size_t j = 0; j < u.counts.size(); ++j) out.loss += engine->forward_backward(batch_of(u, j), normaliser(model, u), 1.0);
    collect(engine->gradients(), out.gradients, false);
    engine->optimizer_step(1e-2, 1.0, 1);
    collect(engine->weights(), out.weights, false);
    return out;
}

// The stages on engines of their own, each running its schedule's actions as soon as the
// message it needs has been handed over and the buffer it writes has been taken: what the
// processes of a pipeline do over MPI (train/pipeline_runner.cpp), in one.
struct PipelineRun {
    Outcome outcome;
    std::vector<std::unique_ptr<ComputeEngine>> engines;
    std::vector<EngineSpec> specs;
};

PipelineRun run_pipeline(const ModelDesc& model, const ModelWeights& weights, const Update& u, Precision precision,
                         bool checkpointing, int stages, PipelineSchedule schedule) {
    const StageSplit split = split_into_stages(model, stages);
    const auto m = static_cast<int64_t>(u.counts.size());
    PipelineRun run;
    std::vector<std::vector<PipelineAction>> actions;
    std::vector<ModelDesc> models;
    for (int s = 0; s < stages; ++s) {
        models.push_back(stage_model(model, split, s));
        run.specs.push_back(spec_for(models.back(), precision, checkpointing, pipeline_in_flight(schedule, stages, s, m)));
        run.engines.push_back(make_cpu_engine(run.specs.back()));
        run.engines.back()->set_weights(stage_weights(weights, models.back()));
        run.engines.back()->zero_grad();
        actions.push_back(pipeline_actions(schedule, stages, s, m));
    }
    // Messages in transit: to stage s, micro-batch j.
    std::map<std::pair<int, int64_t>, std::vector<float>> activations, gradients;
    std::vector<size_t> next(static_cast<size_t>(stages), 0);
    auto copy = [](const float* from, int64_t floats) { return std::vector<float>(from, from + floats); };
    bool progress = true;
    while (progress) {
        progress = false;
        for (int s = 0; s < stages; ++s) {
            ComputeEngine& e = *run.engines[static_cast<size_t>(s)];
            const ModelDesc& sm = models[static_cast<size_t>(s)];
            while (next[static_cast<size_t>(s)] < actions[static_cast<size_t>(s)].size()) {
                const PipelineAction a = actions[static_cast<size_t>(s)][next[static_cast<size_t>(s)]];
                const auto j = static_cast<size_t>(a.micro_batch);
                const int64_t n = u.counts[j];
                const bool last = s + 1 == stages;
                // The last stage holding one micro-batch at a time runs its backward with its
                // forward; holding several (GPipe), apart.
                const bool together = last && run.specs[static_cast<size_t>(s)].pipeline_in_flight == 1;
                const bool writes_input_gradient = s > 0 && (a.forward ? together : true);
                // A message's buffer is written again only once the stage it went to has taken
                // the message before (a send completes when it is received).
                if (a.forward && !last && activations.count({s + 1, a.micro_batch - 1})) break;
                if (writes_input_gradient && gradients.count({s - 1, a.micro_batch - 1})) break;
                if (a.forward) {
                    if (s > 0) {
                        auto it = activations.find({s, a.micro_batch});
                        if (it == activations.end()) break;
                        std::memcpy(e.stage_input(), it->second.data(), it->second.size() * sizeof(float));
                        activations.erase(it);
                    }
                    const MicroBatch b = batch_of(u, j, s > 0 ? e.stage_input() : nullptr);
                    if (together) {
                        run.outcome.loss += e.forward_backward(b, normaliser(model, u), 1.0);
                    } else {
                        run.outcome.loss += e.stage_forward(b, a.slot, normaliser(model, u), 1.0);
                        if (!last) {
                            const int out = sm.ops.back().inputs[0];
                            activations[{s + 1, a.micro_batch}] =
                                copy(e.stage_output(), n * sm.tensors[static_cast<size_t>(out)].per_sample);
                        }
                    }
                } else if (!together) {
                    if (!last) {
                        auto it = gradients.find({s, a.micro_batch});
                        if (it == gradients.end()) break;
                        std::memcpy(e.stage_output_gradient(), it->second.data(), it->second.size() * sizeof(float));
                        gradients.erase(it);
                    }
                    e.stage_backward(a.slot);
                }
                if (writes_input_gradient) gradients[{s - 1, a.micro_batch}] = copy(e.stage_input_gradient(), n * sm.input_per_sample);
                ++next[static_cast<size_t>(s)];
                progress = true;
            }
        }
    }
    for (int s = 0; s < stages; ++s)
        if (next[static_cast<size_t>(s)] != actions[static_cast<size_t>(s)].size())
            throw std::runtime_error("the schedule deadlocked at stage " + std::to_string(s));
    // The tied embedding's gradient is the sum of the first and last stage's parts, as the
    // pipeline sums them once per update.
    for (auto& e : run.engines) collect(e->gradients(), run.outcome.gradients, true);
    return run;
}

double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < a.size(); ++i) {
        diff += std::pow(static_cast<double>(a[i]) - b[i], 2);
        norm += std::pow(static_cast<double>(b[i]), 2);
    }
    return norm > 0.0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

}  // namespace

class PipelineStagesTest : public QObject {
    Q_OBJECT

private slots:
    void cutsBetweenBlocksAndBeforeLayers() {
        const ModelDesc gpt = small_gpt();
        QCOMPARE(max_pipeline_stages(gpt), 4);  // one per block
        for (int cut : pipeline_cut_points(gpt)) QCOMPARE(gpt.ops[static_cast<size_t>(cut)].kind, OpKind::layernorm);
        const ModelDesc mlp = small_mlp();
        QCOMPARE(max_pipeline_stages(mlp), 4);  // one per Linear layer
        for (int cut : pipeline_cut_points(mlp)) QCOMPARE(mlp.ops[static_cast<size_t>(cut)].kind, OpKind::linear);
        QCOMPARE(max_pipeline_stages(build_mlp({6, 4}, Activation::relu, 4)), 1);
    }

    // The split minimises the largest stage's FLOPs: no other choice of cut points does better.
    void splitBalancesFlops_data() {
        QTest::addColumn<bool>("gpt");
        QTest::addColumn<int>("stages");
        for (int p = 1; p <= 4; ++p) {
            QTest::addRow("gpt, %d stages", p) << true << p;
            QTest::addRow("mlp, %d stages", p) << false << p;
        }
    }
    void splitBalancesFlops() {
        QFETCH(bool, gpt);
        QFETCH(int, stages);
        const ModelDesc model = gpt ? build_gpt(GptShape{4, 2, 16, 8, 300}) : build_mlp({6, 200, 20, 20, 4}, Activation::relu, 4);
        const StageSplit split = split_into_stages(model, stages);
        QCOMPARE(split.stages(), stages);
        QCOMPARE(split.first_op.front(), 0);
        QCOMPARE(split.first_op.back(), static_cast<int>(model.ops.size()));
        double total = 0.0;
        for (int o = 0; o < static_cast<int>(model.ops.size()); ++o) total += op_forward_flops(model, o);
        double largest = 0.0, summed = 0.0;
        for (double f : split.forward_flops) {
            largest = std::max(largest, f);
            summed += f;
        }
        QCOMPARE(summed, total);
        // Every choice of stages - 1 cut points, brute force.
        const std::vector<int> cuts = pipeline_cut_points(model);
        double best = std::numeric_limits<double>::infinity();
        const int n = static_cast<int>(cuts.size());
        for (int mask = 0; mask < (1 << n); ++mask) {
            if (__builtin_popcount(static_cast<unsigned>(mask)) != stages - 1) continue;
            std::vector<int> bounds{0};
            for (int i = 0; i < n; ++i)
                if (mask & (1 << i)) bounds.push_back(cuts[static_cast<size_t>(i)]);
            bounds.push_back(static_cast<int>(model.ops.size()));
            double worst = 0.0;
            for (size_t b = 0; b + 1 < bounds.size(); ++b) {
                double f = 0.0;
                for (int o = bounds[b]; o < bounds[b + 1]; ++o) f += op_forward_flops(model, o);
                worst = std::max(worst, f);
            }
            best = std::min(best, worst);
        }
        QCOMPARE(largest, best);
        if (gpt) {  // the embedding on the first stage, the head on the last
            QCOMPARE(stage_model(model, split, 0).ops.front().kind, OpKind::embedding);
            QCOMPARE(stage_model(model, split, stages - 1).ops.back().kind, OpKind::cross_entropy);
        }
    }

    void moreStagesThanBlocksIsRefused() {
        EXPECT_ERROR_CONTAINS(split_into_stages(small_gpt(), 5), "use at most 4");
        EXPECT_ERROR_CONTAINS(split_into_stages(small_gpt(), 5), "4 blocks");
        EXPECT_ERROR_CONTAINS(split_into_stages(small_mlp(), 7), "4 layers");
    }

    // Each stage holds what its ops read: the tied embedding on the first and the last stage of a
    // GPT, every other parameter on exactly one.
    void stagesHoldTheirParametersOnce() {
        const ModelDesc gpt = small_gpt();
        const StageSplit split = split_into_stages(gpt, 3);
        std::map<std::string, int> holders;
        for (int s = 0; s < 3; ++s) {
            const ModelDesc stage = stage_model(gpt, split, s);
            QCOMPARE(stage.input_gradient, s > 0);
            QCOMPARE(stage.ops.back().kind, s < 2 ? OpKind::pipeline_output : OpKind::cross_entropy);
            for (const ParamDesc& p : stage.params) ++holders[p.name];
        }
        QCOMPARE(static_cast<int>(holders.size()), static_cast<int>(gpt.params.size()));
        for (const auto& [name, count] : holders) QCOMPARE(count, name == "transformer.wte.weight" ? 2 : 1);
    }

    void schedulesRunEveryMicroBatchOnceInOrder_data() {
        QTest::addColumn<int>("schedule");
        QTest::addColumn<int>("stages");
        QTest::addColumn<int>("micro");
        for (int sched = 0; sched < 2; ++sched)
            for (int p : {2, 3, 4})
                for (int m : {1, 2, 3, 8}) QTest::addRow("%s P%d m%d", sched ? "1f1b" : "gpipe", p, m) << sched << p << m;
    }
    void schedulesRunEveryMicroBatchOnceInOrder() {
        QFETCH(int, schedule);
        QFETCH(int, stages);
        QFETCH(int, micro);
        const auto kind = schedule ? PipelineSchedule::one_f_one_b : PipelineSchedule::gpipe;
        for (int s = 0; s < stages; ++s) {
            const std::vector<PipelineAction> actions = pipeline_actions(kind, stages, s, micro);
            QCOMPARE(static_cast<int>(actions.size()), 2 * micro);
            int64_t forwards = 0, backwards = 0;
            int in_flight = 0, most = 0;
            std::vector<int> slot_of(static_cast<size_t>(micro), -1);
            std::set<int> busy;
            for (const PipelineAction& a : actions) {
                if (a.forward) {
                    QCOMPARE(a.micro_batch, forwards++);
                    QVERIFY(!busy.count(a.slot));
                    busy.insert(a.slot);
                    most = std::max(most, ++in_flight);
                } else {
                    QCOMPARE(a.micro_batch, backwards++);  // gradients accumulate in order
                    QVERIFY(a.micro_batch < forwards);
                    busy.erase(a.slot);
                    --in_flight;
                }
            }
            const int expected = !schedule ? micro : s + 1 == stages ? 1 : std::min(stages - s, micro);
            QCOMPARE(most, expected);
            QCOMPARE(pipeline_in_flight(kind, stages, s, micro), expected);
        }
        QCOMPARE(gpipe_bubble_fraction(stages, micro), double(stages - 1) / double(micro + stages - 1));
    }

    // The stages' update is the whole model's: bit for bit where the same kernels run on the same
    // values, within float rounding where the split changes a sum's order (the tied embedding's
    // two parts, added once per update instead of per micro-batch).
    void stagesComputeTheWholeModelsUpdate_data() {
        QTest::addColumn<bool>("gpt");
        QTest::addColumn<int>("stages");
        QTest::addColumn<int>("schedule");
        QTest::addColumn<int>("precision");
        QTest::addColumn<bool>("checkpointing");
        for (bool gpt : {true, false})
            for (int p : {2, 3})
                for (int sched = 0; sched < 2; ++sched) {
                    const char* model = gpt ? "gpt" : "mlp";
                    const char* name = sched ? "1f1b" : "gpipe";
                    QTest::addRow("%s P%d %s fp32", model, p, name) << gpt << p << sched << int(Precision::fp32) << false;
                    QTest::addRow("%s P%d %s bf16", model, p, name) << gpt << p << sched << int(Precision::bf16) << false;
                    QTest::addRow("%s P%d %s fp32 checkpointing", model, p, name) << gpt << p << sched << int(Precision::fp32) << true;
                }
    }
    void stagesComputeTheWholeModelsUpdate() {
        QFETCH(bool, gpt);
        QFETCH(int, stages);
        QFETCH(int, schedule);
        QFETCH(int, precision);
        QFETCH(bool, checkpointing);
        const ModelDesc model = gpt ? small_gpt() : small_mlp();
        const auto p = static_cast<Precision>(precision);
        const ModelWeights weights = init_weights(model, 7, p);
        // Five micro-batches, the last partial: more than the stages, so 1F1B's steady state runs.
        const Update u = make_update(model, {4, 4, 4, 4, 3}, 11);
        const Outcome whole = run_whole(model, weights, u, p, checkpointing);
        PipelineRun piped = run_pipeline(model, weights, u, p, checkpointing, stages,
                                         schedule ? PipelineSchedule::one_f_one_b : PipelineSchedule::gpipe);
        QCOMPARE(piped.outcome.loss, whole.loss);
        QCOMPARE(piped.outcome.gradients.size(), whole.gradients.size());
        for (const auto& [name, expected] : whole.gradients) {
            const std::vector<float>& got = piped.outcome.gradients.at(name);
            const double difference = relative_difference(got, expected);
            const bool tied = name == "transformer.wte.weight" || name == "lm_head.weight";
            QVERIFY2(tied ? difference < 1e-6 : got == expected,
                     qPrintable(QString::fromStdString(name) + ": relative difference " + QString::number(difference)));
        }
        // Each stage's allocator peak is its plan: its parameters, gradients and state, its
        // micro-batches in flight, its messages.
        for (size_t s = 0; s < piped.engines.size(); ++s) CHECK_PEAK_EQUALS_PLAN(*piped.engines[s], plan_cpu_engine_memory(piped.specs[s]));
    }

    void oneFOneBHoldsFewerActivationsThanGPipe() {
        const ModelDesc model = small_gpt();
        const ModelWeights weights = init_weights(model, 7, Precision::fp32);
        const Update u = make_update(model, {4, 4, 4, 4, 4, 4}, 3);
        const PipelineRun gpipe = run_pipeline(model, weights, u, Precision::fp32, false, 2, PipelineSchedule::gpipe);
        const PipelineRun f1b = run_pipeline(model, weights, u, Precision::fp32, false, 2, PipelineSchedule::one_f_one_b);
        const auto activations = static_cast<size_t>(MemoryCategory::activations);
        const int64_t gpipe_peak = gpipe.engines[0]->memory().peak[activations];
        const int64_t f1b_peak = f1b.engines[0]->memory().peak[activations];
        QVERIFY2(f1b_peak * 2 < gpipe_peak, qPrintable(QString("1F1B %1 bytes, GPipe %2").arg(f1b_peak).arg(gpipe_peak)));
        QCOMPARE(f1b.outcome.loss, gpipe.outcome.loss);
    }
};

QTEST_APPLESS_MAIN(PipelineStagesTest)
#include "test_pipeline_stages.moc"
