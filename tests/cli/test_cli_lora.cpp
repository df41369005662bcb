// LoRA fine-tuning through the CLI as a user runs it: pretrain a small GPT and save it, fine-tune
// it with --lora-rank from --init-weights, save the adapters (PEFT's names, the rank and alpha in
// the file's metadata) and the merged model, which a plain run then loads; the plan shows the
// trainable share and the memory plan gradients and optimizer state for the adapters only. The
// same with QLoRA's 4-bit base, stopped and resumed. Wrong input gets one line naming the flag.
#include <QFile>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

#include <map>

#include "cli/cli_process.hpp"
#include "trainbench/weights.hpp"

class CliLoraTest : public QObject {
    Q_OBJECT

    QTemporaryDir scratch_;
    QString text_;

    QStringList small_gpt(const QStringList& extra = {}) const {
        return QStringList{"train", "--model", "gpt", "--dataset", "text:" + text_, "--n-layer", "2", "--n-head", "2",
                           "--n-embd", "32", "--block-size", "16", "--batch-size", "8", "--threads", "1",
                           "--eval-samples", "16", "--sample-chars", "0"} +
               extra;
    }

    // "gradients 12 KiB" of the memory plan line, in bytes.
    static double planned(const QString& out, const QString& category) {
        const QRegularExpression pattern(category + " ([0-9.]+) (B|KiB|MiB)");
        const QRegularExpressionMatch match = pattern.match(out);
        if (!match.hasMatch()) return -1.0;
        const double unit = match.captured(2) == "MiB" ? 1048576.0 : match.captured(2) == "KiB" ? 1024.0 : 1.0;
        return match.captured(1).toDouble() * unit;
    }

private slots:
    void initTestCase() {
        QVERIFY(scratch_.isValid());
        text_ = scratch_.filePath("text.txt");
        QVERIFY(write_repeated_text(text_, kGptTestLine, 200));
    }

    void pretrain_then_fine_tune_then_load_the_merged_model() {
        const QString base = scratch_.filePath("base.safetensors");
        const QString adapters = scratch_.filePath("adapters.safetensors");
        const QString merged = scratch_.filePath("merged.safetensors");
        const CliRun pretrain = run_cli(small_gpt({"--max-steps", "20", "--save-weights", base}));
        QVERIFY2(pretrain.exit_code == 0, CLI_DIAGNOSTICS(pretrain));

        const CliRun tune = run_cli(small_gpt({"--max-steps", "20", "--init-weights", base, "--lora-rank", "4",
                                               "--lora-alpha", "8", "--save-adapters", adapters, "--save-weights",
                                               merged}));
        QVERIFY2(tune.exit_code == 0, CLI_DIAGNOSTICS(tune));
        // 2 blocks x 4 targets: A [4, in] and B [out, 4] each; C = 32.
        const int64_t adapter_count = 2 * 4 * ((32 + 96) + (32 + 32) + (32 + 128) + (128 + 32));
        QVERIFY2(tune.out.contains(QString("%1 of them trainable").arg(adapter_count)), qPrintable(tune.out));
        QVERIFY2(tune.out.contains("LoRA r4"), qPrintable(tune.out));
        // Gradients: the adapters' fp32 values; AdamW's state: two of them.
        QCOMPARE(planned(tune.out, "gradients"), double(adapter_count * 4));
        QCOMPARE(planned(tune.out, "optimizer_state"), double(2 * adapter_count * 4));
        QVERIFY2(tune.out.contains("adapters merged into the base"), qPrintable(tune.out));

        std::map<std::string, std::string> metadata;
        const auto saved = trainbench::read_safetensors(adapters.toStdString(), &metadata);
        QCOMPARE(int(saved.size()), 16);
        for (const auto& t : saved)
            QVERIFY2(t.name.rfind("base_model.model.transformer.h.", 0) == 0 &&
                         (t.name.find(".lora_A.weight") != std::string::npos || t.name.find(".lora_B.weight") != std::string::npos),
                     t.name.c_str());
        QCOMPARE(metadata.at("lora_rank"), std::string("4"));
        QCOMPARE(metadata.at("lora_targets"), std::string("attn,mlp"));

        // The merged file is a plain GPT's: it loads without LoRA, and it is not the base.
        const auto merged_tensors = trainbench::load_weights(merged.toStdString());
        const auto base_tensors = trainbench::load_weights(base.toStdString());
        QCOMPARE(merged_tensors.tensors.size(), base_tensors.tensors.size());
        QVERIFY(merged_tensors.find("transformer.h.0.attn.c_attn.weight")->data !=
                base_tensors.find("transformer.h.0.attn.c_attn.weight")->data);
        QVERIFY(merged_tensors.find("transformer.h.0.ln_1.weight")->data == base_tensors.find("transformer.h.0.ln_1.weight")->data);
        const CliRun plain = run_cli(small_gpt({"--max-steps", "1", "--init-weights", merged}));
        QVERIFY2(plain.exit_code == 0, CLI_DIAGNOSTICS(plain));
        // The adapters file is not a model to start from; the message says what is.
        const CliRun wrong = run_cli(small_gpt({"--max-steps", "1", "--lora-rank", "4", "--init-weights", adapters}));
        QVERIFY2(wrong.exit_code != 0 && wrong.err.contains("holds LoRA adapters alone (--save-adapters), not a model"),
                 CLI_DIAGNOSTICS(wrong));
        QCOMPARE(wrong.err.trimmed().count('\n'), 0);
    }

