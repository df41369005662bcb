// Flag handling of `trainbench-cli train`: bad input fails with one clear line and leaves no
// file behind; --config and flags combine as documented; --print-config round-trips.
#include <QTemporaryDir>

#include <string>

#include "cli/cli_process.hpp"
#include "trainbench/config_fields.hpp"
#include "trainbench/config_json.hpp"

namespace {

using trainbench::ConfigField;
using trainbench::FieldKind;

// A value other than the default for a field's flag, and the same setting as config JSON.
struct FlagSetting {
    QStringList arguments;
    std::string json;  // the value: 8, "bf16", [32, 16], ...
};

FlagSetting unusual_setting(const ConfigField& field) {
    const QString flag = QString::fromStdString(field.flag);
    switch (field.kind) {
        case FieldKind::integer:
        case FieldKind::unsigned_integer: {
            // No default is 8 (n_head 8 divides n_embd); a field capped below 8 takes its maximum.
            const std::optional<double> max = field.range ? field.range->max : std::nullopt;
            const QString value = QString::number(max && *max < 8 ? static_cast<int>(*max) : 8);
            return {{flag, value}, value.toStdString()};
        }
        case FieldKind::real:
        case FieldKind::optional_real: return {{flag, "0.375"}, "0.375"};
        case FieldKind::boolean: return {{flag}, field.switch_sets ? "true" : "false"};
        case FieldKind::text: {
            const std::string text = field.key == "device" ? "cuda:1" : "unusual value";
            return {{flag, QString::fromStdString(text)}, "\"" + text + "\""};
        }
        case FieldKind::choice: {
            const std::string last = field.choices().back();  // never the default
            return {{flag, QString::fromStdString(last)}, "\"" + last + "\""};
        }
        case FieldKind::byte_size: return {{flag, "64MiB"}, "67108864"};
        case FieldKind::layer_widths: return {{flag, "32,16"}, "[32, 16]"};
    }
    return {};
}

// {"optimizer": {"lr": 0.375}} for the key "optimizer.lr".
std::string json_member(const std::string& key, const std::string& value) {
    const auto dot = key.find('.');
    if (dot == std::string::npos) return "\"" + key + "\": " + value;
    return "\"" + key.substr(0, dot) + "\": {\"" + key.substr(dot + 1) + "\": " + value + "}";
}

}  // namespace

class CliArgumentsTest : public QObject {
    Q_OBJECT

private:
    QTemporaryDir scratch_;
    QString path(const QString& name) const { return scratch_.filePath(name); }
    static void write_file(const QString& path, const QByteArray& bytes) {
        QFile file(path);
        QVERIFY(file.open(QIODevice::WriteOnly | QIODevice::Truncate));
        file.write(bytes);
    }

private slots:
    void initTestCase() {
        QVERIFY(scratch_.isValid());
        write_file(path("malformed.csv"), "x1,x2,label\n0.5,1.5,0\n0.25,oops,1\n");
    }

