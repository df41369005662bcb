// The CUDA engine on MLPs against the CPU engine (the reference the PyTorch fixtures already pin):
// fp32 must agree to 1e-4 relative error in losses, gradient norms, weights and optimizer
// state after several updates; fp16/bf16 within the tolerances documented below. Also
// accumulation equivalence on the GPU, preloaded data, checkpointing and the memory figures.
// Without a GPU (or a CUDA build) the GPU tests skip and print why; device discovery and the
// memory plan are checked on every machine.
#include <QtTest>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/compute_engine.hpp"
#include "model/build_model.hpp"
#include "model/init_weights.hpp"
#include "trainbench/error.hpp"
#include "trainbench/trainer.hpp"

using namespace trainbench;

namespace {

struct Problem {
    std::vector<int64_t> sizes;
    int64_t samples = 0;
    std::vector<float> x;          // [features x samples], one sample per column
    std::vector<int32_t> labels;
    std::vector<float> targets;
};

Problem make_problem(std::vector<int64_t> sizes, int64_t samples, uint64_t seed) {
    Problem problem;
    problem.sizes = std::move(sizes);
    problem.samples = samples;
    std::mt19937_64 random(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const int64_t features = problem.sizes.front();
    const int64_t classes = problem.sizes.back();
    problem.x.resize(static_cast<size_t>(features * samples));
    for (float& v : problem.x) v = normal(random);
    for (int64_t i = 0; i < samples; ++i) {
        problem.labels.push_back(static_cast<int32_t>(random() % static_cast<uint64_t>(classes)));
        problem.targets.push_back(normal(random));
    }
    return problem;
}

MicroBatch slice(const Problem& problem, int64_t start, int64_t count) {
    MicroBatch batch;
    batch.x = problem.x.data() + start * problem.sizes.front();
    batch.labels = problem.labels.data() + start;
    batch.targets = problem.targets.data() + start;
    batch.count = count;
    return batch;
}

double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < a.size(); ++i) {
        diff += std::pow(double(a[i]) - double(b[i]), 2);
        norm += std::pow(double(b[i]), 2);
    }
    return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
}

double relative_error(double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-30); }

std::vector<float> flatten(const ModelWeights& weights) {
    std::vector<float> flat;
    for (const auto& tensor : weights.tensors) flat.insert(flat.end(), tensor.data.begin(), tensor.data.end());
    return flat;
}

// What a run of `updates` updates produced: per-update loss and gradient norm, then the
// final weights and optimizer state.
struct Trajectory {
    std::vector<double> losses;
    std::vector<double> grad_norms;
    std::vector<float> weights;
    std::vector<std::vector<float>> state;
};

// Each update uses `micro_batches` contiguous slices of `global` samples (the loop's split),
// normalised by the global count, like the training loop.
Trajectory train(ComputeEngine& engine, const Problem& problem, int64_t global, int micro_batches,
                 int updates, double lr, double loss_scale) {
    Trajectory trajectory;
    const std::vector<int64_t> split = split_micro_batches(global, micro_batches);
    for (int update = 1; update <= updates; ++update) {
        engine.zero_grad();
        const int64_t base = ((update - 1) * global) % (problem.samples - global + 1);
        double loss = 0.0;
        int64_t start = base;
        for (int64_t count : split) {
            loss += engine.forward_backward(slice(problem, start, count), double(global), loss_scale);
            start += count;
        }
        const double norm = std::sqrt(engine.grad_norm_squared()) / loss_scale;
        engine.optimizer_step(lr, 1.0 / loss_scale, update);
        trajectory.losses.push_back(loss / double(global));
        trajectory.grad_norms.push_back(norm);
    }
    trajectory.weights = flatten(engine.weights());
    for (const auto& tensor : engine.optimizer_state()) trajectory.state.push_back(tensor.data);
    return trajectory;
}

// The two losses an MLP trains with: classes > 0 is softmax cross-entropy, else MSE.
enum class LossKind { softmax_cross_entropy, mean_squared_error };

ModelWeights init_mlp_weights(const std::vector<int64_t>& sizes, uint64_t seed) {
    return init_weights(build_mlp(sizes, Activation::relu, sizes.back() > 1 ? sizes.back() : 0), seed);
}

