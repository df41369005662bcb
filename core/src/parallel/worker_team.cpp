#include "parallel/worker_team.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TRAINBENCH_CPU_RELAX() _mm_pause()
#else
#define TRAINBENCH_CPU_RELAX() std::this_thread::yield()
#endif

namespace trainbench {
namespace {
thread_local bool inside_task = false;

// How long a waiting thread spins before it sleeps. A sleeping thread is woken through the
// kernel, which in a virtual machine took tens of microseconds a wake (perf: 3% of a bf16 MLP
// update in the hypervisor's wake path), and the members of an update's products often finish
// 0.1 ms or more apart. So while every runnable thread of the machine has a core, a waiting
// thread spins for up to a millisecond, yielding every 128 pauses (2.4 microseconds on the Zen 5
// measured) and going to sleep as soon as a yield comes back late (another thread wanted the
// core). On 2 cores that took 2-10% off the MLP benchmark's updates and 0-6% off the GPT's.
// Where threads wait for a core (another process, the GUI, a compile, ctest -j), a spinning
// member takes the core its own teammate waits for: with three other busy threads on the two
// cores, a millisecond's spin made updates 2 to 2.5 times as slow. There it spins only briefly
// (4,000 pauses, 76 microseconds on that Zen 5), as the team always did, and measured level
// with it. bench/ has no timed test of this; docs/ARCHITECTURE.md has the measurements.
constexpr int kBriefSpinPauses = 4000;
constexpr std::chrono::microseconds kLongSpin{1000};
constexpr int kPausesPerYield = 128;
constexpr std::chrono::microseconds kYieldTakenUp{20};
// How often the dispatcher looks again at how many threads are runnable.
constexpr std::chrono::milliseconds kLoadCheckEvery{50};

// Threads runnable on the machine at this instant, the caller included (the fourth field of
// /proc/loadavg, "running/total"), or -1 where that cannot be read.
int runnable_threads() {
    const int fd = ::open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    char text[128];
    const ssize_t length = ::read(fd, text, sizeof text - 1);
    ::close(fd);
    if (length <= 0) return -1;
    // Parsed by hand: the dispatch path must not allocate (sscanf's float parsing may).
    const char* c = text;
    const char* const end = text + length;
    for (int field = 0; field < 3; ++field) {
        while (c < end && *c != ' ') ++c;
        while (c < end && *c == ' ') ++c;
    }
    int running = 0;
    const char* const digits = c;
    while (c < end && *c >= '0' && *c <= '9') running = running * 10 + (*c++ - '0');
    return c > digits && c < end && *c == '/' ? running : -1;
}

// Spins until ready(): a brief spin, or with `long_spin` up to kLongSpin, yielding as it goes.
// Returns ready().
template <class Ready>
bool spin_until(bool long_spin, Ready ready) {
    if (!long_spin) {
        for (int pause = 0; pause < kBriefSpinPauses; ++pause) {
            if (ready()) return true;
            TRAINBENCH_CPU_RELAX();
        }
        return ready();
    }
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + kLongSpin;
    for (;;) {
        for (int pause = 0; pause < kPausesPerYield; ++pause) {
            if (ready()) return true;
            TRAINBENCH_CPU_RELAX();
        }
        const auto yielded = Clock::now();
        std::this_thread::yield();
        const auto back = Clock::now();
        // A yield that came back late gave the core to a thread that wanted it: stop spinning.
        if (back >= deadline || back - yielded > kYieldTakenUp) return ready();
    }
}
}  // namespace

WorkerTeam& WorkerTeam::shared() {
    static WorkerTeam team;
    return team;
}

WorkerTeam::WorkerTeam(int members) { resize(members); }

int WorkerTeam::resolved_size(int requested) {
    return requested > 0 ? requested : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

WorkerTeam::~WorkerTeam() { stop_workers(); }

void WorkerTeam::stop_workers() {
    {
        std::lock_guard<std::mutex> lock(wake_mutex_);
        stopping_ = true;
        generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    for (auto& worker : workers_) worker.join();
    workers_.clear();
    stopping_ = false;
}

void WorkerTeam::resize(int members) {
    std::lock_guard<std::mutex> dispatch(dispatch_mutex_);
    if (members < 1) members = 1;
    if (members == members_ && static_cast<int>(workers_.size()) == members - 1) return;
    stop_workers();
    members_ = members;
    workers_.reserve(static_cast<size_t>(members - 1));
    // Read here, under the dispatch lock: a worker that read it when its thread got going
    // could miss a dispatch made in between and leave run() waiting for it forever.
    const uint64_t seen = generation_.load(std::memory_order_acquire);
    for (int m = 1; m < members; ++m) workers_.emplace_back([this, m, seen] { worker_loop(m, seen); });
}

void WorkerTeam::run(Task task, void* context) {
    if (inside_task || members_ == 1) {
        task(context, 0, 1);
        return;
    }
    std::lock_guard<std::mutex> dispatch(dispatch_mutex_);
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_load_check_) {
        const int runnable = runnable_threads();
        long_spin_.store(runnable > 0 && runnable <= cores_, std::memory_order_relaxed);
        next_load_check_ = now + kLoadCheckEvery;
    }
    {
        std::lock_guard<std::mutex> lock(wake_mutex_);
        task_ = task;
        context_ = context;
        pending_.store(members_ - 1, std::memory_order_relaxed);
        generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    inside_task = true;
    task(context, 0, members_);
    inside_task = false;
    if (!spin_until(long_spin_.load(std::memory_order_relaxed), [&] { return pending_.load(std::memory_order_acquire) == 0; })) {
        std::unique_lock<std::mutex> lock(wake_mutex_);
        done_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
    }
}

void WorkerTeam::worker_loop(int member, uint64_t seen) {
    for (;;) {
        spin_until(long_spin_.load(std::memory_order_relaxed),
                   [&] { return generation_.load(std::memory_order_acquire) != seen; });
        Task task;
        void* context;
        {
            std::unique_lock<std::mutex> lock(wake_mutex_);
            wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
            seen = generation_.load(std::memory_order_acquire);
            if (stopping_) return;
            task = task_;
            context = context_;
        }
        inside_task = true;
        task(context, member, members_);
        inside_task = false;
        if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            std::lock_guard<std::mutex> lock(wake_mutex_);
            done_.notify_one();
        }
    }
}

}  // namespace trainbench
