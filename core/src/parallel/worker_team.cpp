#include "parallel/worker_team.hpp"

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
// Spin this many times (about 20-50 microseconds) before sleeping: long enough to catch the
// next product of an update, short enough not to steal a busy machine's cores.
constexpr int kSpinIterations = 4000;
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
    for (int spin = 0; spin < kSpinIterations && pending_.load(std::memory_order_acquire) != 0; ++spin) TRAINBENCH_CPU_RELAX();
    if (pending_.load(std::memory_order_acquire) != 0) {
        std::unique_lock<std::mutex> lock(wake_mutex_);
        done_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
    }
}

void WorkerTeam::worker_loop(int member, uint64_t seen) {
    for (;;) {
        for (int spin = 0; spin < kSpinIterations && generation_.load(std::memory_order_acquire) == seen; ++spin)
            TRAINBENCH_CPU_RELAX();
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