EngineSpec make_spec(const Problem& problem, Activation activation, LossKind loss,
                     OptimizerConfig optimizer, Precision precision, int64_t micro_batch) {
    EngineSpec spec;
    spec.model = build_mlp(problem.sizes, activation,
                           loss == LossKind::softmax_cross_entropy ? problem.sizes.back() : 0);
    spec.optimizer = optimizer;
    spec.precision = precision;
    spec.max_micro_batch = micro_batch;
    spec.max_eval_batch = 64;  // the CPU engine sizes evaluation buffers by this
    spec.threads = 1;
    return spec;
}

OptimizerConfig optimizer_named(const std::string& name) {
    OptimizerConfig config;
    if (name == "sgd") {
        config.kind = OptimizerKind::sgd;
    } else if (name == "sgd-nesterov") {
        config.kind = OptimizerKind::sgd;
        config.momentum = 0.9;
        config.nesterov = true;
        config.weight_decay = 1e-3;
    } else if (name == "adam") {
        config.kind = OptimizerKind::adam;
        config.weight_decay = 1e-3;
    } else if (name == "adamw") {
        config.kind = OptimizerKind::adamw;
    } else if (name == "rmsprop-centered") {
        config.kind = OptimizerKind::rmsprop;
        config.momentum = 0.5;
        config.centered = true;
    } else if (name == "adagrad") {
        config.kind = OptimizerKind::adagrad;
        config.lr_decay = 0.01;
        config.initial_accumulator_value = 0.1;
    }
    return config;
}

double learning_rate_for(const OptimizerConfig& config) {
    return config.kind == OptimizerKind::sgd ? 0.05 : 0.01;
}

}  // namespace

#define SKIP_WITHOUT_GPU()                                                              \
    do {                                                                                \
        const std::string reason_ = cuda_unavailable_reason();                              \
        if (!reason_.empty()) QSKIP(("CUDA engine not tested: " + reason_).c_str());   \
    } while (0)

