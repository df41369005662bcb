#pragma once
// Interposes the C allocator for one test executable and counts the calls made while
// `counting` is set: how the tests prove that a training step (or a kernel) allocates nothing.
// Include it from exactly one source file of an executable.
//
// Calls made inside oneDNN's execution of a product (nn/onednn_matmul.hpp) are counted apart,
// in allocations_inside_onednn and frees_inside_onednn: its dnnl_primitive_execute builds an
// argument map and a scratchpad grantor on the heap and frees them before it returns, which
// nothing in its public API avoids. The engine's own code must still allocate nothing.
//
// Under AddressSanitizer or ThreadSanitizer the sanitizer's runtime owns malloc and free: an
// interposed malloc that returns glibc's blocks makes the runtime's free crash. There the
// allocator is left alone, TRAINBENCH_COUNTS_ALLOCATIONS is 0 and each counting test calls
// SKIP_WITHOUT_ALLOCATION_COUNTER() first, which skips it with the reason printed.
#include <atomic>
#include <cstdlib>

#include "core/sanitizer_build.hpp"
#include "nn/onednn_matmul.hpp"

#if TRAINBENCH_SANITIZED_BUILD
#define TRAINBENCH_COUNTS_ALLOCATIONS 0
#define SKIP_WITHOUT_ALLOCATION_COUNTER()                                                            \
    QSKIP("built with a sanitizer, which owns malloc: allocations cannot be counted by "           \
          "interposing it (run this test in a build without sanitizers)")
#else
#define TRAINBENCH_COUNTS_ALLOCATIONS 1
#define SKIP_WITHOUT_ALLOCATION_COUNTER() static_cast<void>(0)
#endif

namespace {
std::atomic<bool> counting{false};
std::atomic<long> allocations{0};
std::atomic<long> allocations_inside_onednn{0};
std::atomic<long> frees_inside_onednn{0};
}  // namespace

#if TRAINBENCH_COUNTS_ALLOCATIONS
extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void __libc_free(void*);
}

namespace {
void count() {
    if (!counting.load(std::memory_order_relaxed)) return;
    if (trainbench::inside_onednn_call()) allocations_inside_onednn.fetch_add(1, std::memory_order_relaxed);
    else allocations.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

extern "C" {
void free(void* p) {
    if (p && counting.load(std::memory_order_relaxed) && trainbench::inside_onednn_call())
        frees_inside_onednn.fetch_add(1, std::memory_order_relaxed);
    __libc_free(p);
}
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
#endif  // TRAINBENCH_COUNTS_ALLOCATIONS
