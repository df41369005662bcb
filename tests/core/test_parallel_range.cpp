// parallel/parallel_range: every index of [0, n) is handed to exactly one call, in chunks whose
// bounds start at multiples of 16 where every member gets that many; a member whose core is slow
// hands its share's later chunks to a member that is done; parallel_slices gives each member
// one contiguous slice, the same on every call; parallel_items balances items of any count the
// same way and names the member running each chunk, one thread per member (its scratch).
#include <QtTest>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <initializer_list>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "parallel/parallel_range.hpp"

using namespace trainbench;

namespace {
// The items the calling thread runs of n when the worker (member 1) stalls 50 ms in every chunk
// it takes, as a vCPU the host has taken away would; -1 unless every item ran once.
// dispatch(chunk) hands chunk(first, end) to the split under test.
template <class Dispatch>
int64_t run_by_caller_beside_a_stalled_worker(int64_t n, Dispatch dispatch) {
    const std::thread::id caller = std::this_thread::get_id();
    std::atomic<int64_t> by_caller{0}, by_worker{0};
    dispatch([&](int64_t first, int64_t end) {
        if (std::this_thread::get_id() == caller) {
            by_caller.fetch_add(end - first);
            return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        by_worker.fetch_add(end - first);
    });
    return by_caller.load() + by_worker.load() == n ? by_caller.load() : -1;
}

// A QtTest data table of teams of 2 and 3 members, each over every n of sizes.
void add_members_and_n_rows(std::initializer_list<int64_t> sizes) {
    QTest::addColumn<int>("members");
    QTest::addColumn<int64_t>("n");
    for (int members : {2, 3})
        for (int64_t n : sizes) QTest::addRow("%d members, n %lld", members, static_cast<long long>(n)) << members << n;
}
}  // namespace

class TestParallelRange : public QObject {
    Q_OBJECT

private slots:
    void init() { WorkerTeam::shared().resize(2); }
    void cleanupTestCase() { WorkerTeam::shared().resize(1); }

    void every_index_is_handed_out_once_data() { add_members_and_n_rows({3, 17, 31, 32, 33, 128, 1000, 4096, 100003}); }
    void every_index_is_handed_out_once() {
        QFETCH(int, members);
        QFETCH(int64_t, n);
        WorkerTeam::shared().resize(members);
        std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
        std::mutex lock;
        std::vector<std::pair<int64_t, int64_t>> calls;
        // Work per item large enough that the team is always woken.
        parallel_range(n, kMinParallelWork, [&](int64_t first, int64_t end) {
            for (int64_t i = first; i < end; ++i) seen[static_cast<size_t>(i)].fetch_add(1);
            std::lock_guard<std::mutex> hold(lock);
            calls.emplace_back(first, end);
        });
        for (int64_t i = 0; i < n; ++i) QCOMPARE(seen[static_cast<size_t>(i)].load(), 1);
        for (const auto& [first, end] : calls) {
            QVERIFY(end > first);
            if (n >= 16 * members) QCOMPARE(first % 16, int64_t{0});
        }
        if (n >= members) QVERIFY(calls.size() >= static_cast<size_t>(members));
        QVERIFY(calls.size() <= static_cast<size_t>(8 * members));
    }

    // The calling thread, done with its own share, runs the stalled worker's other chunks.
    void a_slow_member_hands_its_chunks_over() {
        const int64_t by_caller = run_by_caller_beside_a_stalled_worker(
            4096, [](auto chunk) { parallel_range(4096, kMinParallelWork, chunk); });
        // Evenly split, each would run 2,048; the worker's first chunk alone is 256.
        QVERIFY2(by_caller >= 4096 - 2 * 256, qPrintable(QString::number(by_caller)));
    }

    void slices_are_one_per_member_and_fixed() {
        for (int round = 0; round < 3; ++round) {
            std::mutex lock;
            std::vector<std::pair<int64_t, int64_t>> calls;
            parallel_slices(1000, kMinParallelWork, [&](int64_t first, int64_t end) {
                std::lock_guard<std::mutex> hold(lock);
                calls.emplace_back(first, end);
            });
            std::sort(calls.begin(), calls.end());
            QCOMPARE(calls.size(), size_t{2});
            QCOMPARE(calls[0], std::make_pair(int64_t{0}, int64_t{500}));
            QCOMPARE(calls[1], std::make_pair(int64_t{500}, int64_t{1000}));
        }
    }

    // Attention's batch elements: 32 items on 2 members, each item using its member's scratch.
    void items_are_balanced_and_each_member_is_one_thread_data() { add_members_and_n_rows({3, 5, 32, 128, 1001}); }
    void items_are_balanced_and_each_member_is_one_thread() {
        QFETCH(int, members);
        QFETCH(int64_t, n);
        WorkerTeam::shared().resize(members);
        std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
        std::mutex lock;
        std::map<int, std::thread::id> thread_of_member;
        bool one_thread_per_member = true, members_and_chunks_valid = true;
        size_t calls = 0;
        parallel_items(n, kMinParallelWork, [&](int member, int64_t first, int64_t end) {
            for (int64_t i = first; i < end; ++i) seen[static_cast<size_t>(i)].fetch_add(1);
            std::lock_guard<std::mutex> hold(lock);  // QtTest's checks run on the test's thread, below
            ++calls;
            members_and_chunks_valid = members_and_chunks_valid && member >= 0 && member < members && end > first;
            const auto [at, added] = thread_of_member.emplace(member, std::this_thread::get_id());
            if (!added && at->second != std::this_thread::get_id()) one_thread_per_member = false;
        });
        for (int64_t i = 0; i < n; ++i) QCOMPARE(seen[static_cast<size_t>(i)].load(), 1);
        QVERIFY(members_and_chunks_valid);
        QVERIFY(one_thread_per_member);
        // Up to 8 chunks per member of any size: 32 items on 2 members are 16 chunks of 2, not
        // one of 16 each, as 16-aligned chunks would be.
        QCOMPARE(calls, static_cast<size_t>(members * std::clamp<int64_t>(n / members, 1, 8)));
    }

    void a_slow_member_hands_its_items_over() {
        const std::thread::id caller = std::this_thread::get_id();
        std::atomic<bool> caller_is_member_0{true};
        const int64_t by_caller = run_by_caller_beside_a_stalled_worker(32, [&](auto chunk) {
            parallel_items(32, kMinParallelWork, [&](int member, int64_t first, int64_t end) {
                if (std::this_thread::get_id() == caller && member != 0) caller_is_member_0 = false;
                chunk(first, end);
            });
        });
        QVERIFY(caller_is_member_0);
        // Evenly split, each would run 16; the worker's first chunk alone is 2.
        QVERIFY2(by_caller >= 32 - 2 * 2, qPrintable(QString::number(by_caller)));
    }

    void small_work_runs_on_the_caller() {
        const std::thread::id caller = std::this_thread::get_id();
        int calls = 0;
        bool on_caller = true;
        parallel_range(100, 1, [&](int64_t first, int64_t end) {
            ++calls;
            on_caller = on_caller && std::this_thread::get_id() == caller && first == 0 && end == 100;
        });
        QCOMPARE(calls, 1);
        QVERIFY(on_caller);
        calls = 0;
        parallel_items(100, 1, [&](int member, int64_t first, int64_t end) {
            ++calls;
            on_caller = on_caller && std::this_thread::get_id() == caller && member == 0 && first == 0 && end == 100;
        });
        QCOMPARE(calls, 1);
        QVERIFY(on_caller);
    }
};

QTEST_APPLESS_MAIN(TestParallelRange)
#include "test_parallel_range.moc"