class TestCudaEngine : public QObject {
    Q_OBJECT
private slots:
    void device_list_starts_with_the_cpu_and_explains_a_missing_gpu() {
        const std::vector<DeviceInfo> devices = available_devices();
        QVERIFY(!devices.empty());
        QCOMPARE(QString::fromStdString(devices.front().id), QString("cpu"));
        QVERIFY(QString::fromStdString(devices.front().name).startsWith("CPU ("));
        const std::string reason = cuda_unavailable_reason();
#ifndef TRAINBENCH_WITH_CUDA
        QCOMPARE(QString::fromStdString(reason),
                 QString("this build has no CUDA support (nvcc was not found when it was built)"));
        QCOMPARE(devices.size(), size_t{1});
#else
        if (devices.size() == 1) {
            QVERIFY2(QString::fromStdString(reason).startsWith("no NVIDIA GPU found ("), reason.c_str());
        } else {
            QVERIFY2(reason.empty(), reason.c_str());
            QCOMPARE(QString::fromStdString(devices[1].id), QString("cuda:0"));
            QVERIFY(devices[1].memory_bytes > 0);
            QVERIFY(devices[1].compute_major >= 7);
        }
#endif
        qInfo("devices: %zu; CUDA: %s", devices.size(), reason.empty() ? "available" : reason.c_str());
    }

#ifdef TRAINBENCH_WITH_CUDA
    // The plan is pure arithmetic, so it is checked on machines without a GPU too.
    void memory_plan_counts_every_category() {
        const Problem problem = make_problem({784, 256, 256, 256, 10}, 1, 1);
        OptimizerConfig adam = optimizer_named("adam");
        const auto fp32 = plan_cuda_engine_memory(
            make_spec(problem, Activation::relu, LossKind::softmax_cross_entropy, adam, Precision::fp32, 512));
        const auto bf16 = plan_cuda_engine_memory(
            make_spec(problem, Activation::relu, LossKind::softmax_cross_entropy, adam, Precision::bf16, 512));
        auto at = [](const auto& plan, MemoryCategory c) { return plan[static_cast<int>(c)]; };
        const int64_t parameters = 784 * 256 + 256 + 2 * (256 * 256 + 256) + 256 * 10 + 10;
        QVERIFY(at(fp32, MemoryCategory::parameters) >= parameters * 4);
        QVERIFY(at(fp32, MemoryCategory::parameters) < parameters * 4 + 64 * 1024);
        QCOMPARE(at(fp32, MemoryCategory::master_weights), int64_t{0});
        // Adam's two slots are one block, rounded to the allocator's 512 bytes once.
        QVERIFY(std::abs(at(fp32, MemoryCategory::optimizer_state) - 2 * at(fp32, MemoryCategory::gradients)) < 1024);
        QCOMPARE(at(bf16, MemoryCategory::master_weights), at(fp32, MemoryCategory::parameters));
        QVERIFY(at(bf16, MemoryCategory::parameters) <= at(fp32, MemoryCategory::parameters) / 2 + 512);
        QVERIFY(at(bf16, MemoryCategory::activations) <= 0.55 * at(fp32, MemoryCategory::activations));

        // Checkpointing follows the model builder's segments (sqrt(n) hidden layers each, as on
        // the CPU): with 8 hidden layers it keeps fewer activation buffers; with 3 it cannot.
        const Problem deep = make_problem({784, 256, 256, 256, 256, 256, 256, 256, 256, 10}, 1, 1);
        EngineSpec plain = make_spec(deep, Activation::relu, LossKind::softmax_cross_entropy, adam, Precision::fp32, 512);
        EngineSpec checkpointed = plain;
        checkpointed.gradient_checkpointing = true;
        const auto without_checkpoints = plan_cuda_engine_memory(plain);
        const auto with_checkpoints = plan_cuda_engine_memory(checkpointed);
        qInfo("8 hidden layers: activations %lld bytes, %lld with checkpointing",
              (long long)at(without_checkpoints, MemoryCategory::activations),
              (long long)at(with_checkpoints, MemoryCategory::activations));
        QVERIFY(at(with_checkpoints, MemoryCategory::activations) < at(without_checkpoints, MemoryCategory::activations));

        // --preload-device adds the train split (u8 pixels and int32 labels) to the workspace,
        // and nothing to any other category.
        Dataset data;
        data.task = Task::classification;
        data.num_classes = 10;
        data.features = 784;
        data.train.count = 1000;
        data.train.features = 784;
        data.train.pixels_u8.assign(1000 * 784, 0);
        data.train.labels.assign(1000, 0);
        EngineSpec preloaded =
            make_spec(problem, Activation::relu, LossKind::softmax_cross_entropy, adam, Precision::fp32, 512);
        preloaded.preload = &data;
        const auto with_preload = plan_cuda_engine_memory(preloaded);
        for (int c = 0; c < kMemoryCategoryCount; ++c) {
            if (c == int(MemoryCategory::workspace)) continue;
            QCOMPARE(with_preload[size_t(c)], fp32[size_t(c)]);
        }
        const int64_t added = at(with_preload, MemoryCategory::workspace) - at(fp32, MemoryCategory::workspace);
        qInfo("--preload-device adds %lld workspace bytes for a split of %d bytes", (long long)added, 1000 * 784 + 1000 * 4);
        QVERIFY(added >= 1000 * 784 + 1000 * 4);
        QVERIFY(added < 1000 * 784 + 1000 * 4 + 8 * 1024);
    }

    void fp32_matches_the_cpu_engine_data() {
        QTest::addColumn<int>("activation");
        QTest::addColumn<int>("loss");
        QTest::addColumn<QString>("optimizer");
        const char* optimizers[] = {"sgd", "sgd-nesterov", "adam", "adamw", "rmsprop-centered", "adagrad"};
        const Activation activations[] = {Activation::relu, Activation::gelu, Activation::tanh, Activation::sigmoid};
        for (Activation activation : activations) {
            for (const char* optimizer : optimizers) {
                for (LossKind loss : {LossKind::softmax_cross_entropy, LossKind::mean_squared_error}) {
                    const std::string name = to_string(activation) + "/" + optimizer + "/" +
                                             (loss == LossKind::softmax_cross_entropy ? "ce" : "mse");
                    QTest::newRow(name.c_str()) << int(activation) << int(loss) << QString(optimizer);
                }
            }
        }
    }

