// The optimizers against torch.optim trajectories (tests/fixtures/make_optimizer_fixtures.py),
// plus the properties the training loop relies on: grad_multiplier, thread-count independence,
// state layout.
#include <QtTest/QtTest>


#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "optim/gradient_norm.hpp"
#include "optim/optimizer_step.hpp"
#include "parallel/worker_team.hpp"
#include "precision/half_float.hpp"
#include "trainbench/run_config.hpp"

using namespace trainbench;
using nlohmann::json;

namespace {

const json& optimizer_fixtures() {
    static const json fixtures = [] {
        std::ifstream in(std::string(TRAINBENCH_FIXTURES_DIR) + "/optim/optimizers.json");
        if (!in) throw std::runtime_error("cannot open tests/fixtures/optim/optimizers.json");
        return json::parse(in);
    }();
    return fixtures;
}

// Only the keyword arguments the fixture passed to torch are set; the rest must resolve to
// torch's defaults through OptimizerConfig::resolved_*().
OptimizerConfig config_from_torch_kwargs(const std::string& kind, const json& kwargs) {
    OptimizerConfig config;
    config.kind = parse_optimizer(kind);
    if (kwargs.contains("lr")) config.lr = kwargs["lr"].get<double>();
    if (kwargs.contains("weight_decay")) config.weight_decay = kwargs["weight_decay"].get<double>();
    if (kwargs.contains("eps")) config.eps = kwargs["eps"].get<double>();
    if (kwargs.contains("momentum")) config.momentum = kwargs["momentum"].get<double>();
    if (kwargs.contains("dampening")) config.dampening = kwargs["dampening"].get<double>();
    if (kwargs.contains("nesterov")) config.nesterov = kwargs["nesterov"].get<bool>();
    if (kwargs.contains("betas")) {
        config.beta1 = kwargs["betas"][0].get<double>();
        config.beta2 = kwargs["betas"][1].get<double>();
    }
    if (kwargs.contains("alpha")) config.alpha = kwargs["alpha"].get<double>();
    if (kwargs.contains("centered")) config.centered = kwargs["centered"].get<bool>();
    if (kwargs.contains("lr_decay")) config.lr_decay = kwargs["lr_decay"].get<double>();
    if (kwargs.contains("initial_accumulator_value"))
        config.initial_accumulator_value = kwargs["initial_accumulator_value"].get<double>();
    return config;
}

struct Trajectory {
    OptimizerConfig config;
    std::vector<float> params;
    std::vector<float> state;
};

Trajectory start(const OptimizerConfig& config, std::vector<float> params) {
    Trajectory t{config, std::move(params), {}};
    const int64_t n = static_cast<int64_t>(t.params.size());
    t.state.assign(static_cast<size_t>(n * optimizer_state_slots(config)), -1.0f);
    optimizer_init_state(config, t.state.data(), n);
    return t;
}

void step(Trajectory& t, std::vector<float> grads, int64_t step_index, double multiplier = 1.0) {
    optimizer_step_cpu(t.config, t.params.data(), grads.data(), t.state.data(),
                       static_cast<int64_t>(t.params.size()), t.config.resolved_lr(), multiplier,
                       step_index);
}

// Deterministic values in [-scale, scale) without <random>'s implementation-defined streams.
std::vector<float> sequence(int64_t n, uint32_t seed, float scale) {
    std::vector<float> values(static_cast<size_t>(n));
    uint32_t x = seed * 2654435761u + 12345u;
    for (auto& v : values) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        v = scale * (static_cast<float>(x >> 8) / 8388608.0f - 1.0f);
    }
    return values;
}

std::vector<OptimizerConfig> every_rule() {
    std::vector<OptimizerConfig> configs;
    auto add = [&](OptimizerKind kind, auto&& tweak) {
        OptimizerConfig c;
        c.kind = kind;
        tweak(c);
        configs.push_back(c);
    };
    add(OptimizerKind::sgd, [](OptimizerConfig& c) { c.lr = 0.1; });
    add(OptimizerKind::sgd, [](OptimizerConfig& c) {
        c.lr = 0.05; c.momentum = 0.9; c.dampening = 0.2; c.weight_decay = 0.01; });
    add(OptimizerKind::sgd, [](OptimizerConfig& c) { c.momentum = 0.9; c.nesterov = true; });
    add(OptimizerKind::adam, [](OptimizerConfig& c) { c.weight_decay = 0.01; });
    add(OptimizerKind::adamw, [](OptimizerConfig&) {});
    add(OptimizerKind::rmsprop, [](OptimizerConfig&) {});
    add(OptimizerKind::rmsprop, [](OptimizerConfig& c) {
        c.centered = true; c.momentum = 0.5; c.weight_decay = 0.01; });
    add(OptimizerKind::adagrad, [](OptimizerConfig& c) {
        c.lr_decay = 0.01; c.initial_accumulator_value = 0.1; });
    return configs;
}

