#include <QTemporaryDir>
#include <QtTest>

#include <fstream>
#include <functional>
#include <string>

#include "trainbench/config_json.hpp"
#include "trainbench/error.hpp"

using namespace trainbench;

namespace {

std::string error_of(const std::function<void()>& action) {
    try {
        action();
    } catch (const Error& e) {
        return e.what();
    }
    return "<no error>";
}

#define EXPECT_ERROR_CONTAINS(action, fragment)                                              \
    do {                                                                                     \
        const std::string message_ = error_of([&] { action; });                              \
        QVERIFY2(message_.find(fragment) != std::string::npos,                               \
                 ("expected '" + std::string(fragment) + "' in: " + message_).c_str());     \
    } while (0)

// Every field away from its default, so a field the writer or reader forgets shows up.
RunConfig unusual_config() {
    RunConfig c;
    c.dataset = "csv:/data/my table.csv";
    c.synthetic_samples = 1234;
    c.val_fraction = 0.25;
    c.shuffle = false;
    c.seed = 18446744073709551615ull;
    c.hidden = {512, 3, 7};
    c.activation = Activation::gelu;
    c.batch_size = 96;
    c.step_size = 5;
    c.optimizer.kind = OptimizerKind::sgd;
    c.optimizer.lr = 0.1 + 0.2;  // not exactly representable as written: tests exact printing
    c.optimizer.momentum = 0.875;
    c.optimizer.dampening = 0.125;
    c.optimizer.nesterov = true;
    c.optimizer.weight_decay = 5e-4;
    c.optimizer.beta1 = 0.8;
    c.optimizer.beta2 = 0.95;
    c.optimizer.eps = 1e-6;
    c.optimizer.alpha = 0.9;
    c.optimizer.centered = true;
    c.optimizer.lr_decay = 0.01;
    c.optimizer.initial_accumulator_value = 0.1;
    c.schedule.kind = ScheduleKind::cosine;
    c.schedule.warmup_steps = 17;
    c.schedule.decay_every = 33;
    c.schedule.decay_gamma = 0.5;
    c.schedule.min_lr = 1e-5;
    c.clip_grad_norm = 1.5;
    c.epochs = 9;
    c.max_steps = 1000;
    c.device = "cuda:1";
    c.precision = Precision::bf16;
    c.threads = 3;
    c.memory_limit_bytes = int64_t(3) << 30;
    c.auto_fit = true;
    c.gradient_checkpointing = true;
    c.empty_cache_steps = 50;
    c.prefetch = 2;
    c.preload_device = true;
    c.init_weights = "in.safetensors";
    c.save_weights = "out \"quoted\".safetensors";
    c.metrics_out = "m.csv";
    c.checkpoint_every = 100;
    c.checkpoint_dir = "ckpt";
    c.resume_dir = "old";
    return c;
}

}  // namespace

class TestConfigJson : public QObject {
    Q_OBJECT

private slots:
    void round_trip_is_exact() {
        const std::string first = config_to_json(unusual_config());
        const RunConfig back = config_from_json(first);
        QCOMPARE(config_to_json(back), first);

        QCOMPARE(back.seed, uint64_t(18446744073709551615ull));
        QCOMPARE(back.hidden, (std::vector<int64_t>{512, 3, 7}));
        QVERIFY(back.optimizer.lr.has_value());
        QVERIFY(*back.optimizer.lr == 0.1 + 0.2);
        QCOMPARE(back.save_weights, std::string("out \"quoted\".safetensors"));
        QVERIFY(back.precision == Precision::bf16);
        QVERIFY(back.schedule.kind == ScheduleKind::cosine);
        QCOMPARE(back.memory_limit_bytes, int64_t(3) << 30);

        const std::string defaults = config_to_json(RunConfig{});
        QCOMPARE(config_to_json(config_from_json(defaults)), defaults);
        QCOMPARE(config_to_json(config_from_json(config_to_json(RunConfig{}, -1))), defaults);
    }

    void output_is_ordered_and_nested_with_resolved_defaults() {
        RunConfig c;
        c.optimizer.kind = OptimizerKind::adamw;
        const std::string json = config_to_json(c);
        QVERIFY(json.find("\"dataset\"") < json.find("\"batch_size\""));
        QVERIFY(json.find("\"batch_size\"") < json.find("\"step_size\""));
        QVERIFY(json.find("\"step_size\"") < json.find("\"optimizer\""));
        QVERIFY(json.find("\"kind\": \"adamw\"") != std::string::npos);
        QVERIFY(json.find("\"weight_decay\": 0.01") != std::string::npos);
        QVERIFY(json.find("\"lr\": 0.001") != std::string::npos);
        QVERIFY(json.find("\"schedule\": {") != std::string::npos);
        QVERIFY(json.find("\"precision\": \"fp32\"") != std::string::npos);
        QVERIFY(json.find("\"memory_limit_bytes\": 0") != std::string::npos);
        QVERIFY(config_to_json(c, -1).find('\n') == std::string::npos);
    }