    void fp32_matches_the_cpu_engine() {
        SKIP_WITHOUT_GPU();
        QFETCH(int, activation);
        QFETCH(int, loss);
        QFETCH(QString, optimizer);
        const LossKind loss_kind = LossKind(loss);
        const int64_t outputs = loss_kind == LossKind::softmax_cross_entropy ? 5 : 1;
        const Problem problem = make_problem({13, 32, 24, outputs}, 200, 7);
        const OptimizerConfig config = optimizer_named(optimizer.toStdString());
        const EngineSpec spec = make_spec(problem, Activation(activation), loss_kind, config, Precision::fp32, 20);
        const ModelWeights initial = init_mlp_weights(problem.sizes, 3);

        auto cpu = make_cpu_engine(spec);
        auto gpu = make_cuda_engine(spec);
        cpu->set_weights(initial);
        gpu->set_weights(initial);
        // 37 samples in micro-batches of 19 and 18, 6 updates.
        const Trajectory want = train(*cpu, problem, 37, 2, 6, learning_rate_for(config), 1.0);
        const Trajectory got = train(*gpu, problem, 37, 2, 6, learning_rate_for(config), 1.0);
        for (size_t i = 0; i < want.losses.size(); ++i) {
            QVERIFY2(relative_error(got.losses[i], want.losses[i]) < 1e-4,
                     qPrintable(QString("update %1 loss %2 vs %3").arg(i + 1).arg(got.losses[i]).arg(want.losses[i])));
            QVERIFY2(relative_error(got.grad_norms[i], want.grad_norms[i]) < 1e-4,
                     qPrintable(QString("update %1 grad norm %2 vs %3").arg(i + 1).arg(got.grad_norms[i]).arg(want.grad_norms[i])));
        }
        const double weight_error = relative_error(got.weights, want.weights);
        QVERIFY2(weight_error < 1e-4, qPrintable(QString("weights rel. error %1").arg(weight_error)));
        QCOMPARE(got.state.size(), want.state.size());
        for (size_t s = 0; s < want.state.size(); ++s) {
            QCOMPARE(got.state[s].size(), want.state[s].size());
            QVERIFY2(relative_error(got.state[s], want.state[s]) < 1e-4, "optimizer state differs");
        }

        const int64_t eval_count = 50;
        const EvalTotals cpu_eval = cpu->evaluate(slice(problem, 100, eval_count));
        const EvalTotals gpu_eval = gpu->evaluate(slice(problem, 100, eval_count));
        QVERIFY(relative_error(gpu_eval.loss_sum, cpu_eval.loss_sum) < 1e-4);
        QCOMPARE(gpu_eval.correct, cpu_eval.correct);
    }

    // Tolerances for mixed precision, against the CPU engine in fp32 on the same problem.
    // bf16 keeps 8 significant bits (relative rounding 2^-9 = 0.2%) and fp16 11 bits; errors of
    // a few roundings per layer give: bf16 losses within 3%, weights after 6 updates within 1%;
    // fp16 losses within 0.5%, weights within 0.2%.
    void mixed_precision_stays_within_tolerance_data() {
        QTest::addColumn<int>("precision");
        QTest::addColumn<double>("loss_tolerance");
        QTest::addColumn<double>("weight_tolerance");
        QTest::addColumn<double>("loss_scale");
        QTest::newRow("bf16") << int(Precision::bf16) << 3e-2 << 1e-2 << 1.0;
        QTest::newRow("fp16") << int(Precision::fp16) << 5e-3 << 2e-3 << 1024.0;
    }

    void mixed_precision_stays_within_tolerance() {
        SKIP_WITHOUT_GPU();
        QFETCH(int, precision);
        QFETCH(double, loss_tolerance);
        QFETCH(double, weight_tolerance);
        QFETCH(double, loss_scale);
        const Problem problem = make_problem({64, 128, 128, 10}, 400, 11);
        const OptimizerConfig config = optimizer_named("adamw");
        const ModelWeights initial = init_mlp_weights(problem.sizes, 5);
        auto reference = make_cpu_engine(
            make_spec(problem, Activation::gelu, LossKind::softmax_cross_entropy, config, Precision::fp32, 64));
        auto gpu = make_cuda_engine(
            make_spec(problem, Activation::gelu, LossKind::softmax_cross_entropy, config, Precision(precision), 64));
        reference->set_weights(initial);
        gpu->set_weights(initial);
        const Trajectory want = train(*reference, problem, 128, 2, 6, 1e-3, 1.0);
        const Trajectory got = train(*gpu, problem, 128, 2, 6, 1e-3, loss_scale);
        for (size_t i = 0; i < want.losses.size(); ++i) {
            QVERIFY2(relative_error(got.losses[i], want.losses[i]) < loss_tolerance,
                     qPrintable(QString("update %1 loss %2 vs %3").arg(i + 1).arg(got.losses[i]).arg(want.losses[i])));
        }
        const double weight_error = relative_error(got.weights, want.weights);
        qInfo("%s: weights rel. error %.3g after 6 updates", QTest::currentDataTag(), weight_error);
        QVERIFY(weight_error < weight_tolerance);
    }

