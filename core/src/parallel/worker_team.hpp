#pragma once
// A fixed team of worker threads that runs one function on every member at once, the
// caller included: the CPU engine's only source of parallelism (Eigen's own threading is
// off). It replaces OpenMP's runtime for two reasons: OpenMP spins busy-waiting by default,
// which on a shared or busy 2-core machine (the desktop app's GUI thread, CI, a compile in the
// background) made updates 10-25x slower, and libgomp allocates whenever a team changes size.
// Here a waiting thread spins briefly, then sleeps; longer (yielding its core as it goes) only
// while the machine has a core for every runnable thread (worker_team.cpp says why and what it
// measured). A dispatch allocates nothing.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace trainbench {

class WorkerTeam {
public:
    using Task = void (*)(void* context, int member, int members);

    // The process-wide team the engine uses.
    static WorkerTeam& shared();

    explicit WorkerTeam(int members = 1);
    ~WorkerTeam();
    WorkerTeam(const WorkerTeam&) = delete;
    WorkerTeam& operator=(const WorkerTeam&) = delete;

    // Resizes the team (starts or stops threads): call outside the training step.
    void resize(int members);
    int members() const { return members_; }
    // A --threads value made concrete: 0 means every core.
    static int resolved_size(int requested);

    // Runs task(context, m, members) for every member m, m = 0 on the calling thread, and
    // returns when all are done. Called from inside a task, it runs serially.
    void run(Task task, void* context);

private:
    void worker_loop(int member, uint64_t seen);
    void stop_workers();

    int members_ = 1;
    std::vector<std::thread> workers_;
    std::mutex dispatch_mutex_;  // one dispatch at a time
    std::mutex wake_mutex_;
    std::condition_variable wake_;
    std::condition_variable done_;
    std::atomic<uint64_t> generation_{0};
    std::atomic<int> pending_{0};
    Task task_ = nullptr;
    void* context_ = nullptr;
    bool stopping_ = false;
    const int cores_ = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    std::atomic<bool> long_spin_{false};  // every runnable thread had a core at the last look
    std::chrono::steady_clock::time_point next_load_check_{};  // the dispatcher's, under dispatch_mutex_
};

}  // namespace trainbench
