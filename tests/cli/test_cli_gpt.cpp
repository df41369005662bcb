// `trainbench-cli train --model gpt` as a user runs it: --model gpt switches to the GPT's
// defaults (shown by --print-config), a short run on a text file reports tokens/s and writes
// them to the metrics CSV, and wrong input gets one line naming the flag to change.
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>

#include "cli/cli_process.hpp"
#include "trainbench/processes.hpp"

class CliGptTest : public QObject {
    Q_OBJECT

    QTemporaryDir scratch_;
    QString text_;

    QStringList small_gpt(const QStringList& extra = {}) const {
        return QStringList{"train", "--model", "gpt", "--dataset", "text:" + text_, "--n-layer", "1", "--n-head", "2",
                           "--n-embd", "16", "--block-size", "16", "--batch-size", "8", "--threads", "1"} +
               extra;
    }

private slots:
    void initTestCase() {
        QVERIFY(scratch_.isValid());
        text_ = scratch_.filePath("text.txt");
        QVERIFY(write_repeated_text(text_, kGptTestLine, 200));
    }

    void model_gpt_prints_the_gpt_defaults() {
        const CliRun run = run_cli({"train", "--model", "gpt", "--n-layer", "6", "--print-config"});
        QCOMPARE(run.exit_code, 0);
        const QJsonObject config = QJsonDocument::fromJson(run.out.toUtf8()).object();
        QCOMPARE(config["model"].toString(), QString("gpt"));
        QCOMPARE(config["dataset"].toString(), QString("kjv"));
        QCOMPARE(config["n_layer"].toInt(), 6);
        QCOMPARE(config["block_size"].toInt(), 128);
        QCOMPARE(config["optimizer"].toObject()["kind"].toString(), QString("adamw"));
        QCOMPARE(config["optimizer"].toObject()["beta2"].toDouble(), 0.95);
        QCOMPARE(config["optimizer"].toObject()["weight_decay"].toDouble(), 0.1);
        QCOMPARE(config["clip_grad_norm"].toDouble(), 1.0);
        QCOMPARE(config["schedule"].toObject()["kind"].toString(), QString("cosine"));
    }

    void config_file_naming_gpt_starts_from_its_defaults() {
        const QString path = scratch_.filePath("gpt.json");
        QFile file(path);
        QVERIFY(file.open(QIODevice::WriteOnly));
        file.write(R"({"model": "gpt", "n_embd": 64})");
        file.close();
        const CliRun run = run_cli({"train", "--config", path, "--print-config"});
        QCOMPARE(run.exit_code, 0);
        const QJsonObject config = QJsonDocument::fromJson(run.out.toUtf8()).object();
        QCOMPARE(config["n_embd"].toInt(), 64);
        QCOMPARE(config["optimizer"].toObject()["kind"].toString(), QString("adamw"));
    }

    void short_run_reports_tokens_per_second() {
        const QString metrics = scratch_.filePath("gpt.csv");
        const QString weights = scratch_.filePath("gpt.safetensors");
        const CliRun run =
            run_cli(small_gpt({"--max-steps", "6", "--eval-every", "3", "--metrics-out", metrics, "--save-weights", weights}));
        QVERIFY2(run.exit_code == 0, qPrintable(run.err));
        QVERIFY2(run.out.contains("plan: GPT L1 H2 C16 T16"), qPrintable(run.out));
        QVERIFY2(run.out.contains("global batch 8 (128 tokens)"), qPrintable(run.out));
        QVERIFY2(run.out.contains("tokens/s"), qPrintable(run.out));
        QVERIFY2(run.out.contains("eval, epoch 1 (update 3)"), qPrintable(run.out));
        QVERIFY2(run.out.contains("sample after update 3:\n  "), qPrintable(run.out));  // --sample-chars 200 by default
        const auto table = read_metrics_csv(metrics);
        QVERIFY(table.has_value());
        QCOMPARE(table->rows.size(), qsizetype{6});
        QVERIFY(table->cell(5, "tokens_per_second").toDouble() > 0.0);
        QVERIFY(!table->cell(2, "val_loss").isEmpty());  // the --eval-every evaluation at update 3

        // The saved weights carry nanoGPT's names and start a run of the same shape.
        const CliRun resumed = run_cli(small_gpt({"--max-steps", "1", "--init-weights", weights}));
        QVERIFY2(resumed.exit_code == 0, qPrintable(resumed.err));
        const CliRun wider = run_cli(small_gpt({"--max-steps", "1", "--init-weights", weights, "--n-embd", "32"}));
        QVERIFY(wider.exit_code != 0);
        QCOMPARE(wider.error_lines().size(), qsizetype{1});
        QVERIFY2(wider.err.contains("--n-embd"), qPrintable(wider.err));
    }