    void accumulated_halves_equal_one_batch_on_the_gpu_data() {
        QTest::addColumn<int>("precision");
        QTest::addColumn<double>("tolerance");
        QTest::newRow("fp32") << int(Precision::fp32) << 1e-5;
        QTest::newRow("bf16") << int(Precision::bf16) << 1e-2;
    }

    void accumulated_halves_equal_one_batch_on_the_gpu() {
        SKIP_WITHOUT_GPU();
        QFETCH(int, precision);
        QFETCH(double, tolerance);
        const Problem problem = make_problem({20, 48, 48, 6}, 300, 13);
        const OptimizerConfig config = optimizer_named("sgd-nesterov");
        const ModelWeights initial = init_mlp_weights(problem.sizes, 9);
        const EngineSpec spec =
            make_spec(problem, Activation::relu, LossKind::softmax_cross_entropy, config, Precision(precision), 64);
        auto whole = make_cuda_engine(spec);
        auto halves = make_cuda_engine(spec);
        whole->set_weights(initial);
        halves->set_weights(initial);
        const Trajectory one = train(*whole, problem, 63, 1, 5, 0.05, 1.0);
        const Trajectory three = train(*halves, problem, 63, 3, 5, 0.05, 1.0);  // 21 + 21 + 21
        for (size_t i = 0; i < one.losses.size(); ++i) {
            QVERIFY(relative_error(three.losses[i], one.losses[i]) < tolerance);
            QVERIFY(relative_error(three.grad_norms[i], one.grad_norms[i]) < tolerance);
        }
        QVERIFY(relative_error(three.weights, one.weights) < tolerance);
    }

    // --preload-device: pixels (u8, scaled on the device) with labels, and fp32 values with
    // regression targets, in fp32 and bf16 (where the gathered input is rounded once into 16 bits).
    void preloaded_data_gives_the_same_updates_data() {
        QTest::addColumn<bool>("pixels");
        QTest::addColumn<int>("precision");
        QTest::newRow("pixels, labels, fp32") << true << int(Precision::fp32);
        QTest::newRow("pixels, labels, bf16") << true << int(Precision::bf16);
        QTest::newRow("values, targets, fp32") << false << int(Precision::fp32);
        QTest::newRow("values, targets, bf16") << false << int(Precision::bf16);
    }

