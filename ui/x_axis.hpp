#pragma once
#include <QString>

#include "trainbench/metrics.hpp"

namespace trainbench::ui {

// What the horizontal axis of every plot measures; all three grow monotonically within a run,
// which lets the hover read-out binary-search a run's updates.
enum class XAxisKind { update, samples_seen, wall_time };

inline double x_value(const StepMetrics& step, XAxisKind kind) {
    switch (kind) {
        case XAxisKind::samples_seen: return static_cast<double>(step.samples_seen);
        case XAxisKind::wall_time: return step.wall_seconds;
        case XAxisKind::update: break;
    }
    return static_cast<double>(step.update);
}

QString x_axis_label(XAxisKind kind);

}  // namespace trainbench::ui