    // The technique table on a GPT, where the memory techniques have activations to act on.
    void compare_measures_the_techniques_on_a_gpt() {
        const QString csv = scratch_.filePath("compare.csv");
        const QString markdown = scratch_.filePath("compare.md");
        // Two blocks: checkpointing recomputes the first (the last block's are still resident).
        QStringList arguments =
            small_gpt({"--n-layer", "2", "--max-steps", "3", "--out-csv", csv, "--out-md", markdown});
        arguments[0] = "compare";
        const CliRun run = run_cli(arguments, 300000);
        QVERIFY2(run.exit_code == 0, qPrintable(run.err));
        const auto table = read_metrics_csv(csv);
        QVERIFY(table.has_value());
        // With MPI, four more rows run 2 processes (data parallelism, ZeRO-1, ZeRO-2, 2 pipeline stages).
        QCOMPARE(table->rows.size(), qsizetype{trainbench::mpi_built_in() ? 17 : 13});
        for (int i = 0; i < table->rows.size(); ++i) {
            QVERIFY2(table->cell(i, "ok") == "1", qPrintable(table->cell(i, "error")));
            QVERIFY(table->cell(i, "tokens_per_second").toDouble() > 0.0);
        }
        const auto activations = [&](int row) { return table->cell(row, "peak_activation_bytes").toLongLong(); };
        QCOMPARE(table->cell(2, "technique"), QString("gradient accumulation"));
        QVERIFY(activations(2) < activations(0));
        QCOMPARE(table->cell(3, "technique"), QString("gradient checkpointing"));
        QVERIFY(activations(3) < activations(0));
        // Eager attention holds the gradient of every head's probabilities at once.
        const auto peak = [&](int row) { return table->cell(row, "peak_memory_bytes").toLongLong(); };
        QCOMPARE(table->cell(9, "technique"), QString("fused kernels (torch.compile)"));
        QVERIFY2(peak(9) > peak(0), qPrintable(table->cell(9, "peak_memory_bytes") + " vs " + table->cell(0, "peak_memory_bytes")));
        // LoRA: no gradients or optimizer state for the frozen base.
        QCOMPARE(table->cell(10, "technique"), QString("PEFT (LoRA)"));
        QVERIFY2(peak(10) < peak(0), qPrintable(table->cell(10, "peak_memory_bytes") + " vs " + table->cell(0, "peak_memory_bytes")));
        // QLoRA: the same, with the adapted layers' base in 4 bits.
        QCOMPARE(table->cell(11, "technique"), QString("PEFT (QLoRA, 4-bit base)"));
        QVERIFY2(peak(11) < peak(10), qPrintable(table->cell(11, "peak_memory_bytes") + " vs " + table->cell(10, "peak_memory_bytes")));
        // DoRA: LoRA's, plus the magnitudes and one more saved activation per adapted layer.
        QCOMPARE(table->cell(12, "technique"), QString("PEFT (DoRA)"));
        QVERIFY2(activations(12) > activations(10), qPrintable(table->cell(12, "peak_activation_bytes") + " vs " + table->cell(10, "peak_activation_bytes")));
        QFile md(markdown);
        QVERIFY(md.open(QIODevice::ReadOnly));
        const QString text = QString::fromUtf8(md.readAll());
        QVERIFY2(text.contains("| tokens/s |") && text.contains("GPT L2 H2 C16 T16"), qPrintable(text));
    }

    void wrong_input_gets_one_line() {
        struct Case {
            QStringList arguments;
            QString expected;
        };
        const QList<Case> cases = {
            {small_gpt({"--n-head", "3"}), "heads do not divide --n-embd"},
            {small_gpt({"--dataset", "spirals"}), "use --dataset kjv or --dataset text:PATH"},
            {{"train", "--dataset", "text:" + text_}, "use --model gpt"},
            {small_gpt({"--dataset", "text:" + scratch_.filePath("missing.txt")}), "does not exist"},
            {small_gpt({"--block-size", "100000"}), "lower --block-size"},
            {small_gpt({"--model", "resnet"}), "unknown model 'resnet'"},
        };
        for (const Case& c : cases) {
            const CliRun run = run_cli(c.arguments);
            QVERIFY2(run.exit_code != 0, qPrintable(c.arguments.join(' ')));
            QVERIFY2(run.error_lines().size() == 1, qPrintable(run.err));
            QVERIFY2(run.err.contains(c.expected), qPrintable(run.err + " lacks " + c.expected));
        }
    }
};

QTEST_GUILESS_MAIN(CliGptTest)
#include "test_cli_gpt.moc"
