// ZeRO over MPI, seen from inside every process: CTest starts this executable as
// `mpirun -np 3`, so each check runs on each of the three processes at once.
//
// - Optimizer state: with ZeRO-1 each process plans and allocates only its slice of the state
//   (the slices tile the whole exactly), the plan equals what the engine allocated on every
//   process, category by category, and the slices add up to ZeRO-0's state, to the allocator's
//   rounding of each slice.
// - Gradients: with ZeRO-2 each process keeps its shard of the summed gradients and the buckets
//   its backward pass has not yet reduce-scattered (for the GPT fewer bytes than the whole
//   gradient), and its plan is again what it allocated.
// - The update: ZeRO-1 gives ZeRO-0's weights bit for bit (the same allreduce, the same
//   element-wise rule on each slice, exact copies gathered); ZeRO-2's reduce-scatter sums in
//   another order, so its weights agree within float rounding. With gradient clipping (its norm
//   assembled from the slices) and gradient accumulation, for the MLP and the GPT.
// - The steady state: the training step allocates nothing around its collectives, counted on
//   process 0. Open MPI's allreduce and reduce algorithms allocate their own scratch on
//   every call: this executable wraps the MPI calls core makes (MPI's profiling interface, PMPI)
//   to count those apart, and reports them.
//
// Every process computes first and checks after, so a failed check cannot leave the others
// waiting in a collective. Skips, saying why, in a build without MPI or outside mpirun.
#include <QtTest>

#include <cmath>

#include "backend/compute_engine.hpp"
#include "core/allocation_counter.hpp"
#include "core/same_bits.hpp"
#include "core/weights_difference.hpp"
#include "memory/tracking_arena.hpp"
#include "optim/optimizer_step.hpp"
#include "parallel/process_group.hpp"
#include "parallel/shard_range.hpp"
#include "train/engine_factory.hpp"
#include "trainbench/processes.hpp"
#include "trainbench/run_plan.hpp"
#include "trainbench/trainer.hpp"

using namespace trainbench;
using testing::difference_in_tolerances;

namespace {
std::atomic<long> allocations_inside_mpi{0};
}  // namespace

#ifdef TRAINBENCH_WITH_MPI
#include <mpi.h>

namespace {

// Runs one MPI call, counting what it allocates into allocations_inside_mpi instead.
template <typename Call>
int uncounted(Call call) {
    const bool was_counting = counting.exchange(false);
    const long outside = allocations.exchange(0);
    counting = was_counting;
    const int status = call();
    counting = false;
    allocations_inside_mpi += allocations.exchange(outside);
    counting = was_counting;
    return status;
}
}  // namespace

extern "C" {
int MPI_Allreduce(const void* send, void* receive, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
    return uncounted([&] { return PMPI_Allreduce(send, receive, count, type, op, comm); });
}
int MPI_Reduce(const void* send, void* receive, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm) {
    return uncounted([&] { return PMPI_Reduce(send, receive, count, type, op, root, comm); });
}
int MPI_Allgatherv(const void* send, int send_count, MPI_Datatype send_type, void* receive, const int counts[],
                   const int offsets[], MPI_Datatype receive_type, MPI_Comm comm) {
    return uncounted([&] {
        return PMPI_Allgatherv(send, send_count, send_type, receive, counts, offsets, receive_type, comm);
    });
}
}
#endif

namespace {

constexpr int kProcesses = 3;

RunConfig mlp_config() {
    RunConfig c = default_config(ModelFamily::mlp);
    c.dataset = "spirals";
    c.synthetic_samples = 300;
    c.hidden = {32, 32};
    c.batch_size = 30;
    c.step_size = 2;
    c.max_steps = 12;
    c.threads = 1;
    c.optimizer.kind = OptimizerKind::adamw;
    c.clip_grad_norm = 0.5;  // binds: the clipping coefficient comes from the gathered norm
    c.processes = kProcesses;
    return c;
}

RunConfig gpt_config() {
    RunConfig c = default_config(ModelFamily::gpt);
    c.dataset = "text:" TRAINBENCH_FIXTURES_DIR "/text/bible_plain.txt";
    c.n_layer = 1;
    c.n_head = 2;
    c.n_embd = 16;
    c.block_size = 8;
    c.batch_size = 12;
    c.step_size = 2;
    c.max_steps = 12;
    c.threads = 1;
    c.optimizer.kind = OptimizerKind::adamw;
    c.clip_grad_norm = 1.0;
    c.epochs = 100;  // the excerpt has fewer windows than 12 updates take
    c.eval_every = 0;
    c.processes = kProcesses;
    return c;
}

RunConfig with_zero(RunConfig c, int stage) {
    c.zero = stage;
    return c;
}

// A run's planned bytes and what its engine held at the peak of the last update (every process
// reads its own engine's report; process 0 alone passes it to an observer).
struct MeasuredRun {
    RunResult result;
    MemoryReport memory;
};

MeasuredRun train_measured(const RunConfig& config) {
    MeasuredRun run;
    run.result = train(config, Observer{}, nullptr);
    run.memory = run.result.last.memory;
    return run;
}

}  // namespace