    void bad_input_fails_with_one_line_and_no_output_data() {
        QTest::addColumn<QStringList>("arguments");
        QTest::addColumn<int>("expected_exit");
        QTest::addColumn<QString>("mentions");
        QTest::newRow("unknown flag") << QStringList{"--no-such-flag"} << 2 << "--no-such-flag";
        QTest::newRow("bad number") << QStringList{"--batch-size", "many"} << 2 << "--batch-size";
        QTest::newRow("step size 0") << QStringList{"--step-size", "0"} << 2 << "step-size";
        QTest::newRow("step size above batch")
            << QStringList{"--batch-size", "8", "--step-size", "9"} << 2 << "step_size";
        QTest::newRow("nan learning rate") << QStringList{"--lr", "nan"} << 2 << "--lr";
        QTest::newRow("unknown optimizer") << QStringList{"--optimizer", "lion"} << 2 << "lion";
        QTest::newRow("bad hidden list") << QStringList{"--hidden", "64,x"} << 2 << "--hidden";
        QTest::newRow("missing config file")
            << QStringList{"--config", "/nonexistent/run.json"} << 2 << "/nonexistent/run.json";
        QTest::newRow("missing csv")
            << QStringList{"--dataset", "csv:/nonexistent/data.csv"} << 1 << "/nonexistent/data.csv";
        QTest::newRow("malformed csv") << QStringList{"--dataset", "csv:MALFORMED"} << 1 << "oops";
        QTest::newRow("unknown fused") << QStringList{"--fused", "maybe"} << 2 << "expected on or off";
        QTest::newRow("missing init weights")
            << QStringList{"--init-weights", "/nonexistent/w.safetensors"} << 1 << "/nonexistent/w.safetensors";
    }
    void bad_input_fails_with_one_line_and_no_output() {
        QFETCH(QStringList, arguments);
        QFETCH(int, expected_exit);
        QFETCH(QString, mentions);
        arguments.replaceInStrings("MALFORMED", path("malformed.csv"));

        QTemporaryDir outputs;
        const QString metrics = outputs.filePath("metrics.csv");
        const QString weights = outputs.filePath("weights.safetensors");
        CliRun run = run_cli(QStringList{"train", "--threads", "1", "--metrics-out", metrics,
                                         "--save-weights", weights} + arguments);
        QVERIFY2(run.finished, CLI_DIAGNOSTICS(run));
        QCOMPARE(run.exit_code, expected_exit);
        const QStringList lines = run.error_lines();
        QVERIFY2(lines.size() == 1, CLI_DIAGNOSTICS(run));
        QVERIFY2(lines.first().startsWith("trainbench-cli: error: "), CLI_DIAGNOSTICS(run));
        QVERIFY2(lines.first().contains(mentions), CLI_DIAGNOSTICS(run));
        // Nothing half-written: neither the outputs nor their temporary files exist.
        QCOMPARE(QDir(outputs.path()).entryList(QDir::Files | QDir::Hidden), QStringList{});
    }

    void parse_errors_point_at_help() {
        CliRun run = run_cli({"train", "--epochs", "two"});
        QCOMPARE(run.exit_code, 2);
        QVERIFY2(run.err.contains("run trainbench-cli train --help"), CLI_DIAGNOSTICS(run));
    }

    void help_exits_zero_and_lists_fixed_flags() {
        CliRun run = run_cli({"train", "--help"});
        QCOMPARE(run.exit_code, 0);
        for (const char* flag : {"--config", "--dataset", "--hidden", "--activation", "--batch-size",
                                 "--step-size", "--optimizer", "--lr", "--momentum", "--weight-decay",
                                 "--schedule", "--warmup-steps", "--clip-grad-norm", "--epochs",
                                 "--max-steps", "--seed", "--no-shuffle", "--val-fraction", "--threads",
                                 "--init-weights", "--save-weights", "--metrics-out", "--print-config",
                                 "--device", "--precision", "--memory-limit", "--auto-fit",
                                 "--gradient-checkpointing", "--empty-cache-steps", "--prefetch",
                                 "--checkpoint-every", "--checkpoint-dir", "--resume"})
            QVERIFY2(run.out.contains(QLatin1String(flag)), flag);
    }

    void print_config_round_trips() {
        CliRun first = run_cli({"train", "--dataset", "moons", "--hidden", "32,16", "--activation", "gelu",
                                "--batch-size", "48", "--step-size", "3", "--optimizer", "adamw",
                                "--lr", "0.004", "--schedule", "cosine", "--warmup-steps", "7",
                                "--clip-grad-norm", "1.5", "--epochs", "3", "--seed", "11",
                                "--no-shuffle", "--val-fraction", "0", "--precision", "bf16",
                                "--memory-limit", "64MiB", "--print-config"});
        QVERIFY2(first.exit_code == 0, CLI_DIAGNOSTICS(first));
        QVERIFY(first.out.contains("\"moons\""));
        QVERIFY(first.out.contains("0.004"));
        write_file(path("printed.json"), first.out.toUtf8());

        CliRun second = run_cli({"train", "--config", path("printed.json"), "--print-config"});
        QVERIFY2(second.exit_code == 0, CLI_DIAGNOSTICS(second));
        QCOMPARE(second.out, first.out);
    }

