#pragma once
// The memory plan is what the engine allocated: after an update, the allocator's peak in every
// category but the cache equals the plan's figure. A macro, so that a failing QCOMPARE ends the
// test function that uses it:
//   CHECK_PEAK_EQUALS_PLAN(*engine, plan_cpu_engine_memory(spec));
#include <QtTest>

#include "backend/compute_engine.hpp"

#define CHECK_PEAK_EQUALS_PLAN(engine, planned)                                                \
    do {                                                                                       \
        const trainbench::BytesByCategory planned_bytes_ = (planned);                         \
        const trainbench::MemoryReport report_ = (engine).memory();                            \
        for (int c_ = 0; c_ < trainbench::kMemoryCategoryCount; ++c_) {                        \
            if (c_ == static_cast<int>(trainbench::MemoryCategory::cache)) continue;           \
            QCOMPARE(report_.peak[static_cast<size_t>(c_)], planned_bytes_[static_cast<size_t>(c_)]); \
        }                                                                                      \
    } while (0)
