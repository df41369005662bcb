// Model parallelism over MPI (--pipeline-stages P, a process per stage): the stages' update is one
// process's with the same global batch up to float rounding (weights within 1e-6 of each
// tensor's scale plus 1e-6 absolute, difference_in_tolerances), for the GPT and the MLP, 2 and 3
// stages, GPipe and 1F1B, step_size 1, 3 and 8, an epoch whose last batch is partial,
// checkpointing, LoRA, and data parallelism inside (2 and 3 copies of the pipeline, ZeRO-1
// within a stage's copies; ZeRO-2 on the GPT, whose tied embedding's shards are summed over both
// stages' copies, and on the MLP, whose copies' empty shares still join its reduce-scatters);
// in bf16 and fp16 within 5% of that precision's own distance from fp32. A pipeline's checkpoint
// resumes in the same pipeline bit for bit, and in one process (or one process's in a pipeline)
// within rounding. A GPT's text samples, drawn through the stages, are one process's. Process 0
// reports every stage: its passes, waits and idle share beside GPipe's (P-1)/(m+P-1), and each
// process's memory peak, equal to its plan. 1F1B holds fewer micro-batches' activations than
// GPipe on the first stage. `plan` gives each stage's bytes, which each process's peak equals.
// Wrong settings get one line before any process starts.
//
// Skips, saying why, in a build without MPI.
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QTemporaryDir>

#include "cli/cli_process.hpp"
#include "core/weights_difference.hpp"
#include "trainbench/processes.hpp"
#include "trainbench/weights.hpp"

namespace {

using testing::difference_in_tolerances;

// A 4-block GPT on the committed Bible excerpt, 8-token windows; batches of 12 over 13 steps.
QStringList gpt_flags(int step_size, int steps) {
    return {"train", "--model", "gpt", "--dataset", "text:" TRAINBENCH_FIXTURES_DIR "/text/bible_plain.txt",
            "--n-layer", "4", "--n-head", "2", "--n-embd", "16", "--block-size", "8", "--batch-size", "24",
            "--step-size", QString::number(step_size), "--epochs", "100", "--max-steps", QString::number(steps),
            "--optimizer", "adamw", "--lr", "0.003", "--seed", "5", "--threads", "1", "--clip-grad-norm", "1"};
}

// 162 samples, 10% held out: 146 training samples in batches of 48, the last of 2 per epoch, so
// 12 updates cross three epoch ends with such a batch (fewer samples than step_size 3 wants).
QStringList mlp_flags(int step_size, int steps) {
    return {"train", "--dataset", "spirals", "--samples", "162", "--val-fraction", "0.1", "--hidden", "16,16,16",
            "--batch-size", "48", "--step-size", QString::number(step_size), "--epochs", "100", "--max-steps",
            QString::number(steps), "--optimizer", "adamw", "--lr", "0.003", "--seed", "11", "--threads", "1"};
}

}  // namespace

class CliPipelineTest : public QObject {
    Q_OBJECT

    QTemporaryDir folder_;

    CliRun train(const QStringList& flags, const QString& name, const QStringList& extra = {}) {
        return run_cli(QStringList(flags) << "--save-weights" << path(name + ".safetensors") << extra, 180000);
    }
    QString path(const QString& name) const { return folder_.filePath(name); }
    trainbench::ModelWeights weights(const QString& name) const {
        return trainbench::load_weights(path(name + ".safetensors").toStdString());
    }

private slots:
    void initTestCase() {
        if (!trainbench::mpi_built_in())
            QSKIP("built without MPI (install libopenmpi-dev and openmpi-bin and reconfigure): pipeline stages run a "
                  "process each");
        QVERIFY(folder_.isValid());
    }

