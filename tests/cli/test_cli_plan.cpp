// `trainbench-cli plan` as a user runs it: the bytes it prints are what a real run's allocator
// then holds at the peak of an update, by category, for the MLP, the GPT and the CNN, in fp32 and
// bf16, with checkpointing, ZeRO and LoRA; the what-if table's largest fitting micro-batch is the
// largest (one more does not fit); a CUDA plan adds the measured context and needs no GPU; bad
// input gets one line.
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>

#include "cli/cli_process.hpp"
#include "trainbench/memory.hpp"
#include "trainbench/memory_fit.hpp"
#include "trainbench/processes.hpp"

namespace {

const QStringList kCategories{"parameters", "master_weights", "gradients", "optimizer_state", "activations", "workspace"};

QJsonObject plan_json(const QStringList& flags) {
    const CliRun run = run_cli(QStringList{"plan", "--json"} + flags);
    if (run.exit_code != 0) {
        qWarning("%s", qPrintable(run.out + run.err));
        return {};
    }
    return QJsonDocument::fromJson(run.out.toUtf8()).object();
}

}  // namespace

class CliPlanTest : public QObject {
    Q_OBJECT

    QTemporaryDir scratch_;
    QString text_;

    QStringList small_gpt() const {
        return {"--model", "gpt", "--dataset", "text:" + text_, "--n-layer", "2", "--n-head", "2", "--n-embd", "32",
                "--block-size", "16", "--batch-size", "8", "--step-size", "1", "--threads", "1", "--eval-samples", "16",
                "--sample-chars", "0"};
    }

private slots:
    void initTestCase() {
        QVERIFY(scratch_.isValid());
        text_ = scratch_.filePath("text.txt");
        QVERIFY(write_repeated_text(text_, kGptTestLine, 200));
    }

    // The plan, then two updates of the same configuration: the allocator's peak of the update
    // equals the plan in every category, and its live peak equals the plan's total.
    void plan_equals_the_allocators_peak_data() {
        QTest::addColumn<QStringList>("flags");
        const QStringList mlp{"--dataset", "spirals", "--hidden", "64,64", "--batch-size", "32", "--threads", "1"};
        QTest::newRow("mlp fp32") << mlp;
        QTest::newRow("mlp bf16, step_size 4") << mlp + QStringList{"--precision", "bf16", "--step-size", "4"};
        QTest::newRow("mlp checkpointing") << mlp + QStringList{"--gradient-checkpointing"};
        QTest::newRow("gpt fp32") << small_gpt();
        QTest::newRow("gpt bf16 checkpointing") << small_gpt() + QStringList{"--precision", "bf16", "--gradient-checkpointing"};
        QTest::newRow("gpt fp16") << small_gpt() + QStringList{"--precision", "fp16"};
        QTest::newRow("gpt lora") << small_gpt() + QStringList{"--lora-rank", "4"};
        QTest::newRow("gpt qlora") << small_gpt() + QStringList{"--lora-rank", "4", "--lora-base", "nf4"};
        QTest::newRow("gpt qlora bf16") << small_gpt() + QStringList{"--lora-rank", "4", "--lora-base", "nf4", "--precision", "bf16"};
        QTest::newRow("gpt dora checkpointing") << small_gpt() + QStringList{"--lora-rank", "4", "--dora", "--gradient-checkpointing"};
        if (QFile::exists("/usr/share/datasets/fashion-mnist"))
            QTest::newRow("cnn") << QStringList{"--model", "cnn", "--dataset", "fashion-mnist", "--batch-size", "16",
                                                "--threads", "1", "--eval-samples", "64"};
        else
            qInfo("no CNN row: Debian's dataset-fashion-mnist is not installed");
        if (trainbench::mpi_built_in()) {
            QTest::newRow("mlp 2 processes ZeRO-1") << mlp + QStringList{"--processes", "2", "--zero", "1"};
            QTest::newRow("gpt 2 processes ZeRO-2") << small_gpt() + QStringList{"--processes", "2", "--zero", "2"};
        } else {
            qInfo("no ZeRO rows: built without MPI");
        }
    }
    void plan_equals_the_allocators_peak() {
        QFETCH(QStringList, flags);
        const QJsonObject plan = plan_json(flags);
        QVERIFY(!plan.isEmpty());
        const QString metrics = scratch_.filePath(QString("metrics-%1.csv").arg(QTest::currentDataTag()).replace(' ', '_'));
        const CliRun run = run_cli(QStringList{"train", "--max-steps", "2", "--metrics-out", metrics} + flags);
        QVERIFY2(run.exit_code == 0, CLI_DIAGNOSTICS(run));
        const auto table = read_metrics_csv(metrics);
        QVERIFY(table && !table->rows.isEmpty());
        const int last = int(table->rows.size()) - 1;
        const QJsonObject bytes = plan["per_process_bytes"].toObject();
        for (const QString& category : kCategories)
            QVERIFY2(bytes[category].toInteger() == table->cell(last, "mem_update_peak_" + category).toLongLong(),
                     qPrintable(QString("%1: planned %2, the run held %3")
                                    .arg(category)
                                    .arg(bytes[category].toInteger())
                                    .arg(table->cell(last, "mem_update_peak_" + category))));
        QCOMPARE(plan["per_process_total_bytes"].toInteger(), table->cell(last, "mem_update_peak_live").toLongLong());
    }