QString describe(const OptimizerConfig& c) {
    return QString::fromStdString(to_string(c.kind)) +
           QStringLiteral(" momentum=%1 centered=%2 nesterov=%3 wd=%4")
               .arg(c.momentum).arg(c.centered).arg(c.nesterov).arg(c.resolved_weight_decay());
}

}  // namespace

class TestOptimizers : public QObject {
    Q_OBJECT

private slots:
    void matches_torch_data() {
        QTest::addColumn<int>("case_index");
        const json& cases = optimizer_fixtures()["cases"];
        QVERIFY(cases.size() >= 9);
        for (size_t i = 0; i < cases.size(); ++i) {
            const std::string name = cases[i]["name"].get<std::string>();
            QTest::newRow(name.c_str()) << static_cast<int>(i);
        }
    }

    void matches_torch() {
        QFETCH(int, case_index);
        const json& fixture = optimizer_fixtures()["cases"][static_cast<size_t>(case_index)];
        const OptimizerConfig config = config_from_torch_kwargs(
            fixture["kind"].get<std::string>(), fixture["torch_kwargs"]);
        Trajectory t = start(config, fixture["initial_params"].get<std::vector<float>>());
        const json& grads = fixture["gradients"];
        const json& expected_after = fixture["params_after_step"];
        QCOMPARE(grads.size(), expected_after.size());
        for (size_t s = 0; s < grads.size(); ++s) {
            step(t, grads[s].get<std::vector<float>>(), static_cast<int64_t>(s + 1));
            const auto expected = expected_after[s].get<std::vector<double>>();
            QCOMPARE(t.params.size(), expected.size());
            for (size_t i = 0; i < expected.size(); ++i) {
                // float32 rounding of a handful of ops per step; the floor keeps entries that
                // pass near zero from demanding more than float can hold.
                const double tolerance = 1e-6 * std::max(std::abs(expected[i]), 0.1);
                if (std::abs(t.params[i] - expected[i]) > tolerance) {
                    QFAIL(qPrintable(QStringLiteral("step %1, element %2: got %3, torch %4")
                                         .arg(s + 1).arg(i).arg(t.params[i], 0, 'g', 9)
                                         .arg(expected[i], 0, 'g', 9)));
                }
            }
        }
    }

    // Unscaling and clipping reach the optimizer as grad_multiplier. The update equals the plain
    // one on gradients multiplied and rounded to float first, as torch's unscale_ and
    // clip_grad_norm_ leave them, bit for bit: 0.5 is exact, 0.3 is not (multiplied inside the
    // rule's expression, the product would be contracted into an FMA with the weight decay term
    // and the decayed rules would differ in the last bit). Long enough for several of the
    // update's blocks and a tail.
    void grad_multiplier_equals_rounding_the_gradients_first() {
        const int64_t n = 10'007;
        const auto initial = sequence(n, 2, 2.0f);
        for (const double multiplier : {0.5, 0.3})
            for (const OptimizerConfig& config : every_rule()) {
                Trajectory plain = start(config, initial);
                Trajectory scaled = start(config, initial);
                for (int64_t s = 1; s <= 3; ++s) {
                    const auto grads = sequence(n, 200 + static_cast<uint32_t>(s), 1.0f);
                    std::vector<float> rounded(grads);
                    for (auto& g : rounded) g = g * static_cast<float>(multiplier);
                    step(plain, rounded, s);
                    step(scaled, grads, s, multiplier);
                }
                const QString what = describe(config) + QString(", multiplier %1").arg(multiplier);
                QVERIFY2(std::memcmp(plain.params.data(), scaled.params.data(), sizeof(float) * static_cast<size_t>(n)) == 0,
                         qPrintable(what));
                QVERIFY2(plain.state == scaled.state, qPrintable(what));
            }
    }