    void sameUpdateAsOneProcess_data() {
        QTest::addColumn<QString>("model");
        QTest::addColumn<int>("stages");
        QTest::addColumn<QString>("schedule");
        QTest::addColumn<int>("stepSize");
        QTest::addColumn<int>("steps");
        QTest::addColumn<QStringList>("extra");
        QTest::newRow("gpt P2 gpipe step 1") << "gpt" << 2 << "gpipe" << 1 << 12 << QStringList{};
        QTest::newRow("gpt P2 1f1b step 3") << "gpt" << 2 << "1f1b" << 3 << 12 << QStringList{};
        QTest::newRow("gpt P3 gpipe step 8") << "gpt" << 3 << "gpipe" << 8 << 12 << QStringList{};
        QTest::newRow("gpt P3 1f1b step 8") << "gpt" << 3 << "1f1b" << 8 << 12 << QStringList{};
        QTest::newRow("gpt P2 1f1b step 3 checkpointing") << "gpt" << 2 << "1f1b" << 3 << 12
                                                          << QStringList{"--gradient-checkpointing"};
        QTest::newRow("gpt P2 gpipe step 3 bf16") << "gpt" << 2 << "gpipe" << 3 << 12 << QStringList{"--precision", "bf16"};
        // fp16: the loss scaler reads the overflow flag of all stages (their norm parts summed).
        QTest::newRow("gpt P2 1f1b step 3 fp16") << "gpt" << 2 << "1f1b" << 3 << 12 << QStringList{"--precision", "fp16"};
        QTest::newRow("gpt P3 1f1b step 3 LoRA") << "gpt" << 3 << "1f1b" << 3 << 12 << QStringList{"--lora-rank", "4"};
        QTest::newRow("mlp P2 1f1b step 3, partial batches") << "mlp" << 2 << "1f1b" << 3 << 12 << QStringList{};
        QTest::newRow("mlp P3 gpipe step 3, partial batches") << "mlp" << 3 << "gpipe" << 3 << 12 << QStringList{};
        QTest::newRow("mlp P3 1f1b step 1") << "mlp" << 3 << "1f1b" << 1 << 12 << QStringList{};
        // Data parallelism inside: 2 or 3 copies of the pipeline share each batch (the MLP's
        // last batches leave a copy empty micro-batches).
        QTest::newRow("gpt P2 x D2 1f1b step 3") << "gpt" << 2 << "1f1b" << 3 << 12 << QStringList{"--processes", "4"};
        QTest::newRow("gpt P2 x D2 gpipe step 3, ZeRO-1") << "gpt" << 2 << "gpipe" << 3 << 12
                                                          << QStringList{"--processes", "4", "--zero", "1"};
        // ZeRO-2 in a GPT: the tied embedding's gradient is reduced into shards laid out per
        // stage, then summed over both stages' copies.
        QTest::newRow("gpt P2 x D2 1f1b step 3, ZeRO-2") << "gpt" << 2 << "1f1b" << 3 << 12
                                                         << QStringList{"--processes", "4", "--zero", "2"};
        QTest::newRow("gpt P3 x D2 gpipe step 8, ZeRO-2") << "gpt" << 3 << "gpipe" << 8 << 12
                                                          << QStringList{"--processes", "6", "--zero", "2"};
        QTest::newRow("mlp P2 x D3 gpipe step 3, partial batches") << "mlp" << 2 << "gpipe" << 3 << 12
                                                                   << QStringList{"--processes", "6"};
        QTest::newRow("mlp P2 x D3 1f1b step 3, ZeRO-2, partial batches")
            << "mlp" << 2 << "1f1b" << 3 << 12 << QStringList{"--processes", "6", "--zero", "2"};
    }
    void sameUpdateAsOneProcess() {
        QFETCH(QString, model);
        QFETCH(int, stages);
        QFETCH(QString, schedule);
        QFETCH(int, stepSize);
        QFETCH(int, steps);
        QFETCH(QStringList, extra);
        // --processes (data-parallel copies) goes to the pipelined run alone.
        QStringList piped_extra = {"--processes", QString::number(stages)};
        QStringList common = extra;
        if (const qsizetype at = common.indexOf("--processes"); at >= 0) {
            piped_extra = common.mid(at, 2);
            common.remove(at, 2);
        }
        if (const qsizetype at = common.indexOf("--zero"); at >= 0) {
            piped_extra += common.mid(at, 2);
            common.remove(at, 2);
        }
        const QStringList flags = (model == "gpt" ? gpt_flags(stepSize, steps) : mlp_flags(stepSize, steps)) + common;
        const QString name = QString("%1-%2-%3-%4-%5").arg(model).arg(stages).arg(schedule).arg(stepSize).arg(extra.join(""));
        const CliRun one = train(flags, name + "-one");
        QVERIFY2(one.exit_code == 0, CLI_DIAGNOSTICS(one));
        const CliRun piped = train(flags, name + "-piped",
                                   QStringList{"--pipeline-stages", QString::number(stages), "--pipeline-schedule", schedule} +
                                       piped_extra);
        QVERIFY2(piped.exit_code == 0, CLI_DIAGNOSTICS(piped));
        QVERIFY2(piped.err.trimmed().isEmpty(), qPrintable(piped.err));
        QCOMPARE(piped.out.count(QString("result: max_steps after %1 updates").arg(steps)), 1);
        const double difference = difference_in_tolerances(weights(name + "-one"), weights(name + "-piped"));
        qInfo("%s: weights after %d updates differ from one process's by %.3g of the tolerance", qPrintable(name), steps,
              difference);
        if (extra.contains("--precision")) {
            // Rounding to 8 (fp16: 11) significant bits turns a last-bit difference (the tied
            // embedding's parts added in another order) into one of a 16-bit step: within 5% of
            // what that precision itself moves the weights from fp32's.
            QStringList fp32 = flags;
            fp32.replace(fp32.indexOf("--precision") + 1, "fp32");
            const CliRun reference = train(fp32, name + "-fp32");
            QVERIFY2(reference.exit_code == 0, CLI_DIAGNOSTICS(reference));
            const double precision = difference_in_tolerances(weights(name + "-fp32"), weights(name + "-one"));
            qInfo("%s against fp32 on one process: %.3g of the tolerance", qPrintable(extra.last()), precision);
            QVERIFY2(difference <= 0.05 * precision, qPrintable(QString("%1 against %2").arg(difference).arg(precision)));
        } else {
            QVERIFY2(difference <= 1.0, qPrintable(QString::number(difference)));
        }

        // Every stage reported: its passes, and its memory peak equal to its plan.
        QVERIFY2(piped.out.contains(QString("pipeline (last update, %1 micro-batches, %2)").arg(stepSize).arg(schedule)),
                 qPrintable(piped.out));
        const QRegularExpression stage_line("  stage (\\d+): forward ([0-9.]+) ms, backward ([0-9.]+) ms, .* memory peak (.+), plan (.+)\\n");
        int reported = 0;
        for (auto it = stage_line.globalMatch(piped.out); it.hasNext();) {
            const QRegularExpressionMatch match = it.next();
            ++reported;
            QCOMPARE(match.captured(1).toInt(), reported);
            QVERIFY2(match.captured(2).toDouble() > 0.0 && match.captured(3).toDouble() > 0.0, qPrintable(match.captured(0)));
            QCOMPARE(match.captured(4), match.captured(5));
        }
        QCOMPARE(reported, stages);
        QVERIFY2(piped.out.contains(QString("over %1 pipeline stages (%2; %3 processes").arg(stages).arg(schedule).arg(piped_extra[1])),
                 qPrintable(piped.out));
    }