    // Each what-if row's largest fitting micro-batch fits, and the next larger micro-batch of that
    // global batch (one step_size less) does not: checked by planning both on their own.
    void what_if_largest_micro_batch_is_the_largest() {
        // A device that holds the GPT at some micro-batches and not at others.
        const QStringList gpt = small_gpt() + QStringList{"--batch-size", "64"};
        const QJsonObject whole = plan_json(gpt);
        QVERIFY(!whole.isEmpty());
        const qint64 memory = whole["per_process_total_bytes"].toInteger() * 3 / 4;
        const QStringList budget{"--device-memory", QString::number(memory)};
        const QJsonObject plan = plan_json(gpt + budget + QStringList{"--what-if"});
        QVERIFY(!plan.isEmpty());
        QCOMPARE(plan["fits"].toBool(true), false);
        int checked = 0;
        for (const QJsonValue value : plan["what_if"].toArray()) {
            const QJsonObject row = value.toObject();
            if (row.contains("error") || row["processes"].toInteger() != 1 || !row["same_update"].toBool()) continue;
            const qint64 step = row["step_size_for_largest"].toInteger();
            QVERIFY2(step > 0, qPrintable(row["change"].toString() + ": nothing fits"));
            // The row's own flags, at that step_size and at the one before it.
            QStringList flags = gpt + budget;
            const QString change = row["change"].toString();
            if (change.contains("checkpointing")) flags << "--gradient-checkpointing";
            if (change.contains("bf16")) flags << "--precision" << "bf16";
            const QJsonObject at = plan_json(flags + QStringList{"--step-size", QString::number(step)});
            QCOMPARE(at["fits"].toBool(false), true);
            QCOMPARE(at["micro_batch"].toInteger(), row["largest_fitting_micro_batch"].toInteger());
            if (step > 1) {
                const QJsonObject larger = plan_json(flags + QStringList{"--step-size", QString::number(step - 1)});
                QVERIFY(larger["micro_batch"].toInteger() > at["micro_batch"].toInteger());
                QVERIFY2(!larger["fits"].toBool(true),
                         qPrintable(change + ": micro-batch " + QString::number(larger["micro_batch"].toInteger()) + " fits too"));
            }
            ++checked;
        }
        QVERIFY2(checked >= 4, qPrintable(QString("%1 rows checked").arg(checked)));
        // The smallest same-update row is marked, once.
        int marked = 0;
        for (const QJsonValue value : plan["what_if"].toArray()) marked += value.toObject()["smallest_same_update"].toBool() ? 1 : 0;
        QCOMPARE(marked, 1);
    }

