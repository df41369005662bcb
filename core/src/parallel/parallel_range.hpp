#pragma once
// Splits [0, n) into one contiguous slice per member of the shared WorkerTeam, or runs it on
// the calling thread when the work is too small to pay for waking the team.
#include <cstdint>

#include "parallel/worker_team.hpp"

namespace trainbench {

// About 50 microseconds of single-core work (in multiply-adds or element updates).
inline constexpr int64_t kMinParallelWork = int64_t{1} << 19;

template <class Body>
void parallel_range(int64_t n, int64_t work_per_item, Body body) {
    WorkerTeam& team = WorkerTeam::shared();
    const int members = team.members();
    if (members <= 1 || n < members || n * work_per_item < kMinParallelWork) {
        body(int64_t{0}, n);
        return;
    }
    struct Context {
        Body* body;
        int64_t n;
    } context{&body, n};
    team.run(
        [](void* raw, int member, int count) {
            auto* c = static_cast<Context*>(raw);
            (*c->body)(c->n * member / count, c->n * (member + 1) / count);
        },
        &context);
}

// How many members parallel_members runs `total_work` on with a team of `team_members`: all, or 1.
inline int members_for(int64_t total_work, int team_members) {
    return team_members <= 1 || total_work < kMinParallelWork ? 1 : team_members;
}
// ... with the shared team.
inline int members_for(int64_t total_work) { return members_for(total_work, WorkerTeam::shared().members()); }

// Runs body(member, members) once per member of the shared WorkerTeam (or body(0, 1) on the
// calling thread when `total_work` is too small), for work split in more than one way.
template <class Body>
void parallel_members(int64_t total_work, Body body) {
    WorkerTeam& team = WorkerTeam::shared();
    if (members_for(total_work) == 1) {
        body(0, 1);
        return;
    }
    team.run([](void* raw, int member, int count) { (*static_cast<Body*>(raw))(member, count); }, &body);
}

}  // namespace trainbench
