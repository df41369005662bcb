// Samples/s of TrainBench's CPU engine on issue 2's benchmark model: a 784-1024-1024-10 ReLU
// MLP on Fashion-MNIST, global batch 256, Adam, measured through the public API exactly as the
// CLI and the app run it (trainbench::train with an Observer). The update time is the engine's
// own StepMetrics::update_ms: the whole update, batch gathering included.
//
// bench/torch_mlp_throughput.py runs the same model, data, batch, optimizer and threads in
// PyTorch; bench/run_cpu_bench.sh runs both and writes docs/BENCHMARKS.md.
#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "trainbench/dataset.hpp"
#include "trainbench/error.hpp"
#include "trainbench/trainer.hpp"

namespace {

struct Options {
    int threads = 2;
    int64_t batch = 256;
    int64_t warmup = 10;    // updates left out: first touch of buffers, thread start-up
    int64_t measured = 40;  // updates timed per round
    int rounds = 3;         // variants alternate round by round, so drifting load hits all alike
    int interleave = 5;     // within a round the variants take turns of this many updates (0: one after another)
    bool json = false;
    std::string dataset = "fashion-mnist";
    std::string only;       // run just the variants with these names (comma-separated)
};

struct Variant {
    std::string name;
    int64_t step_size = 1;
    trainbench::Precision precision = trainbench::Precision::fp32;
    bool checkpointing = false;
    std::string note;
    std::vector<double> update_ms;  // measured updates of every round
    int64_t peak_activation_bytes = 0;
    int64_t peak_live_bytes = 0;
    double last_loss = 0.0;
};

void usage_and_exit(const char* program, int code) {
    std::fprintf(code == 0 ? stdout : stderr,
                 "usage: %s [--threads N (2)] [--batch N (256)] [--warmup N (10)] [--steps N (40)]\n"
                 "          [--rounds N (3)] [--interleave N (5)] [--dataset SPEC (fashion-mnist)] [--only VARIANT,...] [--json]\n"
                 "--interleave N: the variants run side by side, taking turns of N updates, so that load that\n"
                 "drifts over seconds hits all alike; the first update of each turn is not timed. 0: one\n"
                 "variant after another.\n"
                 "variants: fp32-step1 fp32-step4 bf16-step1 fp16-step1 fp32-step1-checkpointing\n",
                 program);
    std::exit(code);
}

Options parse_options(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "%s needs a value\n", flag.c_str());
                usage_and_exit(argv[0], 2);
            }
            return argv[++i];
        };
        if (flag == "--threads") o.threads = std::stoi(value());
        else if (flag == "--batch") o.batch = std::stoll(value());
        else if (flag == "--warmup") o.warmup = std::stoll(value());
        else if (flag == "--steps") o.measured = std::stoll(value());
        else if (flag == "--rounds") o.rounds = std::stoi(value());
        else if (flag == "--interleave") o.interleave = std::stoi(value());
        else if (flag == "--dataset") o.dataset = value();
        else if (flag == "--only") o.only = value();
        else if (flag == "--json") o.json = true;
        else if (flag == "--help" || flag == "-h") usage_and_exit(argv[0], 0);
        else {
            std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
            usage_and_exit(argv[0], 2);
        }
    }
    if (o.threads < 1 || o.batch < 4 || o.warmup < 0 || o.measured < 1 || o.rounds < 1 || o.interleave == 1 ||
        o.interleave < 0) {
        std::fprintf(stderr, "--threads, --steps and --rounds must be >= 1, --batch >= 4, --warmup >= 0, "
                             "--interleave 0 or >= 2\n");
        std::exit(2);
    }
    return o;
}

double percentile(std::vector<double> values, double q) {
    std::sort(values.begin(), values.end());
    const double position = q * static_cast<double>(values.size() - 1);
    const auto below = static_cast<size_t>(position);
    const size_t above = std::min(below + 1, values.size() - 1);
    return values[below] + (position - static_cast<double>(below)) * (values[above] - values[below]);
}

trainbench::RunConfig variant_config(const Options& o, const Variant& v) {
    trainbench::RunConfig config;
    config.dataset = o.dataset;
    config.hidden = {1024, 1024};
    config.activation = trainbench::Activation::relu;
    config.batch_size = o.batch;
    config.step_size = v.step_size;
    config.optimizer.kind = trainbench::OptimizerKind::adam;  // lr 1e-3, PyTorch's defaults
    config.precision = v.precision;
    config.gradient_checkpointing = v.checkpointing;
    config.threads = o.threads;
    config.epochs = 1000;  // max_steps ends the run
    config.seed = 0;
    return config;
}

