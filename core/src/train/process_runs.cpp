#include "trainbench/process_runs.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "trainbench/config_json.hpp"
#include "trainbench/error.hpp"
#include "trainbench/run_events.hpp"
#include "trainbench/run_plan.hpp"

extern char** environ;

namespace trainbench {
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

std::string whole_file(const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string trimmed(const std::string& text) {
    const auto first = text.find_first_not_of(" \t\r");
    if (first == std::string::npos) return {};
    return text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
}

std::string failure_line(const std::string& errors, const std::string& unreadable, int64_t processes,
                         int exit_code) {
    std::vector<std::string> lines;
    std::istringstream stream(errors);
    for (std::string line; std::getline(stream, line);) lines.push_back(trimmed(line));
    const std::string cli_error = "trainbench-cli: error: ";
    for (auto line = lines.rbegin(); line != lines.rend(); ++line)
        if (line->rfind(cli_error, 0) == 0) return line->substr(cli_error.size());
    static const std::regex died(R"(noticed that process rank (\d+).*exited on (signal \d+.*?)\.?$)");
    for (const std::string& line : lines)
        if (std::smatch match; std::regex_search(line, match, died))
            return "process " + match[1].str() + " of " + std::to_string(processes) + " died (" + match[2].str() +
                   "); the others were ended";
    if (!unreadable.empty()) return unreadable;
    for (auto line = lines.rbegin(); line != lines.rend(); ++line)
        if (!line->empty() && line->front() != '-') return *line;
    return "the " + std::to_string(processes) + "-process run exited with status " + std::to_string(exit_code);
}

// A child that has just ended reads nothing: the write fails, and must not raise SIGPIPE, whose
// default kills this process. Blocked in this thread for the write, a SIGPIPE it raised is taken
// off the pending set before the mask comes back.
void write_without_sigpipe(int fd, const std::string& text) {
    sigset_t pipe_signal, previous;
    sigemptyset(&pipe_signal);
    sigaddset(&pipe_signal, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_signal, &previous);
    const ssize_t written = ::write(fd, text.data(), text.size());
    if (written < 0 && errno == EPIPE) {
        const timespec now{0, 0};
        ::sigtimedwait(&pipe_signal, nullptr, &now);
    }
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

// The complete lines another process appends to a file, as they arrive: the child's event
// stream, flushed line by line, read while it runs so that the observer sees each update then.
class AppendedLines {
public:
    explicit AppendedLines(std::string path) : path_(std::move(path)) {}
    ~AppendedLines() {
        if (fd_ >= 0) ::close(fd_);
    }
    AppendedLines(const AppendedLines&) = delete;
    AppendedLines& operator=(const AppendedLines&) = delete;

    // Calls each(line) for every line completed since the last call. writer_done: the writer
    // has ended, so a last line without its newline is passed on too.
    template <class Each>
    void read(Each each, bool writer_done) {
        if (fd_ < 0) fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);  // the child makes it
        if (fd_ >= 0) {
            char buffer[1 << 16];
            ssize_t got = 0;
            while ((got = ::read(fd_, buffer, sizeof buffer)) > 0) pending_.append(buffer, static_cast<size_t>(got));
        }
        size_t begin = 0;
        for (size_t newline; (newline = pending_.find('\n', begin)) != std::string::npos; begin = newline + 1)
            each(std::string_view(pending_).substr(begin, newline - begin));
        pending_.erase(0, begin);
        if (writer_done && !pending_.empty()) {
            each(std::string_view(pending_));
            pending_.clear();
        }
    }

private:
    std::string path_;
    int fd_ = -1;
    std::string pending_;
};

}  // namespace

RunResult run_in_processes(const std::string& cli_program, const RunConfig& config, const Dataset& data,
                           const Observer& observer, const std::atomic<bool>* stop) {
    RunResult result;
    result.plan = plan_run(config, data);
    if (observer.on_start) observer.on_start(result.plan);

    const ScratchFolder scratch;
    const std::string config_path = scratch.file("config.json");
    const std::string events_path = scratch.file("events.jsonl");
    const std::string errors_path = scratch.file("errors.txt");
    std::ofstream(config_path) << config_to_json(config);

    std::vector<std::string> arguments = {cli_program, "train", "--config", config_path, "--events-out",
                                          events_path, "--stop-on-input", "--quiet"};
    std::vector<char*> argv;
    for (auto& argument : arguments) argv.push_back(argument.data());
    argv.push_back(nullptr);
    // The child's stdin is a pipe from here: a line "stop" stops it (--stop-on-input), and so
    // does this process's end, which closes the pipe. Both ends close on exec; the child's copy
    // of the read end (its stdin) does not.
    int control[2];
    if (::pipe2(control, O_CLOEXEC) != 0) throw Error(std::string("cannot make a pipe for the child run: ") + std::strerror(errno));
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    posix_spawn_file_actions_adddup2(&files, control[0], STDIN_FILENO);
    posix_spawn_file_actions_addopen(&files, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&files, STDERR_FILENO, errors_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    // A group of its own, so that a Ctrl-C in the terminal reaches only this process, which
    // passes it on as "stop": a signal would make mpirun tear the job's output down first.
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attributes, 0);
    pid_t child = 0;
    const int spawned = ::posix_spawn(&child, argv[0], &files, &attributes, argv.data(), environ);
    posix_spawn_file_actions_destroy(&files);
    posix_spawnattr_destroy(&attributes);
    ::close(control[0]);
    if (spawned != 0) {
        ::close(control[1]);
        throw Error("a run of several processes starts " + arguments[0] + ", and it cannot start: " +
                    std::strerror(spawned) + "; build trainbench-cli");
    }

    // Process 0's updates, evaluations and notes, reported as train() would report them here
    // while the child runs (the plan was reported above), and a stop request passed on once.
    Observer live = observer;
    live.on_start = nullptr;
    RunEventReader events(live);
    AppendedLines lines(events_path);
    auto read_events = [&](bool child_done) {
        lines.read([&](std::string_view line) { events.read_line_of_child(line); }, child_done);
    };
    int status = 0;
    bool interrupted = false;
    while (true) {
        const pid_t done = ::waitpid(child, &status, WNOHANG);
        if (done == child) break;
        read_events(false);
        if (done < 0 && errno != EINTR) {
            ::close(control[1]);
            throw Error(std::string("waiting for the child run: ") + std::strerror(errno));
        }
        if (!interrupted && stop && stop->load()) {
            write_without_sigpipe(control[1], "stop\n");
            interrupted = true;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::close(control[1]);
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    read_events(true);
    const RunPlan plan = result.plan;  // the stream's is the same, measured peak included
    result = child_run_result(events, interrupted, whole_file(errors_path), config.processes, code);
    if (result.plan.global_batch == 0) result.plan = plan;
    return result;
}

RunResult child_run_result(const RunEventReader& events, bool stop_sent, const std::string& errors,
                           int64_t processes, int exit_code) {
    RunResult result = events.result();
    if (events.end()) return result;
    if (stop_sent) {
        // Stopped before the processes had begun to train (mpirun still starting them), or
        // before process 0 wrote its end.
        result.reason = StopReason::stopped;
        result.message = "stopped by the user";
    } else {
        // The run failed before training (a bad setting), or a process died.
        result.reason = StopReason::failed;
        result.message = failure_line(errors, events.unreadable(), processes, exit_code);
    }
    return result;
}

}  // namespace trainbench
