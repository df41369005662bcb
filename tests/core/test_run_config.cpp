#include <QtTest>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "trainbench/error.hpp"
#include "trainbench/run_config.hpp"

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

struct InvalidCase {
    const char* what;
    std::function<void(RunConfig&)> break_it;
    std::string fragment;
};

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

class TestRunConfig : public QObject {
    Q_OBJECT

private slots:
    void optimizer_defaults_follow_pytorch() {
        OptimizerConfig o;
        const std::vector<std::tuple<OptimizerKind, double, double, double>> expected = {
            {OptimizerKind::sgd, 1e-3, 0.0, 1e-8},     {OptimizerKind::adam, 1e-3, 0.0, 1e-8},
            {OptimizerKind::adamw, 1e-3, 1e-2, 1e-8},  {OptimizerKind::rmsprop, 1e-2, 0.0, 1e-8},
            {OptimizerKind::adagrad, 1e-2, 0.0, 1e-10},
        };
        for (const auto& [kind, lr, weight_decay, eps] : expected) {
            o.kind = kind;
            QCOMPARE(o.resolved_lr(), lr);
            QCOMPARE(o.resolved_weight_decay(), weight_decay);
            QCOMPARE(o.resolved_eps(), eps);
        }
        o.lr = 0.5;
        o.weight_decay = 0.25;
        o.eps = 1e-3;
        QCOMPARE(o.resolved_lr(), 0.5);
        QCOMPARE(o.resolved_weight_decay(), 0.25);
        QCOMPARE(o.resolved_eps(), 1e-3);
    }

    void enum_names_round_trip() {
        for (auto k : {OptimizerKind::sgd, OptimizerKind::adam, OptimizerKind::adamw,
                       OptimizerKind::rmsprop, OptimizerKind::adagrad})
            QVERIFY(parse_optimizer(to_string(k)) == k);
        for (auto a : {Activation::relu, Activation::gelu, Activation::tanh, Activation::sigmoid})
            QVERIFY(parse_activation(to_string(a)) == a);
        for (auto s : {ScheduleKind::constant, ScheduleKind::linear, ScheduleKind::cosine,
                       ScheduleKind::step})
            QVERIFY(parse_schedule(to_string(s)) == s);
        for (auto p : {Precision::fp32, Precision::fp16, Precision::bf16})
            QVERIFY(parse_precision(to_string(p)) == p);
        QCOMPARE(to_string(OptimizerKind::adamw), std::string("adamw"));
        QVERIFY(parse_optimizer("AdamW") == OptimizerKind::adamw);
    }

    void unknown_names_list_the_accepted_values() {
        EXPECT_ERROR_CONTAINS(parse_optimizer("adamx"),
                              "unknown optimizer 'adamx': expected sgd, adam, adamw, rmsprop or "
                              "adagrad");
        EXPECT_ERROR_CONTAINS(parse_activation("swish"),
                              "unknown activation 'swish': expected relu, gelu, tanh or sigmoid");
        EXPECT_ERROR_CONTAINS(parse_schedule("exp"),
                              "unknown schedule 'exp': expected constant, linear, cosine or step");
        EXPECT_ERROR_CONTAINS(parse_precision("fp8"),
                              "unknown precision 'fp8': expected fp32, fp16 or bf16");
    }

    void parse_byte_size_accepts_decimal_and_binary_units() {
        QCOMPARE(parse_byte_size("1000000"), int64_t(1000000));
        QCOMPARE(parse_byte_size("0"), int64_t(0));
        QCOMPARE(parse_byte_size("512MiB"), int64_t(512) << 20);
        QCOMPARE(parse_byte_size("2GiB"), int64_t(2) << 30);
        QCOMPARE(parse_byte_size("1.5GB"), int64_t(1500000000));
        QCOMPARE(parse_byte_size("64KB"), int64_t(64000));
        QCOMPARE(parse_byte_size("64kib"), int64_t(65536));
        QCOMPARE(parse_byte_size("3mb"), int64_t(3000000));
        QCOMPARE(parse_byte_size("100B"), int64_t(100));
        QCOMPARE(parse_byte_size("0.5KiB"), int64_t(512));
        QCOMPARE(parse_byte_size(" 256 MiB "), int64_t(256) << 20);
    }

    void parse_byte_size_rejects_garbage() {
        EXPECT_ERROR_CONTAINS(parse_byte_size(""), "invalid byte size '': it is empty");
        EXPECT_ERROR_CONTAINS(parse_byte_size("-5MiB"), "cannot be negative");
        EXPECT_ERROR_CONTAINS(parse_byte_size("MiB"), "does not start with a number");
        EXPECT_ERROR_CONTAINS(parse_byte_size("12 parsecs"), "unknown unit 'parsecs'");
        EXPECT_ERROR_CONTAINS(parse_byte_size("1e9"), "unknown unit 'e9'");
        EXPECT_ERROR_CONTAINS(parse_byte_size("1.2.3GB"), "unknown unit '.3GB'");
        EXPECT_ERROR_CONTAINS(parse_byte_size("nan"), "does not start with a number");
        EXPECT_ERROR_CONTAINS(parse_byte_size("99999999999GiB"), "too large");
    }