    void present_keys_override_the_base_and_others_stay() {
        RunConfig base;
        base.epochs = 7;
        base.hidden = {32};
        const RunConfig c = config_from_json(
            R"({"batch_size": 256, "optimizer": {"kind": "rmsprop"}, "schedule": "step",
                "memory_limit_bytes": "512MiB"})",
            base);
        QCOMPARE(c.batch_size, int64_t(256));
        QVERIFY(c.optimizer.kind == OptimizerKind::rmsprop);
        QCOMPARE(c.optimizer.resolved_lr(), 1e-2);  // lr was not given: rmsprop's default
        QVERIFY(c.schedule.kind == ScheduleKind::step);
        QCOMPARE(c.memory_limit_bytes, int64_t(512) << 20);
        QCOMPARE(c.epochs, int64_t(7));
        QCOMPARE(c.hidden, std::vector<int64_t>{32});

        RunConfig with_lr;
        with_lr.optimizer.lr = 0.5;
        QVERIFY(!config_from_json(R"({"optimizer": {"lr": null}})", with_lr).optimizer.lr);
        QVERIFY(config_from_json(R"({"optimizer": "sgd"})").optimizer.kind == OptimizerKind::sgd);
    }

    void unknown_keys_are_rejected() {
        EXPECT_ERROR_CONTAINS(config_from_json(R"({"foo": 1})"), "unknown key 'foo' in config JSON");
        EXPECT_ERROR_CONTAINS(config_from_json(R"({"optimizer": {"momentun": 0.9}})"),
                              "unknown key 'optimizer.momentun' in config JSON");
        EXPECT_ERROR_CONTAINS(config_from_json(R"({"schedule": {"gamma": 0.9}})"),
                              "unknown key 'schedule.gamma' in config JSON");
    }

    void wrong_types_name_the_key_and_expected_type() {
        EXPECT_ERROR_CONTAINS(config_from_json(R"({"batch_size": "64"})"),
                              "config JSON key 'batch_size' must be an integer, got string \"64\"");
        EXPECT_ERROR_CONTAINS(config_from_json(R"({"batch_size": 1.5})"),
                              "'batch_size' must be an integer");
        EXPECT_ERROR_CONTAINS(config_from_json(R"({"shuffle": 1})"), "'shuffle' must be true or false");
        EXPECT_ERROR_CONTAINS(config_from_json(R"({"val_fraction": "a"})"), "'val_fraction' must be a number");
        EXPECT_ERROR_CONTAINS(config_from_json(R"({"dataset": 3})"), "'dataset' must be a string");
        EXPECT_ERROR_CONTAINS(config_from_json(R"({"hidden": 64})"), "'hidden' must be an array of integers");
        EXPECT_ERROR_CONTAINS(config_from_json(R"({"hidden": [64, "x"]})"), "'hidden[1]' must be an integer");
        EXPECT_ERROR_CONTAINS(config_from_json(R"({"seed": -1})"), "'seed' must be an integer >= 0");
        EXPECT_ERROR_CONTAINS(config_from_json(R"({"threads": 99999999999})"), "'threads' must be an integer that fits in 32 bits");
        EXPECT_ERROR_CONTAINS(config_from_json(R"({"optimizer": {"lr": "fast"}})"),
                              "'optimizer.lr' must be a number or null");
        EXPECT_ERROR_CONTAINS(config_from_json(R"({"optimizer": {"kind": "adamx"}})"),
                              "config JSON key 'optimizer.kind': unknown optimizer 'adamx'");
        EXPECT_ERROR_CONTAINS(config_from_json(R"({"optimizer": 3})"), "'optimizer' must be an object");
        EXPECT_ERROR_CONTAINS(config_from_json(R"({"memory_limit_bytes": "lots"})"),
                              "'memory_limit_bytes': invalid byte size 'lots'");
        EXPECT_ERROR_CONTAINS(config_from_json(R"([1, 2])"), "config JSON must be an object");
    }

    void errors_carry_the_key_of_the_field() {
        const auto key_of = [](const std::function<void()>& action) -> std::string {
            try {
                action();
            } catch (const Error& e) {
                return e.key();
            }
            return "<no error>";
        };
        QCOMPARE(key_of([] { config_from_json(R"({"batch_size": "64"})"); }), std::string("batch_size"));
        QCOMPARE(key_of([] { config_from_json(R"({"hidden": [64, "x"]})"); }), std::string("hidden"));
        QCOMPARE(key_of([] { config_from_json(R"({"optimizer": {"lr": "fast"}})"); }), std::string("optimizer.lr"));
        QCOMPARE(key_of([] { config_from_json(R"({"optimizer": "adamx"})"); }), std::string("optimizer.kind"));
        QCOMPARE(key_of([] { config_from_json(R"({"schedule": {"kind": 3}})"); }), std::string("schedule.kind"));
        QCOMPARE(key_of([] { config_from_json(R"({"model": "resnet"})"); }), std::string("model"));
        QCOMPARE(key_of([] { config_from_json(R"({"memory_limit_bytes": "lots"})"); }),
                 std::string("memory_limit_bytes"));
        // Not about one field: the key is empty.
        QCOMPARE(key_of([] { config_from_json(R"({"foo": 1})"); }), std::string());
        QCOMPARE(key_of([] { config_from_json(R"({"optimizer": 3})"); }), std::string());
        QCOMPARE(key_of([] { config_from_json(R"({"optimizer.lr": 0.1})"); }), std::string());
        QCOMPARE(key_of([] { config_from_json("{"); }), std::string());

        QTemporaryDir dir;
        const std::string path = dir.filePath("run.json").toStdString();
        {
            std::ofstream out(path);
            out << R"({"threads": 1.5})";
        }
        QCOMPARE(key_of([&] { load_config_file(path); }), std::string("threads"));
    }

    void a_file_naming_another_model_starts_from_its_defaults() {
        const RunConfig gpt = config_from_json(R"({"model": "gpt", "epochs": 2})");
        QVERIFY(gpt.model == ModelFamily::gpt);
        QCOMPARE(gpt.dataset, std::string("kjv"));
        QCOMPARE(gpt.epochs, int64_t(2));
        QVERIFY(gpt.optimizer.kind == OptimizerKind::adamw);
        RunConfig base = default_config(ModelFamily::gpt);
        base.n_layer = 2;
        QCOMPARE(config_from_json(R"({"model": "gpt"})", base).n_layer, int64_t(2));  // same family: base kept
    }

    void malformed_json_reports_the_position() {
        EXPECT_ERROR_CONTAINS(config_from_json("{\n  \"epochs\": 3,\n}"),
                              "malformed config JSON: parse error at line 3, column 1");
        const std::string message = error_of([] { config_from_json(""); });
        QVERIFY2(message.rfind("malformed config JSON: ", 0) == 0, message.c_str());
        QVERIFY2(message.find("[json.exception") == std::string::npos, message.c_str());
    }

    // File names are bytes, JSON is UTF-8: a path that is not UTF-8 is written with U+FFFD
    // in place of the bad byte instead of throwing (--print-config, checkpoints' config).
    void a_path_that_is_not_utf8_is_written_with_a_replacement() {
        RunConfig c;
        c.dataset = "csv:/tmp/caf\xe9.csv";
        const std::string json = config_to_json(c);
        QVERIFY2(json.find("\"csv:/tmp/caf\xef\xbf\xbd.csv\"") != std::string::npos, json.c_str());
        QCOMPARE(config_from_json(json).dataset, std::string("csv:/tmp/caf\xef\xbf\xbd.csv"));
    }

    // A number beyond double is nlohmann's out_of_range, not a parse_error: it escaped as a
    // foreign exception and ended the program (found by fuzz/fuzz_config_json).
    void number_beyond_double_is_malformed_json() {
        EXPECT_ERROR_CONTAINS(config_from_json(R"({"seed": 18e44073709551615})"),
                              "malformed config JSON: number overflow parsing '18e44073709551615'");
        EXPECT_ERROR_CONTAINS(config_from_json(R"({"optimizer": {"lr": -1e999}})"), "number overflow");
    }

    void load_config_file_reads_and_names_the_file() {
        QTemporaryDir dir;
        const std::string path = dir.filePath("run.json").toStdString();
        {
            std::ofstream out(path);
            out << R"({"epochs": 4, "dataset": "moons"})";
        }
        const RunConfig c = load_config_file(path);
        QCOMPARE(c.epochs, int64_t(4));
        QCOMPARE(c.dataset, std::string("moons"));

        const std::string missing = dir.filePath("nope.json").toStdString();
        EXPECT_ERROR_CONTAINS(load_config_file(missing), "cannot open config file '" + missing + "'");

        {
            std::ofstream out(path);
            out << R"({"epochz": 4})";
        }
        EXPECT_ERROR_CONTAINS(load_config_file(path),
                              "config file '" + path + "': unknown key 'epochz' in config JSON");
    }
};

QTEST_APPLESS_MAIN(TestConfigJson)
#include "test_config_json.moc"
