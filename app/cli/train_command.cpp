#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <unistd.h>

#include "atomic_output_file.hpp"
#include "cli_exit.hpp"
#include "commands.hpp"
#include "interrupt.hpp"
#include "metrics_csv_writer.hpp"
#include "mpi_launch.hpp"
#include "progress_display.hpp"
#include "run_flags.hpp"
#include "stop_on_input.hpp"
#include "trainbench/config_json.hpp"
#include "trainbench/error.hpp"
#include "trainbench/lora_weights.hpp"
#include "trainbench/processes.hpp"
#include "trainbench/run_events.hpp"
#include "trainbench/trainer.hpp"

namespace trainbench::cli {

namespace {

struct TrainArguments {
    explicit TrainArguments(CLI::App& command) : flags(command, RunFlags::Scope::train) {
        command.add_flag("--print-config", print_config,
                         "print the resolved configuration as JSON and exit");
        command.add_flag("--quiet,-q", quiet, "no progress output; only the final summary");
        command.add_option("--events-out", events_out,
                           "stream the run as JSON lines to FILE, or to stdout with '-' (the progress and "
                           "the summary then go to stderr); docs/METRICS.md");
        command.add_flag("--stop-on-input", stop_on_input,
                         "stop after the current micro-batch when stdin reads a line \"stop\" or ends, as Ctrl-C "
                         "does (for a program that runs this one as a child)");
    }
    RunFlags flags;
    bool print_config = false;
    bool quiet = false;
    std::string events_out;
    bool stop_on_input = false;
};

// `--events-out`: one line per event, flushed as it is written, so a reader sees each update
// as it happens (the app reads a multi-process run's progress this way).
class EventStream {
public:
    explicit EventStream(const std::string& path) {
        if (path == "-") {
            file_ = stdout;
        } else {
            file_ = std::fopen(path.c_str(), "w");
            if (!file_)
                throw Error("cannot write the event stream " + path + ": " + std::strerror(errno) +
                            "; check the folder exists and is writable");
            owned_ = true;
        }
    }
    ~EventStream() {
        if (owned_) std::fclose(file_);
    }
    EventStream(const EventStream&) = delete;
    EventStream& operator=(const EventStream&) = delete;
    void write(const std::string& line) {
        std::fputs(line.c_str(), file_);
        std::fputc('\n', file_);
        std::fflush(file_);
    }

private:
    std::FILE* file_ = nullptr;
    bool owned_ = false;
};

// A pipeline's last update, stage by stage: what each did and how long it stood idle (the
// bubble), measured, beside GPipe's (P-1)/(m+P-1); and each process's memory against its plan.
void print_pipeline_stages(std::FILE* out, const RunResult& result) {
    const std::vector<PipelineStageMetrics>& stages = result.last.pipeline_stages;
    if (stages.empty()) return;
    double idle = 0.0;
    for (const PipelineStageMetrics& s : stages) idle += s.idle_fraction();
    std::fprintf(out, "pipeline (last update, %" PRId64 " micro-batches, %s): bubble %.1f%% measured (mean idle share of the stages), (P-1)/(m+P-1) = %.1f%%\n",
                 result.plan.step_size, result.plan.pipeline_schedule.c_str(),
                 100.0 * idle / static_cast<double>(stages.size()), 100.0 * result.plan.pipeline_bubble);
    for (size_t k = 0; k < stages.size(); ++k) {
        const PipelineStageMetrics& s = stages[k];
        std::fprintf(out, "  stage %zu: forward %.3f ms, backward %.3f ms, waiting %.3f ms, idle %.1f%% of %.3f ms; memory peak %s, plan %s\n",
                     k + 1, s.forward_ms, s.backward_ms, s.wait_ms, 100.0 * s.idle_fraction(), s.span_ms,
                     format_bytes(s.peak_bytes).c_str(), format_bytes(s.planned_bytes).c_str());
    }
}

void print_summary(std::FILE* out, const RunResult& result, int64_t peak_rss) {
    const StepMetrics& last = result.last;
    std::fprintf(out, "result: %s after %" PRId64 " updates, %" PRId64 " samples, %.2f s\n",
                 to_string(result.reason).c_str(), last.update, last.samples_seen, result.seconds);
    if (!result.message.empty()) std::fprintf(out, "reason: %s\n", result.message.c_str());
    if (last.update > 0) std::fprintf(out, "final loss: %.6g\n", last.loss);
    const EpochMetrics& epoch = result.last_epoch;
    if (epoch.epoch > 0 && !std::isnan(epoch.val_loss)) {
        std::fprintf(out, "validation: loss %.6g", epoch.val_loss);
        if (!std::isnan(epoch.val_accuracy))
            std::fprintf(out, ", accuracy %.2f%%", 100.0 * epoch.val_accuracy);
        std::fprintf(out, " (%" PRId64 " samples, after epoch %" PRId64 ")\n", epoch.val_samples,
                     epoch.epoch);
    }
    if (last.update > 0) {
        std::fprintf(out, "peak memory: engine %s (activations %s, optimizer state %s), process RSS %s",
                     format_bytes(last.memory.reserved_peak).c_str(),
                     format_bytes(last.memory.peak_bytes(MemoryCategory::activations)).c_str(),
                     format_bytes(last.memory.peak_bytes(MemoryCategory::optimizer_state)).c_str(),
                     format_bytes(peak_rss).c_str());
        if (last.device_total_bytes > 0)
            std::fprintf(out, ", device %s of %s", format_bytes(last.device_used_bytes).c_str(),
                         format_bytes(last.device_total_bytes).c_str());
        std::fputc('\n', out);
    }
    print_pipeline_stages(out, result);
}

// A signal's stop exits as shells report the signal (130 for Ctrl-C); a stop asked for on stdin
// (--stop-on-input), or agreed with the other processes without a signal here, is a normal end.
int stopped_exit_code() { return received_signal() > 0 ? 128 + received_signal() : kExitSuccess; }

// A process other than 0 of a multi-process run: the same training, no output of its own.
int run_as_helper_process(RunConfig config) {
    config.metrics_out.clear();
    config.save_weights.clear();
    config.save_adapters.clear();
    install_interrupt_handlers(true);
    const RunResult result = train(config, Observer{}, &stop_requested(), nullptr);
    switch (result.reason) {
        case StopReason::completed:
        case StopReason::max_steps: return kExitSuccess;
        case StopReason::stopped: return stopped_exit_code();
        default: return kExitRuntimeError;  // process 0 says why
    }
}

int run_train(const TrainArguments& arguments) {
    RunConfig config = arguments.flags.resolve(RunConfig{});
    // Started by mpirun without --processes: the processes are the ones mpirun started.
    const ProcessWorld world = process_world();
    if (world.size > 1 && config.processes == 1) config.processes = world.size;
    try {
        validate(config);
    } catch (const Error& e) {
        throw UsageError(e.what());
    }
    if (arguments.print_config) {
        if (world.rank == 0) std::printf("%s\n", config_to_json(config).c_str());
        return kExitSuccess;
    }
    if (config.processes > 1 && !launched_by_mpi()) relaunch_under_mpirun(config.processes);
    // Process 0 reports and writes the outputs; the others train beside it silently.
    if (world.rank != 0) return run_as_helper_process(config);

    // Outputs are opened (or probed) before training, so a bad path fails in a second rather
    // than after the run; both are moved into place only at the end.
    std::optional<MetricsCsvWriter> metrics;
    if (!config.metrics_out.empty()) metrics.emplace(config.metrics_out);
    if (!config.save_weights.empty()) check_writable(config.save_weights);
    if (!config.save_adapters.empty()) check_writable(config.save_adapters);
    std::optional<EventStream> events;
    if (!arguments.events_out.empty()) events.emplace(arguments.events_out);
    // With the events on stdout, everything meant for a person goes to stderr.
    std::FILE* const human = arguments.events_out == "-" ? stderr : stdout;
    RunConfig engine_config = config;
    engine_config.metrics_out.clear();
    engine_config.save_weights.clear();
    engine_config.save_adapters.clear();

    install_interrupt_handlers();
    std::optional<StopOnInput> stop_on_input;
    if (arguments.stop_on_input) stop_on_input.emplace(arguments.quiet);
    ProgressDisplay progress(human, ::isatty(::fileno(human)) != 0, arguments.quiet);
    int64_t peak_rss = 0;
    const Observer event_writer =
        events ? event_writing_observer([&](const std::string& line) { events->write(line); }) : Observer{};
    Observer observer;
    observer.on_start = [&](const RunPlan& plan) {
        progress.start(plan);
        if (events) event_writer.on_start(plan);
    };
    observer.on_update = [&](const StepMetrics& m) {
        if (metrics) metrics->add_update(m);
        if (m.rss_bytes > peak_rss) peak_rss = m.rss_bytes;
        progress.update(m);
        if (events) event_writer.on_update(m);
    };
    observer.on_epoch_end = [&](const EpochMetrics& epoch) {
        if (metrics) metrics->add_epoch_end(epoch);
        progress.epoch_end(epoch);
        if (events) event_writer.on_epoch_end(epoch);
    };
    observer.on_note = [&](const std::string& text) {
        progress.note(text);
        if (events) event_writer.on_note(text);
    };
    observer.on_sample = [&](int64_t update, const std::string& text) {
        progress.sample(update, text);
        if (events) event_writer.on_sample(update, text);
    };

    RunResult result = train(engine_config, observer, &stop_requested(), nullptr);
    progress.finish();

    const bool finished =
        result.reason == StopReason::completed || result.reason == StopReason::max_steps;
    const bool interrupted = result.reason == StopReason::stopped;
    print_summary(human, result, peak_rss);
    std::fflush(human);
    if (!finished && !interrupted) {
        if (events) events->write(end_event_line(result));
        std::string why = result.message.empty() ? to_string(result.reason) : result.message;
        throw Error("training " + to_string(result.reason) + " at update " +
                    std::to_string(result.last.update) + ": " + why +
                    " (no output files written)");
    }
    if (metrics) {
        metrics->commit();
        std::fprintf(human, "metrics: %" PRId64 " rows written to %s\n", metrics->rows_written(),
                     config.metrics_out.c_str());
    }
    const char* when = interrupted ? " (as they were when the run was interrupted)" : "";
    if (!config.save_weights.empty() && !result.weights.empty()) {
        if (config.lora_rank > 0) {
            save_weights(config.save_weights,
                         merge_lora_adapters(result.weights, config.lora_alpha / static_cast<double>(config.lora_rank)));
            std::fprintf(human, "weights: saved to %s, the adapters merged into the base%s\n", config.save_weights.c_str(), when);
        } else {
            save_weights(config.save_weights, result.weights);
            std::fprintf(human, "weights: saved to %s%s\n", config.save_weights.c_str(), when);
        }
    }
    if (!config.save_adapters.empty() && !result.weights.empty()) {
        save_lora_adapters(config.save_adapters, result.weights, config.lora_rank, config.lora_alpha, config.lora_targets);
        std::fprintf(human, "adapters: saved to %s%s\n", config.save_adapters.c_str(), when);
    }
    // Last, so that a reader that sees it finds the output files in place.
    if (events) events->write(end_event_line(result));
    return interrupted ? stopped_exit_code() : kExitSuccess;
}

}  // namespace

Command add_train_command(CLI::App& parent) {
    CLI::App* command = parent.add_subcommand("train", "train a model and report its metrics");
    auto arguments = std::make_shared<TrainArguments>(*command);
    return {command, [arguments] { return run_train(*arguments); }};
}

}  // namespace trainbench::cli