    // The real use: fine-tune on another text. The model reads it with the token ids it learnt
    // (the weights file carries its vocabulary); symbols it has no token for are left out, and
    // the run says so.
    void fine_tune_on_another_text() {
        const QString base = scratch_.filePath("base_for_other.safetensors");
        const CliRun pretrain = run_cli(small_gpt({"--max-steps", "5", "--save-weights", base}));
        QVERIFY2(pretrain.exit_code == 0, CLI_DIAGNOSTICS(pretrain));
        const QString other = scratch_.filePath("other.txt");
        QVERIFY(write_repeated_text(other, "the word was with the text; & the text was 42 words.\n", 100));
        QStringList arguments = small_gpt({"--max-steps", "5", "--init-weights", base, "--lora-rank", "2"});
        arguments[arguments.indexOf("text:" + text_)] = "text:" + other;
        const CliRun tune = run_cli(arguments);
        QVERIFY2(tune.exit_code == 0, CLI_DIAGNOSTICS(tune));
        QVERIFY2(tune.out.contains("tokenized with the vocabulary of the initial weights") &&
                     tune.out.contains("left out 400 bytes of 4 symbols it lacks ('&', '2', '4', ';')"),
                 qPrintable(tune.out));
    }

    // QLoRA as a user runs it: the same fine-tune with --lora-base nf4. The plan names it and
    // counts the 4-bit base; a run stopped at a checkpoint and resumed ends with the same merged
    // weights as one that ran through (the checkpoint carries the NF4 storage); the merged model
    // (dequantized base + adapters) loads as a plain GPT.
    void qlora_fine_tune_resumes_to_the_same_weights() {
        const QString base = scratch_.filePath("base_for_qlora.safetensors");
        const CliRun pretrain = run_cli(small_gpt({"--max-steps", "5", "--save-weights", base}));
        QVERIFY2(pretrain.exit_code == 0, CLI_DIAGNOSTICS(pretrain));
        const QStringList qlora = small_gpt({"--init-weights", base, "--lora-rank", "4", "--lora-base", "nf4"});
        const QString whole = scratch_.filePath("qlora_whole.safetensors");
        const CliRun through = run_cli(qlora + QStringList{"--max-steps", "6", "--save-weights", whole});
        QVERIFY2(through.exit_code == 0, CLI_DIAGNOSTICS(through));
        QVERIFY2(through.out.contains("QLoRA r4"), qPrintable(through.out));
        QVERIFY2(through.out.contains("adapters merged into the base"), qPrintable(through.out));
        // The base of the 8 adapted layers (2 blocks x (96 + 32 + 128 + 32) x 32 weights) in NF4
        // at about 4.1 bits a weight, instead of 4 bytes: the parameters are under 1/3 of LoRA's.
        const CliRun lora = run_cli(small_gpt({"--init-weights", base, "--lora-rank", "4", "--max-steps", "1"}));
        QVERIFY2(lora.exit_code == 0, CLI_DIAGNOSTICS(lora));
        QVERIFY2(planned(through.out, "parameters") > 0 && planned(through.out, "parameters") < planned(lora.out, "parameters") / 3,
                 qPrintable(through.out + lora.out));

        const QString checkpoints = scratch_.filePath("qlora_checkpoints");
        const CliRun half = run_cli(qlora + QStringList{"--max-steps", "3", "--checkpoint-every", "3", "--checkpoint-dir", checkpoints});
        QVERIFY2(half.exit_code == 0, CLI_DIAGNOSTICS(half));
        const QString resumed_path = scratch_.filePath("qlora_resumed.safetensors");
        const CliRun resumed = run_cli(qlora + QStringList{"--max-steps", "6", "--resume", checkpoints, "--save-weights", resumed_path});
        QVERIFY2(resumed.exit_code == 0, CLI_DIAGNOSTICS(resumed));
        QVERIFY2(resumed.out.contains("resumed from the checkpoint of update 3"), qPrintable(resumed.out));
        const auto a = trainbench::load_weights(whole.toStdString());
        const auto b = trainbench::load_weights(resumed_path.toStdString());
        QCOMPARE(a.tensors.size(), b.tensors.size());
        for (const auto& t : a.tensors) QVERIFY2(b.find(t.name)->data == t.data, t.name.c_str());
        const CliRun plain = run_cli(small_gpt({"--max-steps", "1", "--init-weights", whole}));
        QVERIFY2(plain.exit_code == 0, CLI_DIAGNOSTICS(plain));
    }

