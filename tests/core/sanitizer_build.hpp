#pragma once
// TRAINBENCH_SANITIZED_BUILD is 1 when this translation unit is compiled with AddressSanitizer
// or ThreadSanitizer (scripts/sanitize.sh asan / tsan): GCC says so with __SANITIZE_*__,
// clang with __has_feature. Tests that cannot hold there skip, saying why.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TRAINBENCH_SANITIZED_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define TRAINBENCH_SANITIZED_BUILD 1
#endif
#endif
#ifndef TRAINBENCH_SANITIZED_BUILD
#define TRAINBENCH_SANITIZED_BUILD 0
#endif
