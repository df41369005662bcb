#include "stop_on_input.hpp"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

#include "interrupt.hpp"

namespace trainbench::cli {

namespace {
constexpr int kPollMs = 100;  // how soon the watcher notices that the run is over
}

StopOnInput::StopOnInput(bool quiet) : quiet_(quiet), watcher_([this] { watch(); }) {}

StopOnInput::~StopOnInput() {
    done_.store(true);
    watcher_.join();
}

void StopOnInput::watch() {
    std::string line;
    while (!done_.load()) {
        pollfd input{STDIN_FILENO, POLLIN, 0};
        const int ready = ::poll(&input, 1, kPollMs);
        if (ready < 0 && errno == EINTR) continue;
        if (ready < 0) return;
        if (ready == 0) continue;
        char buffer[256];
        const ssize_t got = ::read(STDIN_FILENO, buffer, sizeof buffer);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {  // the end of the input (or an error reading it): the parent is gone
            stop_because("stdin ended");
            return;
        }
        for (ssize_t k = 0; k < got; ++k) {
            if (buffer[k] != '\n') {
                line += buffer[k];
                continue;
            }
            if (line == "stop") {
                stop_because("stdin said stop");
                return;
            }
            line.clear();
        }
    }
}

void StopOnInput::stop_because(const char* why) {
    request_stop();
    if (!quiet_)
        std::fprintf(stderr, "\ntrainbench-cli: %s: stopping after the current micro-batch (--stop-on-input)\n", why);
}

}  // namespace trainbench::cli