    // cli_arguments_for() (the app's headless default example uses it) gives flags that the
    // CLI turns back into the same configuration.
    void cli_arguments_for_give_back_the_config() {
        trainbench::RunConfig gpt = trainbench::default_example_config();
        gpt.precision = trainbench::Precision::bf16;
        gpt.gradient_checkpointing = true;
        gpt.optimizer.lr = 3e-4;
        gpt.memory_limit_bytes = int64_t{3} << 30;
        trainbench::RunConfig mlp = trainbench::default_config(trainbench::ModelFamily::mlp);
        mlp.hidden = {48, 24};
        mlp.shuffle = false;
        mlp.val_fraction = 0.25;
        mlp.schedule.kind = trainbench::ScheduleKind::step;
        mlp.schedule.decay_gamma = 0.3;
        for (const trainbench::RunConfig& config : {gpt, mlp}) {
            QStringList arguments{"train"};
            for (const std::string& argument : trainbench::cli_arguments_for(config))
                arguments << QString::fromStdString(argument);
            arguments << "--print-config";
            CliRun printed = run_cli(arguments);
            QVERIFY2(printed.exit_code == 0, CLI_DIAGNOSTICS(printed));
            QCOMPARE(printed.out.trimmed(), QString::fromStdString(trainbench::config_to_json(config)).trimmed());
        }
    }

    void help_lists_every_flag_of_the_table() {
        CliRun train = run_cli({"train", "--help"});
        CliRun compare = run_cli({"compare", "--help"});
        QCOMPARE(train.exit_code, 0);
        QCOMPARE(compare.exit_code, 0);
        for (const ConfigField& field : trainbench::config_fields()) {
            if (field.flag.empty()) continue;
            const QString flag = QString::fromStdString(field.flag);
            QVERIFY2(train.out.contains(flag), qPrintable(flag));
            // compare has its own --empty-cache-steps, the N of its "empty cache" run.
            if (field.key != "empty_cache_steps")
                QVERIFY2(compare.out.contains(flag) != field.train_only, qPrintable(flag));
        }
        QVERIFY(train.out.contains("sgd|adam|adamw|rmsprop|adagrad"));
        QVERIFY(train.out.contains("gpt: attention heads (must divide --n-embd)"));
    }

    // Each flag alone against the same setting in a config file: the printed configurations
    // match, so every flag reaches its field and no other.
    void every_flag_sets_its_field() {
        for (const ConfigField& field : trainbench::config_fields()) {
            if (field.flag.empty()) continue;
            FlagSetting setting = unusual_setting(field);
            std::string json = "{" + json_member(field.key, setting.json);
            // validate() runs before --print-config; these need a companion setting.
            if (field.key == "auto_fit") {
                setting.arguments << "--memory-limit" << "1GiB";
                json += ", \"memory_limit_bytes\": 1073741824";
            }
            if (field.key == "checkpoint_every") {
                setting.arguments << "--checkpoint-dir" << "ckpt";
                json += ", \"checkpoint_dir\": \"ckpt\"";
            }
            // LoRA adapts the GPT only, and only LoRA has adapters to save and a base to quantize.
            if (field.key == "lora_rank" || field.key == "save_adapters" || field.key == "lora_base" || field.key == "dora") {
                setting.arguments << "--model" << "gpt";
                json += ", \"model\": \"gpt\"";
            }
            if (field.key == "save_adapters" || field.key == "lora_base" || field.key == "dora") {
                setting.arguments << "--lora-rank" << "4";
                json += ", \"lora_rank\": 4";
            }
            // A stage per process, and a block for each stage.
            if (field.key == "pipeline_stages") {
                const QString stages = setting.arguments.last();
                setting.arguments << "--processes" << stages << "--model" << "gpt" << "--n-layer" << stages;
                json += ", \"processes\": " + stages.toStdString() + ", \"model\": \"gpt\", \"n_layer\": " + stages.toStdString();
            }
            json += "}";
            const std::string expected = trainbench::config_to_json(trainbench::config_from_json(json));
            QVERIFY2(expected != trainbench::config_to_json(trainbench::RunConfig{}), field.key.c_str());

            CliRun run = run_cli(QStringList{"train"} + setting.arguments + QStringList{"--print-config"});
            QVERIFY2(run.exit_code == 0, CLI_DIAGNOSTICS(run));
            const std::string printed =
                trainbench::config_to_json(trainbench::config_from_json(run.out.toStdString()));
            QVERIFY2(printed == expected, qPrintable(QString::fromStdString(field.key + "\n" + printed)));
        }
    }