class ZeroShardsTest : public QObject {
    Q_OBJECT

private slots:
    void initTestCase() {
        if (!mpi_built_in()) QSKIP("built without MPI (install libopenmpi-dev and openmpi-bin and reconfigure)");
        if (process_world().size != kProcesses)
            QSKIP("needs to run as mpirun -np 3 (CTest starts it so); started as a single process");
    }

    void slicesTileTheStore() {
        for (int64_t count : {int64_t{1}, int64_t{2}, int64_t{7}, int64_t{28512}}) {
            int64_t next = 0;
            for (int r = 0; r < kProcesses; ++r) {
                const ShardRange shard = shard_of(count, r, kProcesses);
                QCOMPARE(shard.begin, next);
                QVERIFY(shard.size() == count / kProcesses || shard.size() == count / kProcesses + 1);
                next = shard.end;
            }
            QCOMPARE(next, count);
        }
    }

    // The collectives themselves: the reduce-scatter leaves each process the sum of its block at
    // the start of the buffer (blocks of uneven sizes, one of them empty, as a ZeRO-2 bucket's
    // overlaps with the shards can be), the all-gather gives everyone every slice.
    void collectivesMoveTheRightSlices() {
        ProcessGroup& group = process_group();
        const int64_t n = 11;
        const std::vector<int64_t> counts = {4, 0, 7};
        int64_t first = 0;  // where this process's block starts
        for (int r = 0; r < group.rank(); ++r) first += counts[static_cast<size_t>(r)];
        std::vector<float> values(n);
        for (int64_t i = 0; i < n; ++i) values[static_cast<size_t>(i)] = static_cast<float>(i + 100 * group.rank());
        group.reduce_scatter(values.data(), counts);
        bool summed = true;
        for (int64_t i = 0; i < counts[static_cast<size_t>(group.rank())]; ++i)
            summed = summed && values[static_cast<size_t>(i)] == static_cast<float>(3 * (first + i) + 100 * (0 + 1 + 2));
        const ShardRange mine = shard_of(n, group.rank(), group.size());
        std::vector<float> gathered(n, -1.0f);
        for (int64_t i = mine.begin; i < mine.end; ++i) gathered[static_cast<size_t>(i)] = static_cast<float>(i);
        group.all_gather(gathered.data(), n);
        bool complete = true;
        for (int64_t i = 0; i < n; ++i) complete = complete && gathered[static_cast<size_t>(i)] == static_cast<float>(i);
        QVERIFY(summed);
        QVERIFY(complete);
    }

    // The gradient sum and ZeRO-2's reduce-scatter run in 8 MiB pieces (process_world.cpp): over
    // more than two whole pieces and a partial one, every element gets its exact sum, the last
    // piece's tail included.
    void sumsCoverEveryPiece() {
        ProcessGroup& group = process_group();
        const int64_t n = (int64_t{1} << 22) + 12345;
        std::vector<float> values(static_cast<size_t>(n));
        // Small integers: their sums are exact in float whatever order MPI adds them in.
        for (int64_t i = 0; i < n; ++i) values[static_cast<size_t>(i)] = static_cast<float>(i % 1000 + group.rank());
        group.sum(values.data(), n);
        int64_t wrong = 0;
        for (int64_t i = 0; i < n; ++i)
            wrong += values[static_cast<size_t>(i)] != static_cast<float>(3 * (i % 1000) + 0 + 1 + 2);
        QCOMPARE(wrong, int64_t{0});

        // The reduce-scatter reduces in the same pieces: blocks of several pieces, one empty.
        const std::vector<int64_t> counts = {(int64_t{1} << 21) + 5, 0, (int64_t{1} << 22) + 7};
        const int64_t total = counts[0] + counts[1] + counts[2];
        int64_t first = 0;
        for (int r = 0; r < group.rank(); ++r) first += counts[static_cast<size_t>(r)];
        values.assign(static_cast<size_t>(total), 0.0f);
        for (int64_t i = 0; i < total; ++i) values[static_cast<size_t>(i)] = static_cast<float>(i % 1000 + group.rank());
        group.reduce_scatter(values.data(), counts);
        wrong = 0;
        for (int64_t i = 0; i < counts[static_cast<size_t>(group.rank())]; ++i)
            wrong += values[static_cast<size_t>(i)] != static_cast<float>(3 * ((first + i) % 1000) + 0 + 1 + 2);
        QCOMPARE(wrong, int64_t{0});
    }