    // DoRA through the CLI: the plan names it, the adapters file holds the magnitudes under
    // PEFT's names with use_dora in its metadata, and the merged model loads as a plain GPT.
    void dora_fine_tune_saves_magnitudes_as_peft() {
        const QString base = scratch_.filePath("base_for_dora.safetensors");
        const CliRun pretrain = run_cli(small_gpt({"--max-steps", "5", "--save-weights", base}));
        QVERIFY2(pretrain.exit_code == 0, CLI_DIAGNOSTICS(pretrain));
        const QString adapters = scratch_.filePath("dora_adapters.safetensors");
        const QString merged = scratch_.filePath("dora_merged.safetensors");
        const CliRun tune = run_cli(small_gpt({"--max-steps", "5", "--init-weights", base, "--lora-rank", "4", "--dora",
                                               "--save-adapters", adapters, "--save-weights", merged}));
        QVERIFY2(tune.exit_code == 0, CLI_DIAGNOSTICS(tune));
        QVERIFY2(tune.out.contains("DoRA r4"), qPrintable(tune.out));
        std::map<std::string, std::string> metadata;
        const auto saved = trainbench::read_safetensors(adapters.toStdString(), &metadata);
        QCOMPARE(int(saved.size()), 24);  // A, B and the magnitude of 8 layers
        QCOMPARE(metadata.at("use_dora"), std::string("true"));
        bool found = false;
        for (const auto& t : saved)
            if (t.name == "base_model.model.transformer.h.1.attn.c_proj.lora_magnitude_vector") found = t.shape == std::vector<int64_t>{32};
        QVERIFY(found);
        const CliRun plain = run_cli(small_gpt({"--max-steps", "1", "--init-weights", merged}));
        QVERIFY2(plain.exit_code == 0, CLI_DIAGNOSTICS(plain));
    }