    void preloaded_data_gives_the_same_updates() {
        SKIP_WITHOUT_GPU();
        QFETCH(bool, pixels);
        QFETCH(int, precision);
        Dataset data;
        data.task = pixels ? Task::classification : Task::regression;
        data.num_classes = pixels ? 4 : 0;
        data.features = 12;
        data.train.count = 90;
        data.train.features = 12;
        std::mt19937 random(3);
        std::normal_distribution<float> normal(0.0f, 1.0f);
        for (int64_t i = 0; i < 90 * 12; ++i) {
            if (pixels) data.train.pixels_u8.push_back(uint8_t(random() % 256));
            else data.train.values_f32.push_back(normal(random));
        }
        for (int64_t i = 0; i < 90; ++i) {
            if (pixels) data.train.labels.push_back(int32_t(random() % 4));
            else data.train.targets.push_back(normal(random));
        }

        const std::vector<int64_t> sizes{12, 16, pixels ? 4 : 1};
        EngineSpec spec;
        spec.model = build_mlp(sizes, Activation::relu, pixels ? sizes.back() : 0);
        spec.optimizer = optimizer_named("adam");
        spec.precision = Precision(precision);
        spec.max_micro_batch = 30;
        spec.max_eval_batch = 30;
        auto host_copies = make_cuda_engine(spec);
        spec.preload = &data;
        auto preloaded = make_cuda_engine(spec);
        const ModelWeights initial = init_mlp_weights(sizes, 2);
        host_copies->set_weights(initial);
        preloaded->set_weights(initial);

        std::vector<int64_t> order(90);
        for (int64_t i = 0; i < 90; ++i) order[i] = (i * 37) % 90;
        std::vector<float> x(30 * 12), targets(30);
        std::vector<int32_t> labels(30);
        for (int update = 1; update <= 3; ++update) {
            const int64_t* indices = order.data() + (update - 1) * 30;
            gather_samples(data.train, indices, 30, x.data(), labels.data(), targets.data());
            MicroBatch batch;
            batch.x = x.data();
            batch.labels = labels.data();
            batch.targets = targets.data();
            batch.count = 30;
            // What the loop hands a preloading engine: rows of the train split, no values.
            MicroBatch rows;
            rows.indices = indices;
            rows.count = 30;
            host_copies->zero_grad();
            preloaded->zero_grad();
            const double want = host_copies->forward_backward(batch, 30.0, 1.0);
            const double got = preloaded->forward_backward(rows, 30.0, 1.0);
            QVERIFY2(got == want, qPrintable(QString("update %1: loss %2 preloaded, %3 copied").arg(update).arg(got).arg(want)));
            host_copies->optimizer_step(1e-2, 1.0, update);
            preloaded->optimizer_step(1e-2, 1.0, update);
        }
        QVERIFY2(flatten(preloaded->weights()) == flatten(host_copies->weights()), "preloading changed the weights");
        // Validation batches come with host values and indices into another split: the
        // engine must use the values, not gather train rows by those indices.
        std::vector<int64_t> other_rows(30);
        for (int64_t i = 0; i < 30; ++i) other_rows[i] = 89 - i;
        gather_samples(data.train, order.data(), 30, x.data(), labels.data(), targets.data());
        MicroBatch validation_like;
        validation_like.x = x.data();
        validation_like.labels = labels.data();
        validation_like.targets = targets.data();
        validation_like.indices = other_rows.data();
        validation_like.count = 30;
        const EvalTotals want_eval = host_copies->evaluate(validation_like);
        const EvalTotals got_eval = preloaded->evaluate(validation_like);
        QCOMPARE(got_eval.loss_sum, want_eval.loss_sum);
        QCOMPARE(got_eval.correct, want_eval.correct);
        const int64_t split_bytes = pixels ? 90 * 12 + 90 * 4 : 90 * 12 * 4 + 90 * 4;
        QVERIFY(preloaded->memory().bytes(MemoryCategory::workspace) >=
                host_copies->memory().bytes(MemoryCategory::workspace) + split_bytes);
        const auto planned = plan_cuda_engine_memory(spec);
        QCOMPARE(preloaded->memory().peak_bytes(MemoryCategory::workspace),
                 planned[static_cast<int>(MemoryCategory::workspace)]);
    }

    void checkpointing_recomputes_the_same_gradients_data() {
        QTest::addColumn<int>("activation");
        QTest::newRow("relu") << int(Activation::relu);
        QTest::newRow("gelu") << int(Activation::gelu);
    }

    void checkpointing_recomputes_the_same_gradients() {
        SKIP_WITHOUT_GPU();
        QFETCH(int, activation);
        const Problem problem = make_problem({10, 24, 24, 24, 24, 24, 3}, 100, 21);
        EngineSpec spec = make_spec(problem, Activation(activation), LossKind::softmax_cross_entropy,
                                    optimizer_named("sgd"), Precision::fp32, 32);
        auto plain = make_cuda_engine(spec);
        spec.gradient_checkpointing = true;
        auto checkpointed = make_cuda_engine(spec);
        const ModelWeights initial = init_mlp_weights(problem.sizes, 4);
        plain->set_weights(initial);
        checkpointed->set_weights(initial);
        const Trajectory want = train(*plain, problem, 64, 2, 3, 0.1, 1.0);
        const Trajectory got = train(*checkpointed, problem, 64, 2, 3, 0.1, 1.0);
        for (size_t i = 0; i < want.grad_norms.size(); ++i)
            QVERIFY(relative_error(got.grad_norms[i], want.grad_norms[i]) < 1e-6);
        QVERIFY(relative_error(got.weights, want.weights) < 1e-6);
        QVERIFY(checkpointed->memory().peak_bytes(MemoryCategory::activations) <
                plain->memory().peak_bytes(MemoryCategory::activations));
    }