    // A CUDA plan on a machine without a GPU: the engine's plan plus the measured context,
    // judged against the memory given; the text says nothing ran.
    void cuda_plan_needs_no_gpu() {
        const QJsonObject cpu = plan_json(small_gpt());
        const QJsonObject cuda = plan_json(small_gpt() + QStringList{"--device", "cuda", "--device-memory", "24GiB"});
        QVERIFY(!cpu.isEmpty() && !cuda.isEmpty());
        QCOMPARE(cuda["engine"].toString(), QString("CUDA"));
        QCOMPARE(cuda["fixed_bytes"].toInteger(), qint64(trainbench::kMeasuredCudaContextBytes));
        QCOMPARE(cuda["needed_bytes"].toInteger(), cuda["per_process_total_bytes"].toInteger() + cuda["fixed_bytes"].toInteger());
        QCOMPARE(cuda["fits"].toBool(false), true);
        // The same tensors as the CPU's up to each allocator's rounding of a buffer (512 bytes on
        // CUDA, 64 on the CPU; both_engines_plan_the_same_tensors), other workspaces.
        const double cpu_state = double(cpu["per_process_bytes"].toObject()["optimizer_state"].toInteger());
        const double cuda_state = double(cuda["per_process_bytes"].toObject()["optimizer_state"].toInteger());
        QVERIFY2(std::abs(cuda_state - cpu_state) <= 0.02 * cpu_state, qPrintable(QString("CUDA %1, CPU %2").arg(cuda_state).arg(cpu_state)));
        QVERIFY(cuda["per_process_bytes"].toObject()["workspace"].toInteger() !=
                cpu["per_process_bytes"].toObject()["workspace"].toInteger());

        const CliRun text = run_cli(QStringList{"plan"} + small_gpt() + QStringList{"--device", "cuda", "--device-memory", "560MiB"});
        QVERIFY2(text.exit_code == 0, CLI_DIAGNOSTICS(text));
        QVERIFY2(text.out.contains("nothing was run"), qPrintable(text.out));
        QVERIFY2(text.out.contains("CUDA context"), qPrintable(text.out));
        QVERIFY2(text.out.contains("does not fit: needs"), qPrintable(text.out));  // the context (608 MiB) and cuBLAS's 32 MiB workspace
    }

    // A 16-bit CUDA plan whose attention runs in the tile kernels (head size 16) says what not
    // keeping the probabilities saves: 2 layers x 8 samples (the micro-batch) x 2 heads x 16 x 16
    // positions x 2 bytes. Where the probabilities are kept (fp32, the CPU) it says nothing.
    void cuda_plan_says_what_recomputing_attention_saves() {
        const QStringList cuda_bf16 = small_gpt() + QStringList{"--device", "cuda", "--precision", "bf16"};
        const QJsonObject plan = plan_json(cuda_bf16);
        QVERIFY(!plan.isEmpty());
        QCOMPARE(plan["recomputed_attention_bytes"].toInteger(), qint64(2 * 8 * 2 * 16 * 16 * 2));
        QVERIFY2(plan["recomputed_attention_note"].toString().contains("computed again in the backward"),
                 qPrintable(plan["recomputed_attention_note"].toString()));
        for (const QStringList& kept : {small_gpt() + QStringList{"--device", "cuda"},
                                        small_gpt() + QStringList{"--precision", "bf16"}}) {
            const QJsonObject other = plan_json(kept);
            QVERIFY(!other.isEmpty());
            QVERIFY2(!other.contains("recomputed_attention_bytes"), qPrintable(kept.join(' ')));
        }
        const CliRun text = run_cli(QStringList{"plan"} + cuda_bf16);
        QVERIFY2(text.exit_code == 0, CLI_DIAGNOSTICS(text));
        QVERIFY2(text.out.contains("attention: the probabilities (16 KiB) are computed again in the backward"),
                 qPrintable(text.out));
    }

    // With a GPU, the CUDA plan is what a CUDA run's allocator then holds.
    void cuda_plan_equals_the_gpus_allocator_peak() {
        const CliRun devices = run_cli({"devices"});
        if (!devices.out.contains("cuda:0")) QSKIP("no CUDA GPU here: the CUDA plan's allocation is checked on a GPU only");
        const QStringList flags = small_gpt() + QStringList{"--device", "cuda", "--precision", "bf16"};
        const QJsonObject plan = plan_json(flags);
        const QString metrics = scratch_.filePath("metrics-cuda.csv");
        const CliRun run = run_cli(QStringList{"train", "--max-steps", "2", "--metrics-out", metrics} + flags);
        QVERIFY2(run.exit_code == 0, CLI_DIAGNOSTICS(run));
        const auto table = read_metrics_csv(metrics);
        QVERIFY(table && !table->rows.isEmpty());
        QCOMPARE(plan["per_process_total_bytes"].toInteger(),
                 table->cell(int(table->rows.size()) - 1, "mem_update_peak_live").toLongLong());
    }

