#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>

#include "atomic_output_file.hpp"
#include "cli_exit.hpp"
#include "commands.hpp"
#include "interrupt.hpp"
#include "mpi_launch.hpp"
#include "run_flags.hpp"
#include "trainbench/config_json.hpp"
#include "trainbench/error.hpp"
#include "trainbench/technique_comparison.hpp"

namespace trainbench::cli {

namespace {

struct CompareArguments {
    explicit CompareArguments(CLI::App& command) : flags(command, RunFlags::Scope::compare) {
        command.add_option("--empty-cache-steps", empty_cache_steps,
                           "N of the 'empty cache every N steps' run")
            ->capture_default_str()
            ->group("Comparison");
        command.add_option("--out-csv", out_csv, "write the table as CSV")->group("Comparison");
        command.add_option("--out-md", out_md, "write the table as Markdown")->group("Comparison");
        command.add_flag("--print-config", print_config,
                         "print the baseline configuration as JSON and exit")
            ->group("Comparison");
        command.add_flag("--quiet,-q", quiet, "print only the table")->group("Comparison");
        command.footer(
            "Runs a baseline and one run per technique (batch size x2, gradient accumulation "
            "step_size x4, gradient checkpointing, bf16 mixed precision, empty cache, sgd vs "
            "adam, prefetch 2; with MPI also 2 data-parallel processes, ZeRO-1 and ZeRO-2, run as "
            "child trainbench-cli train processes), each for --max-steps updates (default " +
            std::to_string(default_comparison_steps()) +
            "), and prints measured update time, throughput, peak memory and final loss.");
    }
    RunFlags flags;
    int64_t empty_cache_steps = 1;
    std::string out_csv;
    std::string out_md;
    bool print_config = false;
    bool quiet = false;
};

int run_compare(const CompareArguments& arguments) {
    RunConfig base = arguments.flags.resolve(default_comparison_config());
    if (base.max_steps <= 0) base.max_steps = default_comparison_steps();
    if (arguments.empty_cache_steps < 1)
        throw UsageError("--empty-cache-steps must be at least 1 for the comparison run");
    try {
        validate(base);
    } catch (const Error& e) {
        throw UsageError(e.what());
    }
    if (arguments.print_config) {
        std::printf("%s\n", config_to_json(base).c_str());
        return kExitSuccess;
    }
    std::optional<AtomicOutputFile> csv_file, markdown_file;
    if (!arguments.out_csv.empty()) csv_file.emplace(arguments.out_csv);
    if (!arguments.out_md.empty()) markdown_file.emplace(arguments.out_md);

    ComparisonOptions options;
    options.max_steps = base.max_steps;
    options.empty_cache_steps = arguments.empty_cache_steps;
    // The data-parallel rows, where this build can start several processes on this device.
    const std::string left_out = add_process_rows(options, this_program_path(), base);
    if (!left_out.empty() && !arguments.quiet) std::printf("note: %s\n", left_out.c_str());
    ComparisonObserver observer;
    if (!arguments.quiet) {
        // A variant that cannot apply (no run) only reaches on_run_end.
        auto started = std::make_shared<int>(-1);
        observer.on_run_start = [started](int index, int total, const ComparisonRow& row) {
            *started = index;
            std::printf("run %d/%d: %s (%s) ...", index + 1, total, to_string(row.technique).c_str(),
                        row.change.c_str());
            std::fflush(stdout);
        };
        observer.on_run_end = [started](int index, int total, const ComparisonRow& row) {
            if (*started != index)
                std::printf("run %d/%d: %s", index + 1, total, to_string(row.technique).c_str());
            if (row.ok)
                std::printf(" %.3f ms/update, peak %s, loss %.4f\n", row.median_update_ms,
                            format_bytes(row.peak_memory_bytes).c_str(), row.final_loss);
            else
                std::printf(" failed: %s\n", row.error.c_str());
            std::fflush(stdout);
        };
    }
    install_interrupt_handlers();
    std::vector<ComparisonRow> rows = compare_techniques(base, options, observer, &stop_requested());

    const std::string markdown = comparison_to_markdown(rows);
    std::printf("\n%s", markdown.c_str());
    if (csv_file) {
        std::fputs(comparison_to_csv(rows).c_str(), csv_file->stream());
        csv_file->commit();
    }
    if (markdown_file) {
        std::fputs(markdown.c_str(), markdown_file->stream());
        markdown_file->commit();
    }
    if (received_signal() > 0) return 128 + received_signal();
    for (const auto& row : rows)
        if (!row.ok) return kExitRuntimeError;
    return kExitSuccess;
}

}  // namespace

Command add_compare_command(CLI::App& parent) {
    CLI::App* command = parent.add_subcommand(
        "compare", "measure what each efficiency technique does to speed and memory");
    auto arguments = std::make_shared<CompareArguments>(*command);
    return {command, [arguments] { return run_compare(*arguments); }};
}

}  // namespace trainbench::cli