    void format_bytes_picks_a_readable_unit() {
        QCOMPARE(format_bytes(0), std::string("0 B"));
        QCOMPARE(format_bytes(1023), std::string("1023 B"));
        QCOMPARE(format_bytes(1536), std::string("1.5 KiB"));
        QCOMPARE(format_bytes(1572864), std::string("1.5 MiB"));
        QCOMPARE(format_bytes(int64_t(128) << 20), std::string("128 MiB"));
        QCOMPARE(format_bytes((int64_t(5) << 30) / 4), std::string("1.25 GiB"));
        QCOMPARE(format_bytes(-2048), std::string("-2 KiB"));
    }

    void default_config_is_valid() {
        validate(RunConfig{});
        RunConfig c;
        c.device = "cuda:1";
        c.hidden = {};
        c.batch_size = 4;
        c.step_size = 4;
        c.val_fraction = 0.0;
        c.optimizer.kind = OptimizerKind::sgd;
        c.optimizer.momentum = 0.9;
        c.optimizer.nesterov = true;
        c.auto_fit = true;
        c.memory_limit_bytes = 1 << 20;
        c.checkpoint_every = 10;
        c.checkpoint_dir = "ckpt";
        validate(c);
    }

    void step_size_larger_than_batch_explains_the_fix() {
        RunConfig c;
        c.batch_size = 4;
        c.step_size = 8;
        EXPECT_ERROR_CONTAINS(validate(c),
                              "step_size (8) is larger than batch_size (4): each micro-batch "
                              "needs at least one sample; lower --step-size or raise --batch-size");
    }