    // With checkpointing the plan says what it frees: the activations of the same run planned
    // without it (checked against that plan itself), how many segments the backward reruns, and
    // plainly when it changes nothing (a ReLU MLP of 3 hidden layers: one slot that nothing else
    // shares, and a last segment that dropped nothing; the H200's technique table measured that
    // case at +32% time for 0 bytes, 2026-11-27, when the walk still rebuilt such segments).
    void checkpointing_says_what_it_frees_data() {
        QTest::addColumn<QStringList>("flags");
        QTest::addColumn<bool>("frees");
        QTest::addColumn<int>("rebuilt");
        QTest::addColumn<QString>("says");
        const QStringList mlp{"--dataset", "spirals", "--batch-size", "64"};
        QTest::newRow("MLP relu, 3 hidden layers")
            << (mlp + QStringList{"--hidden", "64,64,64"}) << false << 0 << "changes nothing on this model";
        // GELU keeps its input beside its output, so the second segment has a tensor to drop.
        QTest::newRow("MLP gelu, 3 hidden layers")
            << (mlp + QStringList{"--hidden", "64,64,64", "--activation", "gelu"}) << true << 1
            << "less), for a second forward pass of 1 segment";
        QTest::newRow("MLP relu, 4 hidden layers")
            << (mlp + QStringList{"--hidden", "64,64,64,64"}) << true << 1 << "less), for a second forward pass of 1 segment";
        QTest::newRow("GPT") << small_gpt() << true << 1 << "less), for a second forward pass of 1 segment";
        QTest::newRow("GPT bf16 on CUDA") << (small_gpt() + QStringList{"--precision", "bf16", "--device", "cuda",
                                                                        "--device-memory", "24GiB"})
                                          << true << 1 << "less)";
    }
    void checkpointing_says_what_it_frees() {
        QFETCH(QStringList, flags);
        QFETCH(bool, frees);
        QFETCH(int, rebuilt);
        QFETCH(QString, says);
        const QJsonObject without = plan_json(flags);
        QVERIFY(!without.isEmpty());
        QVERIFY(!without.contains("activations_without_checkpointing_bytes"));
        const QJsonObject with = plan_json(flags + QStringList{"--gradient-checkpointing"});
        QVERIFY(!with.isEmpty());
        const qint64 planned_without = without["per_process_bytes"].toObject()["activations"].toInteger();
        const qint64 planned_with = with["per_process_bytes"].toObject()["activations"].toInteger();
        QCOMPARE(with["activations_without_checkpointing_bytes"].toInteger(), planned_without);
        QCOMPARE(planned_with < planned_without, frees);
        QCOMPARE(with["rebuilt_segments"].toInt(), rebuilt);
        const QString note = with["checkpointing_note"].toString();
        QVERIFY2(note.contains(says), qPrintable(note));

        const CliRun text = run_cli(QStringList{"plan"} + flags + QStringList{"--gradient-checkpointing"});
        QVERIFY2(text.exit_code == 0, CLI_DIAGNOSTICS(text));
        QVERIFY2(text.out.contains(note), qPrintable(text.out));
    }

    // A model that cannot fit at micro-batch 1 says what dominates there and what saves most.
    void nothing_fits_says_why() {
        const CliRun run = run_cli(QStringList{"plan"} + small_gpt() + QStringList{"--device-memory", "64KiB"});
        QVERIFY2(run.exit_code == 0, CLI_DIAGNOSTICS(run));
        QVERIFY2(run.out.contains("does not fit at any micro-batch"), qPrintable(run.out));
        QVERIFY2(run.out.contains("at micro-batch 1 it needs"), qPrintable(run.out));
        QVERIFY2(run.out.contains("the largest category is"), qPrintable(run.out));
        QVERIFY2(run.out.contains("the knobs that save most are"), qPrintable(run.out));
    }

    void bad_input_gets_one_line_data() {
        QTest::addColumn<QStringList>("flags");
        QTest::addColumn<QString>("says");
        QTest::newRow("memory that does not parse") << QStringList{"--device-memory", "lots"} << "--device-memory: invalid byte size 'lots'";
        QTest::newRow("no memory") << QStringList{"--device-memory", "0"} << "--device-memory: the device needs some memory";
        QTest::newRow("heads") << QStringList{"--n-head", "3"} << "--n-head";
        QTest::newRow("step_size") << QStringList{"--step-size", "9"} << "step_size (9) is larger than batch_size (8)";
    }
    void bad_input_gets_one_line() {
        QFETCH(QStringList, flags);
        QFETCH(QString, says);
        const CliRun run = run_cli(QStringList{"plan"} + small_gpt() + flags);
        QCOMPARE(run.exit_code, 2);
        QVERIFY2(run.out.isEmpty(), qPrintable(run.out));
        QCOMPARE(run.err.trimmed().count('\n'), 0);
        QVERIFY2(run.err.contains(says), qPrintable(run.err));
    }
};

QTEST_APPLESS_MAIN(CliPlanTest)
#include "test_cli_plan.moc"