    void optimizerStateIsOneSlicePerProcess_data() {
        QTest::addColumn<bool>("gpt");
        QTest::newRow("mlp") << false;
        QTest::newRow("gpt") << true;
    }
    void optimizerStateIsOneSlicePerProcess() {
        QFETCH(bool, gpt);
        const RunConfig base = gpt ? gpt_config() : mlp_config();
        const MeasuredRun whole = train_measured(with_zero(base, 0));
        const MeasuredRun sharded = train_measured(with_zero(base, 1));
        const auto optimizer = static_cast<size_t>(MemoryCategory::optimizer_state);
        const int64_t parameters = whole.result.plan.parameter_count;
        const int state_slots = optimizer_state_slots(base.optimizer);
        const ShardRange mine = shard_of(parameters, process_group().rank(), kProcesses);
        double slices[1] = {static_cast<double>(sharded.memory.peak[optimizer])};
        process_group().sum(slices, 1);

        // The plan is what each engine allocated, category by category, with and without ZeRO.
        for (const MeasuredRun* run : {&whole, &sharded}) {
            for (int c = 0; c < kMemoryCategoryCount; ++c) {
                if (c == static_cast<int>(MemoryCategory::cache)) continue;
                QCOMPARE(run->memory.peak[static_cast<size_t>(c)], run->result.plan.planned_bytes[static_cast<size_t>(c)]);
            }
        }
        QCOMPARE(whole.memory.peak[optimizer], TrackingArena::rounded_size(parameters * 4 * state_slots));
        QCOMPARE(sharded.memory.peak[optimizer], TrackingArena::rounded_size(mine.size() * 4 * state_slots));
        // Together the slices are ZeRO-0's state, give or take the rounding of each slice.
        const double rounding = kProcesses * static_cast<double>(TrackingArena::rounded_size(1));
        qInfo("optimizer state per process: ZeRO-0 %lld bytes, ZeRO-1 %lld bytes (process %d), %.0f bytes over the "
              "%d processes",
              static_cast<long long>(whole.memory.peak[optimizer]), static_cast<long long>(sharded.memory.peak[optimizer]),
              process_group().rank(), slices[0], kProcesses);
        QVERIFY(std::fabs(slices[0] - static_cast<double>(whole.memory.peak[optimizer])) <= rounding);
        // Nothing else changes size.
        for (int c = 0; c < kMemoryCategoryCount; ++c)
            if (c != static_cast<int>(optimizer) && c != static_cast<int>(MemoryCategory::cache))
                QCOMPARE(sharded.memory.peak[static_cast<size_t>(c)], whole.memory.peak[static_cast<size_t>(c)]);
    }

    // ZeRO-2's gradients: each process keeps its shard of the summed gradients and, during a
    // backward pass, the buckets not yet reduce-scattered; what its engine held is its plan,
    // category by category. The optimizer state is ZeRO-1's slice, and the other categories are
    // unchanged.
    void gradientsAreTheShardPlusTheBuckets_data() {
        QTest::addColumn<bool>("gpt");
        QTest::newRow("mlp") << false;
        QTest::newRow("gpt") << true;
    }
    void gradientsAreTheShardPlusTheBuckets() {
        QFETCH(bool, gpt);
        const RunConfig base = gpt ? gpt_config() : mlp_config();
        const MeasuredRun stage1 = train_measured(with_zero(base, 1));
        const MeasuredRun stage2 = train_measured(with_zero(base, 2));
        const auto gradients = static_cast<size_t>(MemoryCategory::gradients);
        const int64_t parameters = stage2.result.plan.parameter_count;
        const ShardRange mine = shard_of(parameters, process_group().rank(), kProcesses);
        qInfo("process %d: gradients %lld bytes with ZeRO-1, %lld with ZeRO-2 (its shard: %lld)", process_group().rank(),
              static_cast<long long>(stage1.memory.peak[gradients]), static_cast<long long>(stage2.memory.peak[gradients]),
              static_cast<long long>(TrackingArena::rounded_size(mine.size() * 4)));
        QVERIFY2(stage2.result.reason == StopReason::max_steps, stage2.result.message.c_str());
        for (int c = 0; c < kMemoryCategoryCount; ++c) {
            if (c == static_cast<int>(MemoryCategory::cache)) continue;
            QCOMPARE(stage2.memory.peak[static_cast<size_t>(c)], stage2.result.plan.planned_bytes[static_cast<size_t>(c)]);
            if (c != static_cast<int>(gradients))
                QCOMPARE(stage2.memory.peak[static_cast<size_t>(c)], stage1.memory.peak[static_cast<size_t>(c)]);
        }
        QCOMPARE(stage1.memory.peak[gradients], TrackingArena::rounded_size(parameters * 4));
        QVERIFY(stage2.memory.peak[gradients] > TrackingArena::rounded_size(mine.size() * 4));
        // A GPT's gradients are spread over many ops: the shard and the live buckets are less
        // than the whole. This MLP's middle layer holds 84% of its parameters, and its bucket
        // plus the shard is more than the whole: ZeRO-2 pays only where no one tensor dominates.
        if (gpt) QVERIFY(stage2.memory.peak[gradients] < stage1.memory.peak[gradients]);
        else QVERIFY(stage2.memory.peak[gradients] > stage1.memory.peak[gradients]);
    }

