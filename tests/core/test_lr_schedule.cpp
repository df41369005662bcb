// learning_rate_at against torch.optim.lr_scheduler (tests/fixtures/make_optimizer_fixtures.py)
// and at the updates where each shape has a known value.
#include <QtTest/QtTest>

#include <cmath>
#include <fstream>
#include <numbers>
#include <string>

#include <nlohmann/json.hpp>

#include "optim/lr_schedule.hpp"
#include "trainbench/error.hpp"
#include "trainbench/run_config.hpp"

using namespace trainbench;
using nlohmann::json;

namespace {

const json& schedule_fixtures() {
    static const json fixtures = [] {
        std::ifstream in(std::string(TRAINBENCH_FIXTURES_DIR) + "/optim/lr_schedules.json");
        if (!in) throw std::runtime_error("cannot open tests/fixtures/optim/lr_schedules.json");
        return json::parse(in);
    }();
    return fixtures;
}

ScheduleConfig schedule(ScheduleKind kind, int64_t warmup = 0, double min_lr = 0.0) {
    ScheduleConfig s;
    s.kind = kind;
    s.warmup_steps = warmup;
    s.min_lr = min_lr;
    return s;
}

bool close(double actual, double expected) {
    return std::abs(actual - expected) <= 1e-12 * std::max(std::abs(expected), 1e-3);
}

}  // namespace

class TestLrSchedule : public QObject {
    Q_OBJECT

private slots:
    void matches_torch_schedulers_data() {
        QTest::addColumn<int>("case_index");
        const json& cases = schedule_fixtures()["cases"];
        QVERIFY(cases.size() >= 8);
        for (size_t i = 0; i < cases.size(); ++i)
            QTest::newRow(cases[i]["name"].get<std::string>().c_str()) << static_cast<int>(i);
    }

    void matches_torch_schedulers() {
        QFETCH(int, case_index);
        const json& fixture = schedule_fixtures()["cases"][static_cast<size_t>(case_index)];
        ScheduleConfig s;
        s.kind = parse_schedule(fixture["kind"].get<std::string>());
        s.warmup_steps = fixture["warmup_steps"].get<int64_t>();
        s.min_lr = fixture["min_lr"].get<double>();
        s.decay_every = fixture["decay_every"].get<int64_t>();
        s.decay_gamma = fixture["decay_gamma"].get<double>();
        const double base_lr = fixture["base_lr"].get<double>();
        const int64_t total = fixture["total_updates"].get<int64_t>();
        const auto expected = fixture["lr_at_update"].get<std::vector<double>>();
        QCOMPARE(static_cast<int64_t>(expected.size()), total);
        for (int64_t u = 1; u <= total; ++u) {
            const double lr = learning_rate_at(s, base_lr, u, total);
            const double want = expected[static_cast<size_t>(u - 1)];
            QVERIFY2(close(lr, want), qPrintable(QStringLiteral("update %1: got %2, torch %3")
                                                     .arg(u).arg(lr, 0, 'g', 17).arg(want, 0, 'g', 17)));
        }
    }

    void constant_never_changes() {
        const auto s = schedule(ScheduleKind::constant);
        for (int64_t u : {1, 2, 500, 10'000, 20'000})
            QCOMPARE(learning_rate_at(s, 0.02, u, 10'000), 0.02);
    }

    void warmup_ramps_to_the_base_rate_for_every_kind() {
        for (ScheduleKind kind : {ScheduleKind::constant, ScheduleKind::linear,
                                  ScheduleKind::cosine, ScheduleKind::step}) {
            auto s = schedule(kind, 10);
            s.decay_every = 5;
            QCOMPARE(learning_rate_at(s, 0.5, 1, 100), 0.05);
            QCOMPARE(learning_rate_at(s, 0.5, 5, 100), 0.25);
            QCOMPARE(learning_rate_at(s, 0.5, 10, 100), 0.5);
            // The first update after warmup runs at the full rate whatever the decay shape.
            QCOMPARE(learning_rate_at(s, 0.5, 11, 100), 0.5);
        }
    }

    void linear_reaches_min_lr_after_the_last_update() {
        const auto s = schedule(ScheduleKind::linear, 0, 0.01);
        QCOMPARE(learning_rate_at(s, 0.11, 1, 101), 0.11);
        QVERIFY(close(learning_rate_at(s, 0.11, 51, 101), 0.11 - 0.1 * 50.0 / 101.0));
        QVERIFY(learning_rate_at(s, 0.11, 101, 101) > 0.01);
        // Updates past total_updates (a run extended by max_steps) stay at min_lr.
        QCOMPARE(learning_rate_at(s, 0.11, 102, 101), 0.01);
        QCOMPARE(learning_rate_at(s, 0.11, 500, 101), 0.01);
    }

    void cosine_passes_the_midpoint_and_ends_at_min_lr() {
        const auto s = schedule(ScheduleKind::cosine, 20, 0.001);
        // 100 post-warmup updates: the 51st runs at epoch 50, the half-way point.
        QVERIFY(close(learning_rate_at(s, 0.101, 71, 120), 0.001 + 0.1 * 0.5));
        QVERIFY(close(learning_rate_at(s, 0.101, 46, 120),
                      0.001 + 0.05 * (1.0 + std::cos(std::numbers::pi * 25.0 / 100.0))));
        QVERIFY(learning_rate_at(s, 0.101, 120, 120) > 0.001);
        QCOMPARE(learning_rate_at(s, 0.101, 121, 120), 0.001);
        QCOMPARE(learning_rate_at(s, 0.101, 400, 120), 0.001);
    }

    void step_multiplies_by_gamma_every_decay_every_updates() {
        auto s = schedule(ScheduleKind::step, 3);
        s.decay_every = 10;
        s.decay_gamma = 0.5;
        QCOMPARE(learning_rate_at(s, 0.8, 4, 1000), 0.8);
        QCOMPARE(learning_rate_at(s, 0.8, 13, 1000), 0.8);
        QCOMPARE(learning_rate_at(s, 0.8, 14, 1000), 0.4);
        QCOMPARE(learning_rate_at(s, 0.8, 23, 1000), 0.4);
        QCOMPARE(learning_rate_at(s, 0.8, 24, 1000), 0.2);
        QCOMPARE(learning_rate_at(s, 0.8, 103, 1000), 0.8 * std::pow(0.5, 9));
        s.decay_every = 0;
        QVERIFY_THROWS_EXCEPTION(Error, learning_rate_at(s, 0.8, 5, 1000));
    }

    void total_within_warmup_keeps_the_base_rate_after_warmup() {
        for (ScheduleKind kind : {ScheduleKind::linear, ScheduleKind::cosine}) {
            const auto s = schedule(kind, 10);
            QCOMPARE(learning_rate_at(s, 0.3, 10, 8), 0.3);
            QCOMPARE(learning_rate_at(s, 0.3, 11, 8), 0.3);
        }
    }
};

QTEST_APPLESS_MAIN(TestLrSchedule)
#include "test_lr_schedule.moc"
