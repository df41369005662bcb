#include "run_throughput.hpp"

#include <cmath>

#include "run_record.hpp"

namespace trainbench::ui {

int64_t run_tokens_per_sample(const RunRecord& run) {
    if (run.plan && run.plan->tokens_per_sample > 0) return run.plan->tokens_per_sample;
    return run.config.model == ModelFamily::gpt ? run.config.block_size : 0;
}

QString peak_source_text(const RunRecord& run) {
    return run.plan ? QString::fromStdString(run.plan->peak_source) : QString();
}

QString mfu_text(double mfu) {
    if (!std::isfinite(mfu)) return {};
    const double percent = mfu * 100.0;
    return QString::number(percent, 'f', std::abs(percent) < 1.0 ? 2 : 1) + QLatin1Char('%');
}

}  // namespace trainbench::ui