    // The multiplier (loss-scale undo x clipping) scales the gradients as the rule reads them;
    // the buffer stays as the backward left it (scaling it in place cost a write of it).
    void grad_multiplier_scales_what_the_rule_reads_not_the_buffer() {
        OptimizerConfig config;
        config.kind = OptimizerKind::sgd;
        config.lr = 1.0;
        std::vector<float> params = {0.0f, 0.0f};
        const std::vector<float> grads = {1.0f, -3.0f};
        optimizer_step_cpu(config, params.data(), grads.data(), nullptr, 2, 1.0, 0.25, 1);
        QCOMPARE(grads, (std::vector<float>{1.0f, -3.0f}));
        QCOMPARE(params, (std::vector<float>{-0.25f, 0.75f}));
    }

    // A 16-bit run's step rounds the working copy as it goes: the ranges given (parameters its
    // fp32 products read) get the rounded values in fp32 and keep their old codes, the rest get
    // new codes; exactly the scalar rounding's values, on any thread count (ranges across blocks
    // and chunks, a gap and a short range between them; the sanitizer stage would see a write
    // past one).
    void the_step_writes_the_working_copy_and_its_widened_ranges() {
        const int64_t n = 20'011;
        const uint16_t untouched = 0x1234;
        const int default_threads = WorkerTeam::shared().members();
        OptimizerConfig config;
        config.kind = OptimizerKind::adamw;
        for (Precision precision : {Precision::bf16, Precision::fp16})
            for (int threads : {1, 2, 3}) {
                WorkerTeam::shared().resize(threads);
                std::vector<float> params = sequence(n, 3, 2.0f), grads = sequence(n, 4, 1.0f);
                std::vector<float> state(static_cast<size_t>(2 * n), 0.0f);
                std::vector<uint16_t> codes(static_cast<size_t>(n), untouched);
                std::vector<float> first(5000, -1.0f), second(7, -1.0f), third(6000, -1.0f);
                const std::vector<WidenedParameter> widened = {{.begin = 0, .end = 5000, .values = first.data()},
                                                               {.begin = 5000, .end = 5007, .values = second.data()},
                                                               {.begin = 14000, .end = 20000, .values = third.data()}};
                const WorkingCopy copy{.precision = precision, .codes = codes.data(), .widened = widened};
                optimizer_step_cpu(config, params.data(), grads.data(), state.data(), n, 1e-3, 1.0, 1, n, &copy);
                const QString where = QString(" on %1 threads, %2").arg(threads).arg(QString::fromStdString(to_string(precision)));
                std::vector<uint16_t> want_codes(static_cast<size_t>(n));
                store_16bit(precision, params.data(), want_codes.data(), n);
                for (int64_t i = 0; i < n; ++i) {
                    const bool in_widened = i < 5007 || (i >= 14000 && i < 20000);
                    const uint16_t want = in_widened ? untouched : want_codes[static_cast<size_t>(i)];
                    if (codes[static_cast<size_t>(i)] != want)
                        QFAIL(qPrintable(QString("code %1 is %2, want %3").arg(i).arg(codes[static_cast<size_t>(i)]).arg(want) + where));
                }
                for (const WidenedParameter& w : widened) {
                    std::vector<float> want(static_cast<size_t>(w.end - w.begin));
                    load_16bit(precision, want_codes.data() + w.begin, want.data(), w.end - w.begin);
                    QVERIFY2(std::memcmp(want.data(), w.values, want.size() * sizeof(float)) == 0,
                             qPrintable(QString("[%1, %2)").arg(w.begin).arg(w.end) + where));
                }
            }
        WorkerTeam::shared().resize(default_threads);
    }

    void result_does_not_depend_on_thread_count() {
        // Odd length, so every split puts chunk boundaries inside SIMD blocks.
        const int64_t n = 100'003;
        const auto initial = sequence(n, 7, 3.0f);
        const int default_threads = WorkerTeam::shared().members();
        for (const OptimizerConfig& config : every_rule()) {
            std::vector<Trajectory> runs;
            for (int threads : {1, 2, 3, 7}) {
                WorkerTeam::shared().resize(threads);
                Trajectory t = start(config, initial);
                for (int64_t s = 1; s <= 3; ++s)
                    step(t, sequence(n, 50 + static_cast<uint32_t>(s), 1.5f), s, 0.75);
                runs.push_back(std::move(t));
            }
            for (size_t r = 1; r < runs.size(); ++r) {
                QVERIFY2(std::memcmp(runs[0].params.data(), runs[r].params.data(),
                                     sizeof(float) * static_cast<size_t>(n)) == 0,
                         qPrintable(describe(config)));
                QVERIFY2(runs[0].state == runs[r].state, qPrintable(describe(config)));
            }
        }
        WorkerTeam::shared().resize(default_threads);
    }