    void memory_matches_the_plan_and_the_cache_can_be_released() {
        SKIP_WITHOUT_GPU();
        const Problem problem = make_problem({32, 64, 64, 8}, 64, 17);
        const EngineSpec spec = make_spec(problem, Activation::tanh, LossKind::softmax_cross_entropy,
                                          optimizer_named("adam"), Precision::bf16, 64);
        const auto plan = plan_cuda_engine_memory(spec);
        auto engine = make_cuda_engine(spec);
        engine->set_weights(init_mlp_weights(problem.sizes, 1));
        engine->begin_update_timing();
        engine->zero_grad();
        engine->forward_backward(slice(problem, 0, 64), 64.0, 1.0);
        engine->optimizer_step(1e-3, 1.0, 1);
        const double milliseconds = engine->end_update_timing_ms();
        QVERIFY(milliseconds > 0.0);
        const MemoryReport report = engine->memory();
        for (MemoryCategory c : {MemoryCategory::parameters, MemoryCategory::master_weights, MemoryCategory::gradients,
                                 MemoryCategory::optimizer_state, MemoryCategory::workspace, MemoryCategory::activations}) {
            QCOMPARE(report.peak_bytes(c), plan[static_cast<int>(c)]);
        }
        // Between passes the activations (and the pass's scratch) wait in the cache, like
        // PyTorch's freed blocks.
        QCOMPARE(report.bytes(MemoryCategory::activations), int64_t{0});
        QVERIFY(report.bytes(MemoryCategory::cache) >= plan[static_cast<int>(MemoryCategory::activations)]);
        engine->release_cache();
        QCOMPARE(engine->memory().bytes(MemoryCategory::cache), int64_t{0});
        engine->zero_grad();
        const double loss = engine->forward_backward(slice(problem, 0, 64), 64.0, 1.0);
        QVERIFY(std::isfinite(loss));
        const auto [used, total] = engine->device_memory();
        QVERIFY(used > 0 && total >= used);
    }

    void a_memory_budget_too_small_fails_with_a_clear_message() {
        SKIP_WITHOUT_GPU();
        const Problem problem = make_problem({32, 64, 8}, 16, 1);
        EngineSpec spec = make_spec(problem, Activation::relu, LossKind::softmax_cross_entropy,
                                    optimizer_named("sgd"), Precision::fp32, 16);
        spec.memory_limit_bytes = 1 << 20;  // below the 32 MiB cuBLASLt workspace
        try {
            make_cuda_engine(spec);
            QFAIL("a 1 MiB budget must not hold the engine");
        } catch (const Error& error) {
            QVERIFY2(QString(error.what()).contains("budget"), error.what());
        }
    }

    // zero_grad() only marks the gradients stale (the next backward pass overwrites them); an
    // update with no micro-batch in it must still read zeros, not the last update's gradients.
    void gradients_read_as_zero_after_zero_grad_without_a_micro_batch() {
        SKIP_WITHOUT_GPU();
        const Problem problem = make_problem({8, 16, 4}, 16, 3);
        auto engine = make_cuda_engine(make_spec(problem, Activation::relu, LossKind::softmax_cross_entropy,
                                                 optimizer_named("sgd"), Precision::fp32, 16));
        engine->set_weights(init_mlp_weights(problem.sizes, 1));
        engine->zero_grad();
        engine->forward_backward(slice(problem, 0, 16), 16.0, 1.0);
        QVERIFY(engine->grad_norm_squared() > 0.0);
        engine->zero_grad();
        QCOMPARE(engine->grad_norm_squared(), 0.0);
        const std::vector<float> before = flatten(engine->weights());
        engine->zero_grad();
        engine->optimizer_step(0.1, 1.0, 1);
        QCOMPARE(flatten(engine->weights()), before);
    }

    void overflowing_fp16_gradients_read_as_not_finite() {
        SKIP_WITHOUT_GPU();
        const Problem problem = make_problem({8, 16, 4}, 16, 2);
        auto engine = make_cuda_engine(make_spec(problem, Activation::relu, LossKind::softmax_cross_entropy,
                                                 optimizer_named("sgd"), Precision::fp16, 16));
        engine->set_weights(init_mlp_weights(problem.sizes, 1));
        engine->zero_grad();
        engine->forward_backward(slice(problem, 0, 16), 16.0, 1e30);  // beyond fp16's range
        QVERIFY(!std::isfinite(engine->grad_norm_squared()));
    }
#endif
};

QTEST_APPLESS_MAIN(TestCudaEngine)
#include "test_cuda_engine.moc"
