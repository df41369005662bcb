#pragma once
// Interposes the C allocator for one test executable and counts the calls made while
// `counting` is set: how the tests prove that a training step (or a kernel) allocates nothing.
// Include it from exactly one source file of an executable.
#include <atomic>
#include <cstdlib>

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
}

namespace {
std::atomic<bool> counting{false};
std::atomic<long> allocations{0};
void count() {
    if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

extern "C" {
void* malloc(size_t n) {
    count();
    return __libc_malloc(n);
}
void* calloc(size_t n, size_t m) {
    count();
    return __libc_calloc(n, m);
}
void* realloc(void* p, size_t n) {
    count();
    return __libc_realloc(p, n);
}
void* aligned_alloc(size_t alignment, size_t n) {
    count();
    return __libc_memalign(alignment, n);
}
int posix_memalign(void** out, size_t alignment, size_t n) {
    count();
    *out = __libc_memalign(alignment, n);
    return *out ? 0 : 12;
}
void* memalign(size_t alignment, size_t n) {
    count();
    return __libc_memalign(alignment, n);
}
}
