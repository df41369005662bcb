#include "process_runs.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "mpi_launch.hpp"
#include "trainbench/config_json.hpp"
#include "trainbench/error.hpp"
#include "trainbench/run_plan.hpp"

extern char** environ;

namespace trainbench::cli {
namespace {

// A private folder for the child's configuration, metrics and error output, removed after.
class ScratchFolder {
public:
    ScratchFolder() {
        std::string pattern = (std::filesystem::temp_directory_path() / "trainbench-compare-XXXXXX").string();
        if (!::mkdtemp(pattern.data())) throw Error(std::string("cannot create a temporary folder: ") + std::strerror(errno));
        path_ = pattern;
    }
    ~ScratchFolder() {
        std::error_code ignored;
        std::filesystem::remove_all(path_, ignored);
    }
    ScratchFolder(const ScratchFolder&) = delete;
    ScratchFolder& operator=(const ScratchFolder&) = delete;
    std::string file(const char* name) const { return (path_ / name).string(); }

private:
    std::filesystem::path path_;
};

std::vector<std::string> split(const std::string& line) {
    std::vector<std::string> fields;
    size_t start = 0;
    while (true) {
        const size_t comma = line.find(',', start);
        fields.push_back(line.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (comma == std::string::npos) return fields;
        start = comma + 1;
    }
}

double number_in(const std::map<std::string, std::string>& row, const char* column) {
    const auto it = row.find(column);
    if (it == row.end() || it->second.empty()) return 0.0;
    return std::stod(it->second);
}

// Process 0's rows of the metrics CSV (docs/METRICS.md), as the StepMetrics the comparison reads.
void report_updates(const std::string& path, const Observer& observer) {
    std::ifstream in(path);
    std::string line;
    if (!std::getline(in, line)) return;
    const std::vector<std::string> header = split(line);
    while (std::getline(in, line)) {
        const std::vector<std::string> fields = split(line);
        std::map<std::string, std::string> row;
        for (size_t k = 0; k < header.size() && k < fields.size(); ++k) row[header[k]] = fields[k];
        StepMetrics m;
        m.update = static_cast<int64_t>(number_in(row, "update"));
        m.epoch = static_cast<int64_t>(number_in(row, "epoch"));
        m.samples_seen = static_cast<int64_t>(number_in(row, "samples_seen"));
        m.wall_seconds = number_in(row, "wall_seconds");
        m.loss = number_in(row, "loss");
        m.update_ms = number_in(row, "update_ms");
        m.comm_ms = number_in(row, "comm_ms");
        m.batch_samples = static_cast<int64_t>(number_in(row, "batch_samples"));
        m.memory.reserved_peak = static_cast<int64_t>(number_in(row, "mem_peak_total"));
        m.memory.peak[static_cast<size_t>(MemoryCategory::activations)] =
            static_cast<int64_t>(number_in(row, "mem_update_peak_activations"));
        m.rss_bytes = static_cast<int64_t>(number_in(row, "rss_bytes"));
        if (observer.on_update) observer.on_update(m);
    }
}

std::string last_line_of(const std::string& path) {
    std::ifstream in(path);
    std::string line, last;
    while (std::getline(in, line))
        if (!line.empty()) last = line;
    return last;
}

}  // namespace

RunResult run_in_processes(const RunConfig& config, const Dataset& data, const Observer& observer,
                           const std::atomic<bool>* stop) {
    RunResult result;
    result.plan = plan_run(config, data);
    if (observer.on_start) observer.on_start(result.plan);

    const ScratchFolder scratch;
    const std::string config_path = scratch.file("config.json");
    const std::string metrics_path = scratch.file("metrics.csv");
    const std::string errors_path = scratch.file("errors.txt");
    std::ofstream(config_path) << config_to_json(config);

    std::vector<std::string> arguments = {this_program_path(), "train",         "--config", config_path,
                                          "--metrics-out",     metrics_path, "--quiet"};
    std::vector<char*> argv;
    for (auto& argument : arguments) argv.push_back(argument.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    posix_spawn_file_actions_addopen(&files, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&files, STDERR_FILENO, errors_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    pid_t child = 0;
    const int spawned = ::posix_spawn(&child, argv[0], &files, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&files);
    if (spawned != 0) throw Error("cannot start " + arguments[0] + ": " + std::strerror(spawned));

    // Wait, passing a stop request on once.
    int status = 0;
    bool interrupted = false;
    while (true) {
        const pid_t done = ::waitpid(child, &status, WNOHANG);
        if (done == child) break;
        if (done < 0 && errno != EINTR) throw Error(std::string("waiting for the child run: ") + std::strerror(errno));
        if (!interrupted && stop && stop->load()) {
            ::kill(child, SIGINT);
            interrupted = true;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (std::filesystem::exists(metrics_path)) report_updates(metrics_path, observer);
    if (code == 0) {
        result.reason = StopReason::max_steps;
    } else if (interrupted) {
        result.reason = StopReason::stopped;
    } else {
        result.reason = StopReason::failed;
        const std::string error = last_line_of(errors_path);
        result.message = error.empty() ? "the " + std::to_string(config.processes) +
                                             "-process run exited with status " + std::to_string(code)
                                       : error;
    }
    return result;
}

}  // namespace trainbench::cli