// Lets runs on their own threads take turns: only the run whose turn it is trains, the others
// wait in their observer callbacks (outside the timed update).
class TurnTaking {
public:
    explicit TurnTaking(int runs) : finished_(static_cast<size_t>(runs), false) {}

    void wait_for_turn(int run) {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return turn_ == run; });
    }
    void pass_turn(int run) {
        std::lock_guard<std::mutex> lock(mutex_);
        turn_ = next_after(run);
        changed_.notify_all();
    }
    void finish(int run) {
        std::lock_guard<std::mutex> lock(mutex_);
        finished_[static_cast<size_t>(run)] = true;
        if (turn_ == run) turn_ = next_after(run);
        changed_.notify_all();
    }

private:
    int next_after(int run) const {
        const int runs = static_cast<int>(finished_.size());
        for (int k = 1; k <= runs; ++k) {
            const int candidate = (run + k) % runs;
            if (!finished_[static_cast<size_t>(candidate)]) return candidate;
        }
        return run;
    }

    std::mutex mutex_;
    std::condition_variable changed_;
    int turn_ = 0;
    std::vector<bool> finished_;
};

// One run of variant v. With turns, the run waits for its turn before its first update and
// hands over after every `interleave` updates; the first update of each turn is not timed.
void run_variant(const Options& o, Variant& v, const std::shared_ptr<const trainbench::Dataset>& data,
                 TurnTaking* turns, int run_index) {
    const int64_t turn = turns ? o.interleave : 0;
    auto timed = [&](int64_t update) { return update >= o.warmup && (turn == 0 || update % turn != 0); };
    int64_t updates = o.warmup + o.measured;
    if (turn > 0) {
        updates = 0;
        for (int64_t timed_count = 0; timed_count < o.measured; ++updates) timed_count += timed(updates) ? 1 : 0;
        updates = (updates + turn - 1) / turn * turn;
    }
    trainbench::RunConfig config = variant_config(o, v);
    config.max_steps = updates;
    int64_t update = 0;
    trainbench::Observer observer;
    if (turns) observer.on_start = [&](const trainbench::RunPlan&) { turns->wait_for_turn(run_index); };
    observer.on_update = [&](const trainbench::StepMetrics& m) {
        if (timed(update)) v.update_ms.push_back(m.update_ms);
        ++update;
        v.peak_activation_bytes = std::max(
            v.peak_activation_bytes, m.memory.update_peak_bytes(trainbench::MemoryCategory::activations));
        v.peak_live_bytes = std::max(v.peak_live_bytes, m.memory.update_live_peak);
        v.last_loss = m.loss;
        if (turns && update % turn == 0 && update < updates) {
            turns->pass_turn(run_index);
            turns->wait_for_turn(run_index);
        }
    };
    const trainbench::RunResult result = trainbench::train(config, observer, nullptr, data);
    if (result.reason != trainbench::StopReason::max_steps)
        throw trainbench::Error("benchmark run '" + v.name + "' stopped early (" + trainbench::to_string(result.reason) +
                                "): " + result.message);
}

// One round: every variant once, side by side in turns or one after another.
void run_round(const Options& o, std::vector<Variant>& variants, const std::shared_ptr<const trainbench::Dataset>& data) {
    if (o.interleave == 0 || variants.size() == 1) {
        for (auto& v : variants) run_variant(o, v, data, nullptr, 0);
        return;
    }
    TurnTaking turns(static_cast<int>(variants.size()));
    std::vector<std::exception_ptr> errors(variants.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < variants.size(); ++i)
        threads.emplace_back([&, i] {
            try {
                run_variant(o, variants[i], data, &turns, static_cast<int>(i));
            } catch (...) {
                errors[i] = std::current_exception();
            }
            turns.finish(static_cast<int>(i));
        });
    for (auto& t : threads) t.join();
    for (const auto& error : errors)
        if (error) std::rethrow_exception(error);
}

}  // namespace