    void the_last_of_a_repeated_flag_wins() {
        CliRun run = run_cli({"train", "--max-steps", "20", "--optimizer", "sgd", "--max-steps", "40",
                              "--optimizer", "rmsprop", "--print-config"});
        QVERIFY2(run.exit_code == 0, CLI_DIAGNOSTICS(run));
        QVERIFY2(run.out.contains("\"max_steps\": 40"), qPrintable(run.out));
        QVERIFY2(run.out.contains("\"kind\": \"rmsprop\""), qPrintable(run.out));
    }

    void flags_override_the_config_file() {
        write_file(path("base.json"),
                   R"({"dataset": "blobs", "batch_size": 32, "epochs": 4, "hidden": [16],
                       "optimizer": {"kind": "sgd", "lr": 0.05, "momentum": 0.9}})");
        CliRun plain = run_cli({"train", "--config", path("base.json"), "--print-config"});
        QVERIFY2(plain.exit_code == 0, CLI_DIAGNOSTICS(plain));
        QVERIFY(plain.out.contains("\"batch_size\": 32"));

        CliRun run = run_cli({"train", "--config", path("base.json"), "--batch-size", "16", "--lr", "0.2",
                              "--print-config"});
        QVERIFY2(run.exit_code == 0, CLI_DIAGNOSTICS(run));
        QVERIFY2(run.out.contains("\"batch_size\": 16"), qPrintable(run.out));    // flag wins
        QVERIFY2(run.out.contains("\"lr\": 0.2"), qPrintable(run.out));           // flag wins
        QVERIFY2(run.out.contains("\"dataset\": \"blobs\""), qPrintable(run.out)); // file kept
        QVERIFY2(run.out.contains("\"epochs\": 4"), qPrintable(run.out));
        QVERIFY2(run.out.contains("\"kind\": \"sgd\""), qPrintable(run.out));
        QVERIFY2(run.out.contains("\"momentum\": 0.9"), qPrintable(run.out));
    }

    void config_file_errors_name_the_key() {
        write_file(path("typo.json"), R"({"batch_sise": 32})");
        CliRun run = run_cli({"train", "--config", path("typo.json"), "--print-config"});
        QCOMPARE(run.exit_code, 2);
        QCOMPARE(run.error_lines().size(), 1);
        QVERIFY2(run.err.contains("batch_sise"), CLI_DIAGNOSTICS(run));
    }

    void unwritable_output_fails_before_training() {
        CliRun run = run_cli({"train", "--threads", "1", "--metrics-out", "/nonexistent-dir/m.csv"});
        QCOMPARE(run.exit_code, 1);
        QCOMPARE(run.error_lines().size(), 1);
        QVERIFY2(run.err.contains("/nonexistent-dir/m.csv"), CLI_DIAGNOSTICS(run));
        QVERIFY2(!run.out.contains("plan:"), CLI_DIAGNOSTICS(run));
    }

    void devices_lists_the_cpu() {
        CliRun run = run_cli({"devices"});
        QVERIFY2(run.exit_code == 0, CLI_DIAGNOSTICS(run));
        QVERIFY2(run.out.startsWith("cpu"), qPrintable(run.out));
        QVERIFY2(run.out.contains("cuda"), qPrintable(run.out));  // a device or why there is none
    }
};

QTEST_APPLESS_MAIN(CliArgumentsTest)
#include "test_cli_arguments.moc"
