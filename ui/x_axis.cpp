#include "x_axis.hpp"

namespace trainbench::ui {

QString x_axis_label(XAxisKind kind) {
    switch (kind) {
        case XAxisKind::samples_seen: return QStringLiteral("training samples seen");
        case XAxisKind::wall_time: return QStringLiteral("wall time (s)");
        case XAxisKind::update: break;
    }
    return QStringLiteral("optimizer update");
}

}  // namespace trainbench::ui
