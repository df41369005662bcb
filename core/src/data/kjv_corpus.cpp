#include "data/kjv_corpus.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "io/cache_folder.hpp"
#include "trainbench/error.hpp"

extern char** environ;

namespace trainbench::data {
namespace {

constexpr const char* whole_bible = "Gen1:1-Rev22:21";
constexpr std::string_view last_verse = "Rev22:21";
constexpr const char* install_hint = "apt-get install bible-kjv bible-kjv-text";

// Length of the verse reference ("Ge1:1", "1Chr3:4") at the start of `line`, 0 when none:
// an optional book number, letters, chapter digits, ':' and verse digits, then a space or
// the end of the line.
size_t reference_length(std::string_view line) {
    size_t i = 0;
    const auto digits = [&] {
        const size_t start = i;
        while (i < line.size() && std::isdigit(static_cast<unsigned char>(line[i]))) ++i;
        return i > start;
    };
    if (i < line.size() && line[i] >= '1' && line[i] <= '3') ++i;
    const size_t letters = i;
    while (i < line.size() && std::isalpha(static_cast<unsigned char>(line[i]))) ++i;
    if (i == letters || !digits()) return 0;
    if (i >= line.size() || line[i] != ':') return 0;
    ++i;
    if (!digits()) return 0;
    if (i < line.size() && line[i] != ' ') return 0;
    return i;
}

std::string_view trim(std::string_view text) {
    const auto first = text.find_first_not_of(" \t\r");
    if (first == std::string_view::npos) return {};
    return text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
}

struct ProgramOutput {
    int exit_status = -1;  // -1 when killed by a signal
    std::string out;
    std::string err;
};

// Runs argv[0] (searched on PATH) with stdin from /dev/null and collects stdout and stderr.
// Returns false when the program cannot be started; `start_error` is then its errno.
bool run_program(const std::string& program, std::vector<std::string> arguments, ProgramOutput& result,
                 int& start_error) {
    int out_pipe[2], err_pipe[2];
    if (pipe2(out_pipe, O_CLOEXEC) != 0) throw Error(std::string("cannot create a pipe: ") + std::strerror(errno));
    if (pipe2(err_pipe, O_CLOEXEC) != 0) {
        close(out_pipe[0]);
        close(out_pipe[1]);
        throw Error(std::string("cannot create a pipe: ") + std::strerror(errno));
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
    posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
    arguments.insert(arguments.begin(), program);
    std::vector<char*> argv;
    for (std::string& argument : arguments) argv.push_back(argument.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    start_error = posix_spawnp(&pid, program.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(out_pipe[1]);
    close(err_pipe[1]);
    if (start_error != 0) {
        close(out_pipe[0]);
        close(err_pipe[0]);
        return false;
    }
    // Both pipes are drained together: a child blocked on a full stderr pipe while we wait on
    // stdout would never finish.
    pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
    std::string* sinks[2] = {&result.out, &result.err};
    int open_count = 2;
    char buffer[1 << 16];
    while (open_count > 0) {
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (int k = 0; k < 2; ++k) {
            if (fds[k].fd < 0 || fds[k].revents == 0) continue;
            const ssize_t got = read(fds[k].fd, buffer, sizeof buffer);
            if (got > 0) {
                sinks[k]->append(buffer, static_cast<size_t>(got));
            } else if (got == 0 || errno != EINTR) {
                close(fds[k].fd);
                fds[k].fd = -1;
                --open_count;
            }
        }
    }
    for (const pollfd& fd : fds) {
        if (fd.fd >= 0) close(fd.fd);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    result.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return true;
}

// Writes `text` to `path` through a temporary file in the same folder and a rename, so the
// file appears whole or not at all. The temporary name holds the process id: ranks of a
// data-parallel run may extract at once, and each renames its own complete copy.
void write_file_atomically(const std::string& path, const std::string& text) {
    const std::string temporary = path + "." + std::to_string(getpid()) + ".tmp";
    const auto fail = [&](const std::string& what) {
        const std::string reason = std::strerror(errno);
        unlink(temporary.c_str());
        throw Error("cannot " + what + " the KJV cache " + path + " (" + reason +
                    "); free disk space or set XDG_CACHE_HOME to a writable folder");
    };
    const int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) fail("create");
    size_t written = 0;
    while (written < text.size()) {
        const ssize_t n = write(fd, text.data() + written, text.size() - written);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            close(fd);
            fail("write");
        }
        written += static_cast<size_t>(n);
    }
    // fsync before the rename: after a crash the name then never points at unwritten blocks.
    if (fsync(fd) != 0) {
        close(fd);
        fail("write");
    }
    if (close(fd) != 0) fail("write");
    if (std::rename(temporary.c_str(), path.c_str()) != 0) fail("write");
}

}  // namespace

std::string default_kjv_cache_path() { return (user_cache_folder() / "kjv.txt").string(); }

BibleText kjv_text_from_bible_output(std::string_view output) {
    BibleText bible;
    bible.text.reserve(output.size());
    int64_t line_number = 0;
    while (!output.empty()) {
        const size_t end = output.find('\n');
        const std::string_view line = output.substr(0, end);
        output = end == std::string_view::npos ? std::string_view{} : output.substr(end + 1);
        ++line_number;
        if (trim(line).empty()) continue;
        const size_t reference = reference_length(line);
        if (reference > 0) {
            std::string_view verse = line.substr(reference);
            if (!verse.empty()) verse.remove_prefix(1);  // the space after the reference
            if (!verse.empty() && verse.back() == '\r') verse.remove_suffix(1);
            bible.text.append(verse);
            bible.text.push_back('\n');
            bible.last_reference = std::string(line.substr(0, reference));
            ++bible.verses;
        } else if (bible.verses > 0) {
            bible.text.back() = ' ';  // the verse goes on: its '\n' becomes the space bible broke at
            bible.text.append(trim(line));
            bible.text.push_back('\n');
        } else {
            throw Error("line " + std::to_string(line_number) + " of the output of 'bible -f " +
                        whole_bible + "' is '" + std::string(line.substr(0, 60)) +
                        "', not a verse such as 'Ge1:1 In the beginning ...'; this bible-kjv is "
                        "not the one expected, reinstall it (" + install_hint + ")");
        }
    }
    return bible;
}

std::string ensure_kjv_text(const std::string& cache_path, const std::string& program) {
    std::error_code error;
    if (std::filesystem::is_regular_file(cache_path, error) &&
        std::filesystem::file_size(cache_path, error) > 0 && !error) {
        return cache_path;
    }
    ProgramOutput output;
    int start_error = 0;
    if (!run_program(program, {"-f", whole_bible}, output, start_error)) {
        if (start_error == ENOENT) {
            throw Error("the default text corpus kjv needs the King James Bible program '" + program +
                        "', which is not installed; install it (" + install_hint +
                        ") or give a text file with text:PATH");
        }
        throw Error("cannot run '" + program + "' to extract the King James Bible (" +
                    std::strerror(start_error) + "); check the bible-kjv installation (" +
                    install_hint + ")");
    }
    if (output.exit_status != 0) {
        const std::string_view errors = output.err;
        const std::string said(trim(errors.substr(0, errors.find('\n'))));
        throw Error("'" + program + " -f " + whole_bible + "' failed (exit status " +
                    std::to_string(output.exit_status) + (said.empty() ? "" : ": " + said) +
                    "); install or reinstall its data (" + install_hint + ")");
    }
    const BibleText bible = kjv_text_from_bible_output(output.out);
    if (bible.last_reference != last_verse) {
        throw Error("'" + program + " -f " + whole_bible + "' stopped after " +
                    std::to_string(bible.verses) + " verses at '" + bible.last_reference +
                    "', not at " + std::string(last_verse) + "; reinstall its data (" +
                    install_hint + ")");
    }
    const std::filesystem::path folder = std::filesystem::path(cache_path).parent_path();
    if (!folder.empty()) {
        std::filesystem::create_directories(folder, error);
        if (error) {
            throw Error("cannot create the cache folder " + folder.string() + " (" + error.message() +
                        "); set XDG_CACHE_HOME to a writable folder");
        }
    }
    write_file_atomically(cache_path, bible.text);
    return cache_path;
}

}  // namespace trainbench::data
