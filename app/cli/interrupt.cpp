#include "interrupt.hpp"

#include <csignal>
#include <cstring>
#include <unistd.h>

namespace trainbench::cli {

namespace {

constexpr int kTemporarySlots = 8;
constexpr size_t kPathCapacity = 4096;

std::atomic<bool> g_stop{false};
std::atomic<bool> g_quiet{false};
std::atomic<int> g_signal{0};
std::atomic<bool> g_slot_used[kTemporarySlots];
char g_slot_path[kTemporarySlots][kPathCapacity];

void write_stderr(const char* text) {
    ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
    (void)ignored;
}

// Only async-signal-safe calls here: atomics, write, unlink, _exit.
void on_signal(int signal_number) {
    if (g_stop.exchange(true)) {
        for (int slot = 0; slot < kTemporarySlots; ++slot)
            if (g_slot_used[slot].load()) ::unlink(g_slot_path[slot]);
        if (!g_quiet.load()) write_stderr("\ntrainbench-cli: aborted\n");
        ::_exit(128 + signal_number);
    }
    g_signal.store(signal_number);
    if (!g_quiet.load()) write_stderr("\ntrainbench-cli: stopping after the current micro-batch "
                 "(press Ctrl-C again to abort without writing)\n");
}

}  // namespace

void install_interrupt_handlers(bool quiet) {
    g_quiet.store(quiet);
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
}

const std::atomic<bool>& stop_requested() { return g_stop; }

void request_stop() { g_stop.store(true); }

int received_signal() { return g_signal.load(); }

int register_temporary_file(const std::string& path) {
    if (path.size() >= kPathCapacity) return -1;
    for (int slot = 0; slot < kTemporarySlots; ++slot) {
        if (g_slot_used[slot].load()) continue;
        std::memcpy(g_slot_path[slot], path.c_str(), path.size() + 1);
        g_slot_used[slot].store(true);
        return slot;
    }
    return -1;
}

void unregister_temporary_file(int slot) {
    if (slot >= 0 && slot < kTemporarySlots) g_slot_used[slot].store(false);
}

}  // namespace trainbench::cli
