#include "x_axis.hpp"

#include "run_throughput.hpp"

namespace trainbench::ui {

RunX run_x(const RunRecord& run, XAxisKind kind) { return {kind, run_tokens_per_sample(run)}; }

QString x_axis_label(XAxisKind kind, bool languageModels, bool otherModels) {
    switch (kind) {
        case XAxisKind::samples_seen:
            if (languageModels && otherModels)
                return QStringLiteral("training samples seen (tokens for language models)");
            return languageModels ? QStringLiteral("training tokens seen") : QStringLiteral("training samples seen");
        case XAxisKind::wall_time: return QStringLiteral("wall time (s)");
        case XAxisKind::update: break;
    }
    return QStringLiteral("optimizer update");
}

}  // namespace trainbench::ui