    // A pipeline's checkpoint is the file one process writes: resumed by the same pipeline it
    // continues bit for bit; resumed by one process, or one process's resumed by the pipeline,
    // it continues within float rounding. With ZeRO sharding a stage's optimizer state over its
    // copies, and QLoRA's NF4 storage.
    void checkpointResumesInAnyLayout_data() {
        QTest::addColumn<QString>("model");
        QTest::addColumn<QStringList>("pipeline");
        QTest::addColumn<QStringList>("extra");
        QTest::newRow("gpt P2 x D2, ZeRO-1") << "gpt" << QStringList{"--pipeline-stages", "2", "--processes", "4", "--zero", "1"}
                                             << QStringList{};
        QTest::newRow("gpt P2 x D2, ZeRO-2") << "gpt" << QStringList{"--pipeline-stages", "2", "--processes", "4", "--zero", "2"}
                                             << QStringList{};
        QTest::newRow("gpt P2, QLoRA") << "gpt" << QStringList{"--pipeline-stages", "2", "--processes", "2"}
                                       << QStringList{"--lora-rank", "4", "--lora-base", "nf4"};
        QTest::newRow("mlp P3, gpipe") << "mlp" << QStringList{"--pipeline-stages", "3", "--processes", "3", "--pipeline-schedule", "gpipe"}
                                       << QStringList{};
        QTest::newRow("mlp P2 x D2, ZeRO-2") << "mlp" << QStringList{"--pipeline-stages", "2", "--processes", "4", "--zero", "2"}
                                             << QStringList{};
    }
    void checkpointResumesInAnyLayout() {
        QFETCH(QString, model);
        QFETCH(QStringList, pipeline);
        QFETCH(QStringList, extra);
        auto flags = [&](int steps) { return (model == "gpt" ? gpt_flags(3, steps) : mlp_flags(3, steps)) + extra; };
        const QString name = "resume-" + QString(QTest::currentDataTag()).replace(QRegularExpression("[^a-zA-Z0-9]"), "_");
        const QString piped_folder = path(name + "-piped-checkpoint");
        const QString one_folder = path(name + "-one-checkpoint");
        const QList<std::pair<QString, QStringList>> runs{
            {"straight", flags(12) + pipeline},
            {"piped-half", flags(6) + pipeline + QStringList{"--checkpoint-every", "6", "--checkpoint-dir", piped_folder}},
            {"one-half", flags(6) + QStringList{"--checkpoint-every", "6", "--checkpoint-dir", one_folder}},
            {"piped-then-piped", flags(12) + pipeline + QStringList{"--resume", piped_folder}},
            {"piped-then-one", flags(12) + QStringList{"--resume", piped_folder}},
            {"one-then-piped", flags(12) + pipeline + QStringList{"--resume", one_folder}},
        };
        for (const auto& [run_name, run_flags] : runs) {
            const CliRun run = train(run_flags, name + "-" + run_name);
            QVERIFY2(run.exit_code == 0, CLI_DIAGNOSTICS(run));
            QVERIFY2(run.err.trimmed().isEmpty(), qPrintable(run.err));
        }
        QCOMPARE(difference_in_tolerances(weights(name + "-straight"), weights(name + "-piped-then-piped")), 0.0);
        for (const QString resumed : {"piped-then-one", "one-then-piped"}) {
            const double difference = difference_in_tolerances(weights(name + "-straight"), weights(name + "-" + resumed));
            qInfo("%s: %s differs from the pipeline's straight run by %.3g of the tolerance", qPrintable(name),
                  qPrintable(resumed), difference);
            QVERIFY2(difference <= 1.0, qPrintable(QString::number(difference)));
        }
    }