    // The README's fine-tune with a 4-bit base: a GPT pretrained on the King James Bible, tuned
    // on the GPL with LoRA and with QLoRA for the same updates. QLoRA's validation loss is
    // within 2% of LoRA's (the base moved by NF4's rounding, the adapters learn the same), and
    // the plan puts its base at 4.1 to 4.2 bits a weight.
    void qlora_reaches_loras_loss_on_another_text() {
        const QString base = scratch_.filePath("kjv_base.safetensors");
        QStringList kjv = small_gpt({"--max-steps", "60", "--save-weights", base});
        kjv[kjv.indexOf("text:" + text_)] = "kjv";
        const CliRun pretrain = run_cli(kjv, 300000);
        if (pretrain.exit_code != 0 && pretrain.err.contains("bible-kjv"))
            QSKIP("Debian's bible-kjv is not installed: no King James Bible to pretrain on");
        QVERIFY2(pretrain.exit_code == 0, CLI_DIAGNOSTICS(pretrain));
        const QString gpl = "/usr/share/common-licenses/GPL-3";
        QVERIFY2(QFile::exists(gpl), "Debian's base-files ships the GPL");
        auto tune = [&](const QStringList& extra) {
            QStringList arguments = small_gpt(QStringList{"--epochs", "4", "--init-weights", base, "--lora-rank", "8",
                                                          "--lr", "3e-3"} + extra);
            arguments[arguments.indexOf("text:" + text_)] = "text:" + gpl;
            return run_cli(arguments, 300000);
        };
        auto last_validation = [](const QString& out) {
            const QRegularExpression pattern("validation: loss ([0-9.]+)");
            double loss = -1.0;
            for (auto it = pattern.globalMatch(out); it.hasNext();) loss = it.next().captured(1).toDouble();
            return loss;
        };
        const CliRun lora = tune({});
        QVERIFY2(lora.exit_code == 0, CLI_DIAGNOSTICS(lora));
        const CliRun qlora = tune({"--lora-base", "nf4"});
        QVERIFY2(qlora.exit_code == 0, CLI_DIAGNOSTICS(qlora));
        const double a = last_validation(lora.out), b = last_validation(qlora.out);
        QVERIFY2(a > 0 && b > 0 && std::abs(b - a) < 0.02 * a, qPrintable(QString("LoRA %1, QLoRA %2").arg(a).arg(b)));
        const QRegularExpressionMatch bits = QRegularExpression("in 4-bit NF4 at ([0-9.]+) bits each").match(qlora.out);
        QVERIFY2(bits.hasMatch() && bits.captured(1).toDouble() >= 4.1 && bits.captured(1).toDouble() <= 4.2,
                 qPrintable(qlora.out));
    }

    void wrong_input_gets_one_line() {
        struct Case {
            QStringList arguments;
            QString expected;
        };
        const QList<Case> cases = {
            {small_gpt({"--lora-rank", "4", "--lora-targets", "attn,q_proj"}),
             "invalid --lora-targets: unknown LoRA target 'q_proj'; use c_attn, c_proj, c_fc, attn or mlp"},
            {small_gpt({"--lora-rank", "4", "--device", "cuda"}), "the CUDA engine has no LoRA kernels yet"},
            {small_gpt({"--save-adapters", scratch_.filePath("a.safetensors")}),
             "there are no adapters to save without LoRA; add --model gpt --lora-rank R"},
            {small_gpt({"--lora-rank", "-1"}), "--lora-rank"},
            {small_gpt({"--lora-rank", "100000"}),
             "invalid --lora-rank: rank 100000 is more than the adapted matrices can use: each has --n-embd 32 channels "
             "on one side, which bounds the rank of its update; use --lora-rank 32 or less"},
            {small_gpt({"--lora-rank", "4", "--lora-alpha", "nan"}), "--lora-alpha"},
            {{"train", "--dataset", "spirals", "--lora-rank", "4"}, "LoRA adapts a GPT's attention and MLP layers; use --model gpt"},
            {small_gpt({"--lora-base", "nf4"}),
             "invalid --lora-base: a 4-bit base (QLoRA) is LoRA's frozen base; add --model gpt --lora-rank R or leave out "
             "--lora-base nf4"},
            {small_gpt({"--lora-rank", "4", "--lora-base", "int4"}), "unknown lora_base 'int4': expected full or nf4"},
            {small_gpt({"--dora"}),
             "invalid --dora: DoRA decomposes LoRA's adapted weights; add --model gpt --lora-rank R or leave out --dora"},
            {small_gpt({"--lora-rank", "4", "--dora", "--lora-base", "nf4"}),
             "invalid --dora: DoRA on a 4-bit base (QDoRA) is not supported yet"},
        };
        for (const Case& c : cases) {
            const CliRun run = run_cli(c.arguments);
            QVERIFY2(run.exit_code != 0, CLI_DIAGNOSTICS(run));
            QVERIFY2(run.err.contains(c.expected), qPrintable(run.err + " lacks " + c.expected));
            QCOMPARE(run.err.trimmed().count('\n'), 0);
        }
        QVERIFY(!QFile::exists(scratch_.filePath("a.safetensors")));
    }
};

QTEST_APPLESS_MAIN(CliLoraTest)
#include "test_cli_lora.moc"
