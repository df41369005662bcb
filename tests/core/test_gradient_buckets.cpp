// ZeRO-2's gradient buckets as the planner lays them out (plan/graph_plan.hpp), for the GPT and
// the MLP on 2 and 3 processes, every process's plan: each parameter is in exactly one bucket,
// that of the first op reading it (the last of the backward to write its gradient), packed in
// flat-store order; each bucket's per-process counts are its overlaps with the shards and add
// up to each shard; buckets alive at the same time in the backward never share floats; the
// persistent gradient buffer is the shard; and on a 4-block GPT the bucket block plus the shard
// is well under the whole gradient, which is the point. The reduce-scatters themselves run in
// tests/mpi/test_zero_shards.cpp.
#include <QtTest>

#include <algorithm>

#include "model/build_model.hpp"
#include "parallel/shard_range.hpp"
#include "plan/graph_plan.hpp"

using namespace trainbench;

namespace {

GraphPlan zero2_plan(const ModelDesc& model, int rank, int processes) {
    return make_graph_plan(model, 4, {.threads = 1, .shard_rank = rank, .shard_count = processes, .shard_gradients = true});
}

// Backward step at which op o runs (step b runs op n-1-b), as the planner counts lifetimes.
int step_of(const ModelDesc& model, int op) { return static_cast<int>(model.ops.size()) - 1 - op; }

}  // namespace

class GradientBucketsTest : public QObject {
    Q_OBJECT

private slots:
    void bucketsCoverEveryParameterOnceAndTileTheShards_data() {
        QTest::addColumn<bool>("gpt");
        QTest::addColumn<int>("processes");
        QTest::newRow("gpt, 2 processes") << true << 2;
        QTest::newRow("gpt, 3 processes") << true << 3;
        QTest::newRow("mlp, 3 processes") << false << 3;
    }
    void bucketsCoverEveryParameterOnceAndTileTheShards() {
        QFETCH(bool, gpt);
        QFETCH(int, processes);
        const ModelDesc model = gpt ? build_gpt(GptShape{4, 4, 32, 16, 65}) : build_mlp({2, 24, 24, 24, 3}, Activation::relu, 3);
        for (int rank = 0; rank < processes; ++rank) {
            const GraphPlan plan = zero2_plan(model, rank, processes);
            QVERIFY(plan.reduces_in_backward());
            QCOMPARE(plan.gradient_floats(), shard_of(plan.params.count, rank, processes).size());
            std::vector<int> seen(model.params.size(), 0);
            std::vector<int64_t> per_shard(static_cast<size_t>(processes), 0);
            int previous_op = static_cast<int>(model.ops.size());
            for (size_t b = 0; b < plan.gradient_buckets.size(); ++b) {
                const GraphPlan::GradientBucket& bucket = plan.gradient_buckets[b];
                QVERIFY2(bucket.op < previous_op, "buckets are listed in the backward's order");
                previous_op = bucket.op;
                QCOMPARE(plan.op_bucket[static_cast<size_t>(bucket.op)], static_cast<int>(b));
                int64_t next = bucket.offset, previous_offset = -1, floats = 0;
                for (int p : bucket.params) {
                    ++seen[static_cast<size_t>(p)];
                    // The bucket's op is the first to read p.
                    int first_reader = -1;
                    for (size_t o = 0; o < model.ops.size() && first_reader < 0; ++o)
                        for (int q : model.ops[o].params)
                            if (q == p) first_reader = static_cast<int>(o);
                    QCOMPARE(first_reader, bucket.op);
                    // Packed, in flat-store order.
                    QCOMPARE(plan.param_bucket_offset[static_cast<size_t>(p)], next);
                    QVERIFY(plan.params.offset[static_cast<size_t>(p)] > previous_offset);
                    previous_offset = plan.params.offset[static_cast<size_t>(p)];
                    next += model.params[static_cast<size_t>(p)].numel();
                    floats += model.params[static_cast<size_t>(p)].numel();
                }
                QCOMPARE(bucket.floats, floats);
                QCOMPARE(static_cast<int>(bucket.counts.size()), processes);
                int64_t counted = 0;
                for (int r = 0; r < processes; ++r) {
                    counted += bucket.counts[static_cast<size_t>(r)];
                    per_shard[static_cast<size_t>(r)] += bucket.counts[static_cast<size_t>(r)];
                }
                QCOMPARE(counted, bucket.floats);
                QVERIFY(bucket.offset + bucket.floats <= plan.bucket_floats);
            }
            for (size_t p = 0; p < seen.size(); ++p) QCOMPARE(seen[p], 1);
            for (int r = 0; r < processes; ++r)
                QCOMPARE(per_shard[static_cast<size_t>(r)], shard_of(plan.params.count, r, processes).size());
            // Buckets alive at the same time (from the first write of any of their parameters to
            // their reduce-scatter) never share floats.
            auto lifetime = [&](const GraphPlan::GradientBucket& bucket) {
                int start = 1 << 30;
                for (int p : bucket.params)
                    for (size_t o = 0; o < model.ops.size(); ++o)
                        for (int q : model.ops[o].params)
                            if (q == p) start = std::min(start, step_of(model, static_cast<int>(o)));
                return std::pair<int, int>{start, step_of(model, bucket.op)};
            };
            for (const auto& a : plan.gradient_buckets)
                for (const auto& b : plan.gradient_buckets) {
                    if (&a == &b) continue;
                    const auto [a_start, a_end] = lifetime(a);
                    const auto [b_start, b_end] = lifetime(b);
                    const bool together = !(a_end < b_start || b_end < a_start);
                    const bool overlap = a.offset < b.offset + b.floats && b.offset < a.offset + a.floats;
                    QVERIFY(!(together && overlap));
                }
        }
    }

    // The saving: the shard and the bucket block against the whole gradient ZeRO-1 keeps, and
    // without ZeRO-2 no bucket at all.
    void shardAndBucketsAreSmallerThanTheWholeGradient() {
        const ModelDesc model = build_gpt(GptShape{4, 4, 128, 128, 63});
        const GraphPlan zero1 = make_graph_plan(model, 4, {.threads = 1, .shard_rank = 0, .shard_count = 2});
        QVERIFY(!zero1.reduces_in_backward());
        QCOMPARE(zero1.gradient_floats(), zero1.params.count);
        const GraphPlan zero2 = zero2_plan(model, 0, 2);
        const auto gradients = static_cast<size_t>(MemoryCategory::gradients);
        const double ratio = static_cast<double>(zero2.planned_bytes()[gradients]) /
                             static_cast<double>(zero1.planned_bytes()[gradients]);
        qInfo("GPT L4 C128 on 2 processes: gradients %lld bytes with ZeRO-1, %lld with ZeRO-2 (shard %lld + buckets "
              "%lld): %.1f%%",
              static_cast<long long>(zero1.planned_bytes()[gradients]),
              static_cast<long long>(zero2.planned_bytes()[gradients]),
              static_cast<long long>(zero2.gradient_floats() * 4), static_cast<long long>(zero2.bucket_floats * 4),
              100.0 * ratio);
        // Half the store plus the embeddings' bucket (alive through the whole backward) and the
        // largest product's weights: about 61% here.
        QVERIFY(ratio < 0.65);
        QVERIFY(zero2.bucket_floats < zero2.params.count / 4);
    }
};

QTEST_APPLESS_MAIN(GradientBucketsTest)
#include "test_gradient_buckets.moc"