    // A GPT's text samples come through the stages: the window forward, the last stage's logits
    // back to process 0, which draws. The text is one process's: the weights differ by rounding
    // alone, so a character could change only where a draw falls within ~1e-8 of a boundary.
    void textSamplesMatchOneProcess_data() {
        QTest::addColumn<QStringList>("pipeline");
        QTest::newRow("P2") << QStringList{"--pipeline-stages", "2", "--processes", "2"};
        QTest::newRow("P3 x D2, gpipe") << QStringList{"--pipeline-stages", "3", "--processes", "6", "--pipeline-schedule", "gpipe"};
    }
    void textSamplesMatchOneProcess() {
        QFETCH(QStringList, pipeline);
        QStringList flags = gpt_flags(3, 100);
        flags.replace(flags.indexOf("--epochs") + 1, "2");
        flags << "--sample-chars" << "60";
        const CliRun one = run_cli(flags, 180000);
        QVERIFY2(one.exit_code == 0, CLI_DIAGNOSTICS(one));
        const CliRun piped = run_cli(flags + pipeline, 180000);
        QVERIFY2(piped.exit_code == 0, CLI_DIAGNOSTICS(piped));
        auto samples = [](const QString& out) {
            QStringList found;
            const QRegularExpression sample("sample after update (\\d+):\\n((?:  .*\\n)+)");
            for (auto it = sample.globalMatch(out); it.hasNext();) found << it.next().captured(0);
            return found;
        };
        const QStringList expected = samples(one.out);
        QCOMPARE(expected.size(), 2);  // one per epoch
        QCOMPARE(samples(piped.out), expected);
    }

    // Eight micro-batches on 2 stages: GPipe holds all eight on the first stage, 1F1B two.
    void oneFOneBHoldsLessThanGPipe() {
        const QStringList flags = gpt_flags(8, 2) << "--pipeline-stages" << "2" << "--processes" << "2";
        const CliRun gpipe = train(flags, "gpipe", {"--pipeline-schedule", "gpipe"});
        const CliRun f1b = train(flags, "1f1b", {"--pipeline-schedule", "1f1b"});
        QVERIFY2(gpipe.exit_code == 0, CLI_DIAGNOSTICS(gpipe));
        QVERIFY2(f1b.exit_code == 0, CLI_DIAGNOSTICS(f1b));
        const QRegularExpression activations("peak memory: engine .* \\(activations ([0-9.]+) (KiB|MiB)");
        auto kib = [&](const CliRun& run) {
            const QRegularExpressionMatch m = activations.match(run.out);
            return m.captured(1).toDouble() * (m.captured(2) == "MiB" ? 1024.0 : 1.0);
        };
        QVERIFY2(kib(f1b) * 2.0 < kib(gpipe), qPrintable(f1b.out + gpipe.out));
    }