int main(int argc, char** argv) {
    const Options o = parse_options(argc, argv);
    try {
        trainbench::DataOptions data_options;
        data_options.seed = 0;
        auto loaded = trainbench::load_dataset(o.dataset, data_options);
        // Validation is not part of an update; dropping it keeps the run's end cheap.
        loaded.validation = trainbench::DataSplit{};
        const auto data = std::make_shared<const trainbench::Dataset>(std::move(loaded));

        std::vector<Variant> variants = {
            {"fp32-step1", 1, trainbench::Precision::fp32, false, "issue 2 baseline"},
            {"fp32-step4", 4, trainbench::Precision::fp32, false, "4 micro-batches of 64, same global batch"},
            {"bf16-step1", 1, trainbench::Precision::bf16, false, "mixed precision, 16-bit rounding emulated in fp32 products"},
            {"fp16-step1", 1, trainbench::Precision::fp16, false, "mixed precision with dynamic loss scaling"},
            {"fp32-step1-checkpointing", 1, trainbench::Precision::fp32, true, "gradient checkpointing"},
        };
        if (!o.only.empty()) {
            const std::string wanted = "," + o.only + ",";
            std::erase_if(variants, [&](const Variant& v) { return wanted.find("," + v.name + ",") == std::string::npos; });
            if (variants.empty()) usage_and_exit(argv[0], 2);
        }

        for (int round = 0; round < o.rounds; ++round) run_round(o, variants, data);

        const std::vector<int64_t> widths = {data->features, 1024, 1024, data->output_width()};
        int64_t params = 0;
        for (size_t i = 0; i + 1 < widths.size(); ++i) params += widths[i] * widths[i + 1] + widths[i + 1];
        if (!o.json) {
            std::printf("TrainBench CPU: %s, MLP %lld-1024-1024-%lld relu (%lld parameters), adam, batch %lld, "
                        "%d threads; %d rounds x %lld timed updates after %lld warm-up updates%s\n",
                        o.dataset.c_str(), static_cast<long long>(widths.front()),
                        static_cast<long long>(widths.back()), static_cast<long long>(params), static_cast<long long>(o.batch),
                        o.threads, o.rounds, static_cast<long long>(o.measured), static_cast<long long>(o.warmup),
                        o.interleave >= 2 ? ", variants taking turns" : "");
            std::printf("%-26s %10s %10s %10s %12s %14s %12s\n", "variant", "median ms", "p10 ms", "p90 ms",
                        "samples/s", "activations", "loss");
        }
        const double baseline_ms = percentile(variants.front().update_ms, 0.5);
        for (const auto& v : variants) {
            const double median = percentile(v.update_ms, 0.5);
            const double samples_per_second = static_cast<double>(o.batch) / (median / 1000.0);
            if (o.json) {
                std::printf("{\"bench\":\"trainbench_mlp\",\"variant\":\"%s\",\"threads\":%d,\"batch\":%lld,"
                            "\"step_size\":%lld,\"precision\":\"%s\",\"checkpointing\":%s,\"updates\":%zu,\"interleave\":%d,"
                            "\"median_ms\":%.4f,\"p10_ms\":%.4f,\"p90_ms\":%.4f,\"samples_per_second\":%.2f,"
                            "\"vs_fp32_step1_pct\":%.2f,\"peak_activation_bytes\":%lld,\"peak_live_bytes\":%lld,"
                            "\"parameters\":%lld,\"last_loss\":%.6f,\"note\":\"%s\"}\n",
                            v.name.c_str(), o.threads, static_cast<long long>(o.batch),
                            static_cast<long long>(v.step_size), trainbench::to_string(v.precision).c_str(),
                            v.checkpointing ? "true" : "false", v.update_ms.size(), o.interleave, median,
                            percentile(v.update_ms, 0.1), percentile(v.update_ms, 0.9), samples_per_second,
                            100.0 * (median / baseline_ms - 1.0), static_cast<long long>(v.peak_activation_bytes),
                            static_cast<long long>(v.peak_live_bytes), static_cast<long long>(params), v.last_loss,
                            v.note.c_str());
            } else {
                std::printf("%-26s %10.2f %10.2f %10.2f %12.0f %11.1f MiB %12.4f\n", v.name.c_str(), median,
                            percentile(v.update_ms, 0.1), percentile(v.update_ms, 0.9), samples_per_second,
                            static_cast<double>(v.peak_activation_bytes) / (1024.0 * 1024.0), v.last_loss);
            }
        }
        std::fflush(stdout);
    } catch (const trainbench::Error& e) {
        std::fprintf(stderr, "mlp_throughput: %s\n", e.what());
        return 1;
    }
    return 0;
}