    void stagesGiveTheSameUpdate_data() {
        QTest::addColumn<bool>("gpt");
        QTest::newRow("mlp") << false;
        QTest::newRow("gpt") << true;
    }
    void stagesGiveTheSameUpdate() {
        QFETCH(bool, gpt);
        const RunConfig base = gpt ? gpt_config() : mlp_config();
        const RunResult zero0 = train(with_zero(base, 0), Observer{}, nullptr);
        const RunResult zero1 = train(with_zero(base, 1), Observer{}, nullptr);
        const RunResult zero2 = train(with_zero(base, 2), Observer{}, nullptr);
        for (const RunResult* r : {&zero0, &zero1, &zero2})
            QVERIFY2(r->reason == StopReason::max_steps, r->message.c_str());
        QVERIFY2(same_bits(zero0.weights, zero1.weights), "ZeRO-1 changed the update");
        const double difference = difference_in_tolerances(zero0.weights, zero2.weights);
        qInfo("process %d: ZeRO-2's weights after 12 updates differ from ZeRO-0's by %.3g of the tolerance",
              process_group().rank(), difference);
        QVERIFY2(difference <= 1.0, qPrintable(QString::number(difference)));
        // The gathered norm is the whole gradient's: clipping saw the same figure.
        QVERIFY(std::fabs(zero2.last.grad_norm - zero0.last.grad_norm) <= 1e-5 * zero0.last.grad_norm);
    }

    void updatesAllocateNothing_data() {
        QTest::addColumn<int>("stage");
        QTest::newRow("ZeRO-0") << 0;
        QTest::newRow("ZeRO-1") << 1;
        QTest::newRow("ZeRO-2") << 2;
    }
    void updatesAllocateNothing() {
        SKIP_WITHOUT_ALLOCATION_COUNTER();
        QFETCH(int, stage);
        RunConfig config = with_zero(gpt_config(), stage);
        config.max_steps = 30;
        // Process 0's observer sees updates 5 to 25, after the first have filled the caches.
        long during = 0, inside_mpi = 0;
        Observer observer;
        observer.on_update = [&](const StepMetrics& m) {
            if (m.update == 5) {
                allocations = 0;
                allocations_inside_mpi = 0;
                counting = true;
            }
            if (m.update == 25) {
                counting = false;
                during = allocations.load();
                inside_mpi = allocations_inside_mpi.load();
            }
        };
        const RunResult result = train(config, observer, nullptr);
        QVERIFY2(result.reason == StopReason::max_steps, result.message.c_str());
        if (process_group().rank() != 0) return;
        qInfo("ZeRO-%d: Open MPI's collectives allocated %ld times in 20 updates (their own scratch)", stage, inside_mpi);
        QVERIFY2(during == 0, qPrintable(QString("%1 allocations during 20 updates").arg(during)));
    }
};

int main(int argc, char** argv) {
    join_process_world();
    QCoreApplication app(argc, argv);
    ZeroShardsTest test;
    const int failures = QTest::qExec(&test, argc, argv);
    // A process that failed a check must not wait for the others in MPI_Finalize.
    if (failures != 0) abort_process_world(1);
    leave_process_world();
    return 0;
}

#include "test_zero_shards.moc"