    // `plan` gives each stage's bytes before anything runs; a run's processes then hold exactly
    // that at their peak (the event stream's integers), GPipe and 1F1B, with checkpointing.
    void planEqualsEveryStagesPeak_data() {
        QTest::addColumn<QString>("schedule");
        QTest::addColumn<QStringList>("extra");
        QTest::newRow("1f1b") << "1f1b" << QStringList{};
        QTest::newRow("gpipe, checkpointing") << "gpipe" << QStringList{"--gradient-checkpointing"};
    }
    void planEqualsEveryStagesPeak() {
        QFETCH(QString, schedule);
        QFETCH(QStringList, extra);
        const QStringList flags = gpt_flags(4, 3) + extra +
                                  QStringList{"--pipeline-stages", "3", "--processes", "3", "--pipeline-schedule", schedule};
        QStringList plan_flags = flags;
        plan_flags[0] = "plan";
        const CliRun plan = run_cli(plan_flags << "--json", 60000);
        QVERIFY2(plan.exit_code == 0, CLI_DIAGNOSTICS(plan));
        const QJsonArray planned = QJsonDocument::fromJson(plan.out.toUtf8()).object().value("pipeline_stages").toArray();
        QCOMPARE(planned.size(), 3);
        const QString events = path("plan-" + schedule + ".jsonl");
        const CliRun run = run_cli(QStringList(flags) << "--events-out" << events, 60000);
        QVERIFY2(run.exit_code == 0, CLI_DIAGNOSTICS(run));
        QFile file(events);
        QVERIFY(file.open(QIODevice::ReadOnly));
        QJsonArray stages;
        for (const QByteArray& line : file.readAll().split('\n')) {
            const QJsonObject event = QJsonDocument::fromJson(line).object();
            if (event.value("event").toString() == "update") stages = event.value("pipeline_stages").toArray();
        }
        QCOMPARE(stages.size(), 3);
        for (int s = 0; s < 3; ++s) {
            const qint64 expected = planned[s].toObject().value("per_process_total_bytes").toInteger();
            QCOMPARE(stages[s].toObject().value("planned_bytes").toInteger(), expected);
            QCOMPARE(stages[s].toObject().value("peak_bytes").toInteger(), expected);
            QCOMPARE(stages[s].toObject().value("passes").toArray().size(), 8);  // a forward and a backward each
        }
    }

    void wrongSettingsGetOneLine_data() {
        QTest::addColumn<QStringList>("flags");
        QTest::addColumn<QString>("expected");
        const QStringList gpt = gpt_flags(2, 2);
        QTest::newRow("more stages than blocks") << (gpt + QStringList{"--pipeline-stages", "5", "--processes", "5"})
                                                 << "5 stages are more than the model's 4 blocks";
        QTest::newRow("more stages than layers") << (mlp_flags(2, 2) + QStringList{"--pipeline-stages", "5", "--processes", "5"})
                                                 << "more than the model's 4 layers";
        QTest::newRow("processes not a multiple") << (gpt + QStringList{"--pipeline-stages", "2", "--processes", "3"})
                                                  << "--processes 3 must be a multiple of it";
        QTest::newRow("no processes given") << (gpt + QStringList{"--pipeline-stages", "2"}) << "(e.g. --processes 2)";
        QTest::newRow("unknown schedule") << (gpt + QStringList{"--pipeline-stages", "2", "--processes", "2", "--pipeline-schedule", "zigzag"})
                                          << "expected 1f1b or gpipe";
        QTest::newRow("cuda") << (gpt + QStringList{"--pipeline-stages", "2", "--processes", "2", "--device", "cuda"})
                              << "the CUDA engine runs no pipeline stages yet";
    }
    void wrongSettingsGetOneLine() {
        QFETCH(QStringList, flags);
        QFETCH(QString, expected);
        const CliRun run = run_cli(flags, 60000);
        QCOMPARE(run.exit_code, 2);
        QVERIFY2(run.err.contains(expected), qPrintable(run.err));
        QCOMPARE(run.err.trimmed().count('\n'), 0);
        QVERIFY2(!run.err.contains("mpiexec") && !run.err.contains("mpirun"), qPrintable(run.err));
    }
};

QTEST_GUILESS_MAIN(CliPipelineTest)
#include "test_cli_pipeline.moc"
