// parallel/worker_team: every member runs every dispatched task exactly once with its own index,
// whether the workers catch the dispatch while spinning (tasks back to back), after sleeping
// (gaps of a few milliseconds, longer than any spin), or in between; a dispatch from inside a
// task runs serially on the caller. The spin's length depends on the machine's load at run time
// (worker_team.cpp), so these hold for whichever spin the machine chose.
#include <QtTest>

#include <array>
#include <atomic>
#include <chrono>
#include <thread>

#include "parallel/worker_team.hpp"

using namespace trainbench;

namespace {

struct Counts {
    std::array<std::atomic<int>, 4> runs{};
    std::atomic<int> wrong_members{0};
    int expected_members = 0;
};

void count_member(void* context, int member, int members) {
    auto& counts = *static_cast<Counts*>(context);
    if (members != counts.expected_members || member < 0 || member >= members) counts.wrong_members.fetch_add(1);
    else counts.runs[static_cast<size_t>(member)].fetch_add(1);
}

}  // namespace

class TestWorkerTeam : public QObject {
    Q_OBJECT

    static void dispatch(WorkerTeam& team, Counts& counts, int times, std::chrono::microseconds gap) {
        for (int i = 0; i < times; ++i) {
            team.run(count_member, &counts);
            if (gap.count() > 0) std::this_thread::sleep_for(gap);
        }
    }

private slots:
    void every_member_runs_every_task_once_data() {
        QTest::addColumn<int>("gap_us");
        QTest::addColumn<int>("times");
        QTest::newRow("back to back") << 0 << 5000;
        QTest::newRow("gaps of 50 us") << 50 << 400;
        QTest::newRow("gaps of 3 ms (workers asleep)") << 3000 << 40;
    }
    void every_member_runs_every_task_once() {
        QFETCH(int, gap_us);
        QFETCH(int, times);
        WorkerTeam team(3);
        Counts counts;
        counts.expected_members = 3;
        dispatch(team, counts, times, std::chrono::microseconds(gap_us));
        QCOMPARE(counts.wrong_members.load(), 0);
        for (int m = 0; m < 3; ++m) QCOMPARE(counts.runs[static_cast<size_t>(m)].load(), times);
        QCOMPARE(counts.runs[3].load(), 0);
    }

    void a_dispatch_inside_a_task_runs_on_the_caller() {
        WorkerTeam team(2);
        struct Nested {
            WorkerTeam* team;
            Counts inner;
        } nested{&team, {}};
        nested.inner.expected_members = 1;
        team.run(
            [](void* context, int, int) {
                auto& n = *static_cast<Nested*>(context);
                n.team->run(count_member, &n.inner);
            },
            &nested);
        QCOMPARE(nested.inner.wrong_members.load(), 0);
        QCOMPARE(nested.inner.runs[0].load(), 2);  // each of the two members ran it alone, as member 0 of 1
    }

    void a_resized_team_takes_the_new_size() {
        WorkerTeam team(2);
        Counts counts;
        counts.expected_members = 4;
        team.resize(4);
        dispatch(team, counts, 100, std::chrono::microseconds(0));
        QCOMPARE(counts.wrong_members.load(), 0);
        for (int m = 0; m < 4; ++m) QCOMPARE(counts.runs[static_cast<size_t>(m)].load(), 100);
    }
};

QTEST_APPLESS_MAIN(TestWorkerTeam)
#include "test_worker_team.moc"
