#pragma once
// Splits [0, n) across the members of the shared WorkerTeam, or runs it on the calling thread
// when the work is too small to pay for waking the team.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <utility>

#include "parallel/worker_team.hpp"

namespace trainbench {

// About 50 microseconds of single-core work (in multiply-adds or element updates).
inline constexpr int64_t kMinParallelWork = int64_t{1} << 19;
// Teams up to this size balance parallel_range (one cursor each); larger ones split it evenly.
inline constexpr int kMaxBalancedMembers = 64;

// Work too small to pay for waking the team, or too few items to share, runs on the caller.
inline bool runs_on_caller(int64_t n, int64_t work_per_item, int members) {
    return members <= 1 || n < members || n * work_per_item < kMinParallelWork;
}

namespace detail {
// Runs body(member, first, end) once per member of the team on a contiguous 1/members of [0, n).
template <class Body>
void even_slices(WorkerTeam& team, int64_t n, Body& body) {
    struct Context {
        Body* body;
        int64_t n;
    } context{&body, n};
    team.run(
        [](void* raw, int member, int count) {
            auto* c = static_cast<Context*>(raw);
            (*c->body)(member, c->n * member / count, c->n * (member + 1) / count);
        },
        &context);
}
}  // namespace detail

// Runs body(first, end) once per member on a contiguous 1/members of [0, n): for bodies whose
// results depend on the slice they get (an Eigen product over a slice of rows blocks it by the
// slice's size), so that the bits depend only on the team's size.
template <class Body>
void parallel_slices(int64_t n, int64_t work_per_item, Body body) {
    WorkerTeam& team = WorkerTeam::shared();
    if (runs_on_caller(n, work_per_item, team.members())) {
        body(int64_t{0}, n);
        return;
    }
    auto slice = [&body](int /*member*/, int64_t first, int64_t end) { body(first, end); };
    detail::even_slices(team, n, slice);
}

namespace detail {
// Runs body(member, first, end) over [0, n) in chunks, balanced across the team's `members`:
// each member's share, a contiguous 1/members of [0, n), is cut into up to kChunksPerMember
// chunks starting at multiples of `align` items, which it runs in order; a member done with its
// own share takes the next chunks of the others' shares. `member` is the one running the chunk.
template <class Body>
void balanced_chunks(WorkerTeam& team, int members, int64_t n, int64_t align, Body& body) {
    constexpr int64_t kChunksPerMember = 8;
    // A cache line each, so that members claim chunks without false sharing. Plain storage used
    // through atomic_ref: only the first `members` cursors are set, not all kMaxBalancedMembers.
    struct alignas(64) Cursor {
        int64_t next;
    };
    struct Context {
        Body* body;
        int64_t n, align, per_member;
        Cursor cursors[kMaxBalancedMembers];
    } context;
    context.body = &body;
    context.n = n;
    context.align = align;
    context.per_member = std::clamp<int64_t>(n / (members * align), 1, kChunksPerMember);
    for (int m = 0; m < members; ++m) context.cursors[m].next = 0;
    team.run(
        [](void* raw, int member, int count) {
            auto* c = static_cast<Context*>(raw);
            const int64_t chunks = c->per_member * count;
            auto bound = [&](int64_t chunk) { return chunk == chunks ? c->n : c->n * chunk / chunks / c->align * c->align; };
            for (int k = 0; k < count; ++k) {  // its own share first, then the next members'
                const int owner = (member + k) % count;
                for (int64_t i; (i = std::atomic_ref<int64_t>(c->cursors[owner].next).fetch_add(1, std::memory_order_relaxed)) < c->per_member;) {
                    const int64_t chunk = owner * c->per_member + i;
                    if (bound(chunk + 1) > bound(chunk)) (*c->body)(member, bound(chunk), bound(chunk + 1));
                }
            }
        },
        &context);
}
}  // namespace detail

// Runs body(first, end) over [0, n) in chunks, balanced across the members: each member's
// share, a contiguous 1/members of [0, n), is cut into up to 8 chunks that it runs in order,
// and a member done with its own share takes the next chunks of the others' shares.
// So a member whose core runs slower (a virtual machine's vCPU the host also serves, a
// hyper-thread whose sibling is busy, an efficiency core) hands work over instead of holding
// every other member up, while on even cores each member keeps the rows it had the op before.
// Every chunk's bounds depend only on n and the team's size, so the body must only compute
// element- or row-wise results (or sums over fixed chunks of its own): a product over a slice
// of rows, whose blocking depends on the slice, goes through parallel_slices.
template <class Body>
void parallel_range(int64_t n, int64_t work_per_item, Body body) {
    WorkerTeam& team = WorkerTeam::shared();
    const int members = team.members();
    // parallel_slices runs small work on the caller as well, and splits it evenly in one piece
    // per member: what a team too large for the cursors gets.
    if (members > kMaxBalancedMembers || runs_on_caller(n, work_per_item, members)) {
        return parallel_slices(n, work_per_item, std::move(body));
    }
    // Chunks start at multiples of 16 items where every member gets that many, so that bodies
    // working in 16-wide tiles or SIMD registers (transpose_columns) run as they do on a
    // member's whole share, not on their edges.
    const int64_t align = n >= members * int64_t{16} ? 16 : 1;
    auto chunk = [&body](int /*member*/, int64_t first, int64_t end) { body(first, end); };
    detail::balanced_chunks(team, members, n, align, chunk);
}

// As parallel_range, for items that each use a scratch of their own while they run (attention's
// batch elements or heads): body(member, first, end), with `member` the one running the chunk,
// below the team's size, and chunks of any number of items. On the caller: body(0, 0, n).
template <class Body>
void parallel_items(int64_t n, int64_t work_per_item, Body body) {
    WorkerTeam& team = WorkerTeam::shared();
    const int members = team.members();
    if (runs_on_caller(n, work_per_item, members)) {
        body(0, int64_t{0}, n);
        return;
    }
    if (members > kMaxBalancedMembers) return detail::even_slices(team, n, body);
    detail::balanced_chunks(team, members, n, 1, body);
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