    void each_invalid_field_is_named() {
        const std::vector<InvalidCase> cases = {
            {"empty dataset", [](RunConfig& c) { c.dataset.clear(); }, "invalid --dataset"},
            {"batch 0", [](RunConfig& c) { c.batch_size = 0; }, "invalid --batch-size: must be at least 1, got 0"},
            {"step 0", [](RunConfig& c) { c.step_size = 0; }, "invalid --step-size: must be at least 1, got 0"},
            {"step -3", [](RunConfig& c) { c.step_size = -3; }, "invalid --step-size"},
            {"lr NaN", [](RunConfig& c) { c.optimizer.lr = kNaN; }, "invalid --lr: must be a finite number > 0, got nan"},
            {"lr inf", [](RunConfig& c) { c.optimizer.lr = kInf; }, "invalid --lr"},
            {"lr 0", [](RunConfig& c) { c.optimizer.lr = 0.0; }, "invalid --lr"},
            {"lr negative", [](RunConfig& c) { c.optimizer.lr = -1e-3; }, "invalid --lr"},
            {"momentum 1", [](RunConfig& c) { c.optimizer.momentum = 1.0; }, "invalid --momentum: must be in [0, 1), got 1"},
            {"momentum negative", [](RunConfig& c) { c.optimizer.momentum = -0.1; }, "invalid --momentum"},
            {"dampening NaN", [](RunConfig& c) { c.optimizer.dampening = kNaN; }, "invalid optimizer.dampening"},
            {"beta1 1", [](RunConfig& c) { c.optimizer.beta1 = 1.0; }, "invalid optimizer.beta1"},
            {"beta2 NaN", [](RunConfig& c) { c.optimizer.beta2 = kNaN; }, "invalid optimizer.beta2"},
            {"alpha 2", [](RunConfig& c) { c.optimizer.alpha = 2.0; }, "invalid optimizer.alpha"},
            {"eps negative", [](RunConfig& c) { c.optimizer.eps = -1e-8; }, "invalid optimizer.eps"},
            {"weight decay negative", [](RunConfig& c) { c.optimizer.weight_decay = -1.0; }, "invalid --weight-decay"},
            {"lr decay negative", [](RunConfig& c) { c.optimizer.lr_decay = -1.0; }, "invalid optimizer.lr_decay"},
            {"accumulator negative", [](RunConfig& c) { c.optimizer.initial_accumulator_value = -1.0; }, "invalid optimizer.initial_accumulator_value"},
            {"nesterov without momentum",
             [](RunConfig& c) {
                 c.optimizer.kind = OptimizerKind::sgd;
                 c.optimizer.nesterov = true;
             },
             "invalid optimizer.nesterov: Nesterov momentum requires --momentum > 0 and optimizer.dampening 0"},
            {"nesterov with dampening",
             [](RunConfig& c) {
                 c.optimizer.kind = OptimizerKind::sgd;
                 c.optimizer.nesterov = true;
                 c.optimizer.momentum = 0.9;
                 c.optimizer.dampening = 0.1;
             },
             "invalid optimizer.nesterov"},
            {"hidden width 0", [](RunConfig& c) { c.hidden = {64, 0}; }, "invalid --hidden: hidden layer 1 has width 0"},
            {"epochs 0", [](RunConfig& c) { c.epochs = 0; }, "invalid --epochs"},
            {"max steps negative", [](RunConfig& c) { c.max_steps = -1; }, "invalid --max-steps"},
            {"val fraction 1", [](RunConfig& c) { c.val_fraction = 1.0; }, "invalid --val-fraction: must be in [0, 1), got 1"},
            {"val fraction NaN", [](RunConfig& c) { c.val_fraction = kNaN; }, "invalid --val-fraction"},
            {"val fraction negative", [](RunConfig& c) { c.val_fraction = -0.1; }, "invalid --val-fraction"},
            {"threads negative", [](RunConfig& c) { c.threads = -2; }, "invalid --threads"},
            {"clip negative", [](RunConfig& c) { c.clip_grad_norm = -1.0; }, "invalid --clip-grad-norm"},
            {"clip NaN", [](RunConfig& c) { c.clip_grad_norm = kNaN; }, "invalid --clip-grad-norm"},
            {"warmup negative", [](RunConfig& c) { c.schedule.warmup_steps = -1; }, "invalid --warmup-steps"},
            {"decay every 0", [](RunConfig& c) { c.schedule.decay_every = 0; }, "invalid --decay-every"},
            {"gamma 0", [](RunConfig& c) { c.schedule.decay_gamma = 0.0; }, "invalid --decay-gamma"},
            {"gamma inf", [](RunConfig& c) { c.schedule.decay_gamma = kInf; }, "invalid --decay-gamma"},
            {"min lr NaN", [](RunConfig& c) { c.schedule.min_lr = kNaN; }, "invalid schedule.min_lr"},
            {"memory negative", [](RunConfig& c) { c.memory_limit_bytes = -1; }, "invalid --memory-limit"},
            {"auto fit without budget", [](RunConfig& c) { c.auto_fit = true; }, "invalid --auto-fit: it needs a memory budget"},
            {"empty cache negative", [](RunConfig& c) { c.empty_cache_steps = -1; }, "invalid --empty-cache-steps"},
            {"prefetch negative", [](RunConfig& c) { c.prefetch = -1; }, "invalid --prefetch"},
            {"checkpoint without dir", [](RunConfig& c) { c.checkpoint_every = 5; }, "invalid --checkpoint-every: checkpoints need a folder; add --checkpoint-dir"},
            {"device gpu", [](RunConfig& c) { c.device = "gpu"; }, "invalid --device: unknown device 'gpu', expected cpu, cuda or cuda:N"},
            {"device cuda:", [](RunConfig& c) { c.device = "cuda:"; }, "invalid --device"},
            {"device cuda:x", [](RunConfig& c) { c.device = "cuda:x"; }, "invalid --device"},
            {"synthetic samples 0", [](RunConfig& c) { c.synthetic_samples = 0; }, "invalid --samples"},
        };
        for (const auto& test_case : cases) {
            RunConfig config;
            test_case.break_it(config);
            const std::string message = error_of([&] { validate(config); });
            QVERIFY2(message.find(test_case.fragment) != std::string::npos,
                     (std::string(test_case.what) + ": expected '" + test_case.fragment +
                      "' in: " + message)
                         .c_str());
            QVERIFY2(message.find('\n') == std::string::npos, test_case.what);
        }
    }

    void errors_name_the_field_by_its_config_key() {
        const auto key_of = [](const RunConfig& c) -> std::string {
            try {
                validate(c);
            } catch (const Error& e) {
                return e.key();
            }
            return "<no error>";
        };
        RunConfig c;
        c.optimizer.lr = kNaN;
        QCOMPARE(key_of(c), std::string("optimizer.lr"));  // the message says --lr
        c = RunConfig{};
        c.schedule.min_lr = -1.0;
        QCOMPARE(key_of(c), std::string("schedule.min_lr"));
        c = RunConfig{};
        c.batch_size = 4;
        c.step_size = 8;
        QCOMPARE(key_of(c), std::string("step_size"));
        c = RunConfig{};
        c.memory_limit_bytes = -1;
        QCOMPARE(key_of(c), std::string("memory_limit_bytes"));
    }

    void nesterov_is_only_checked_for_sgd() {
        RunConfig c;
        c.optimizer.kind = OptimizerKind::adam;
        c.optimizer.nesterov = true;
        validate(c);
    }
};

QTEST_APPLESS_MAIN(TestRunConfig)
#include "test_run_config.moc"