    // The norm every update reports and clips by: the exact sum of squares to double rounding,
    // with the same bits on any thread count, for lengths that leave chunks shorter than its SIMD
    // lanes and tails after them.
    void gradient_norm_is_the_sum_of_squares_on_any_thread_count() {
        const int default_threads = WorkerTeam::shared().members();
        for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{31}, int64_t{63}, int64_t{64}, int64_t{65}, int64_t{2047},
                          int64_t{100'003}}) {
            const std::vector<float> grads = sequence(n, 11, 2.5f);
            long double reference = 0.0L;
            for (float g : grads) reference += static_cast<long double>(g) * g;
            std::vector<double> results;
            for (int threads : {1, 2, 3, 7}) {
                WorkerTeam::shared().resize(threads);
                results.push_back(gradient_norm_squared(grads.data(), n));
            }
            const double tolerance = 1e-14 * static_cast<double>(reference);
            QVERIFY2(std::fabs(results[0] - static_cast<double>(reference)) <= tolerance,
                     qPrintable(QString("n %1: %2 against %3").arg(n).arg(results[0], 0, 'g', 17)
                                    .arg(static_cast<double>(reference), 0, 'g', 17)));
            for (double r : results) QVERIFY2(std::memcmp(&r, &results[0], sizeof r) == 0, qPrintable(QString("n %1").arg(n)));
        }
        WorkerTeam::shared().resize(default_threads);
    }

    void state_layout_follows_torch() {
        OptimizerConfig c;
        c.kind = OptimizerKind::sgd;
        QCOMPARE(optimizer_state_slots(c), 0);
        c.momentum = 0.9;
        QCOMPARE(optimizer_state_slots(c), 1);
        QCOMPARE(QString(optimizer_state_name(c, 0)), QString("momentum_buffer"));

        for (OptimizerKind kind : {OptimizerKind::adam, OptimizerKind::adamw}) {
            c = {};
            c.kind = kind;
            QCOMPARE(optimizer_state_slots(c), 2);
            QCOMPARE(QString(optimizer_state_name(c, 0)), QString("exp_avg"));
            QCOMPARE(QString(optimizer_state_name(c, 1)), QString("exp_avg_sq"));
        }

        c = {};
        c.kind = OptimizerKind::rmsprop;
        QCOMPARE(optimizer_state_slots(c), 1);
        QCOMPARE(QString(optimizer_state_name(c, 0)), QString("square_avg"));
        c.centered = true;
        QCOMPARE(optimizer_state_slots(c), 2);
        QCOMPARE(QString(optimizer_state_name(c, 1)), QString("grad_avg"));
        c.momentum = 0.5;
        QCOMPARE(optimizer_state_slots(c), 3);
        QCOMPARE(QString(optimizer_state_name(c, 1)), QString("momentum_buffer"));
        QCOMPARE(QString(optimizer_state_name(c, 2)), QString("grad_avg"));
        QVERIFY_THROWS_EXCEPTION(std::out_of_range, optimizer_state_name(c, 3));

        c = {};
        c.kind = OptimizerKind::adagrad;
        QCOMPARE(optimizer_state_slots(c), 1);
        QCOMPARE(QString(optimizer_state_name(c, 0)), QString("sum"));
    }

    void init_state_sets_adagrad_accumulator_and_zeroes_the_rest() {
        OptimizerConfig c;
        c.kind = OptimizerKind::adagrad;
        c.initial_accumulator_value = 0.3;
        std::vector<float> state(5, -1.0f);
        optimizer_init_state(c, state.data(), 5);
        QCOMPARE(state, std::vector<float>(5, 0.3f));

        c = {};
        c.kind = OptimizerKind::rmsprop;
        c.momentum = 0.9;
        c.centered = true;
        state.assign(15, -1.0f);
        optimizer_init_state(c, state.data(), 5);
        QCOMPARE(state, std::vector<float>(15, 0.0f));
    }
};

QTEST_APPLESS_MAIN(TestOptimizers)
#include "test_optimizers.moc"
