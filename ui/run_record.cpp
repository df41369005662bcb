#include "run_record.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace trainbench::ui {

QString to_display_string(RunState state) {
    switch (state) {
        case RunState::running: return QStringLiteral("running");
        case RunState::completed: return QStringLiteral("done");
        case RunState::stopped: return QStringLiteral("stopped");
        case RunState::failed: return QStringLiteral("failed");
    }
    return {};
}

double RunRecord::final_loss() const {
    return steps.empty() ? std::numeric_limits<double>::quiet_NaN() : steps.back().loss;
}

double RunRecord::final_val_accuracy() const {
    return epochs.empty() ? std::numeric_limits<double>::quiet_NaN() : epochs.back().val_accuracy;
}

double RunRecord::final_val_loss() const {
    return epochs.empty() ? std::numeric_limits<double>::quiet_NaN() : epochs.back().val_loss;
}

double RunRecord::val_loss_at(int64_t update) const {
    for (auto it = epochs.rbegin(); it != epochs.rend(); ++it) {
        if (it->update == update) return it->val_loss;
        if (it->update < update) break;
    }
    return std::numeric_limits<double>::quiet_NaN();
}

QString decode_sample_text(std::string_view bytes) {
    QString text = QString::fromUtf8(bytes.data(), static_cast<qsizetype>(bytes.size()));
    QString out;
    out.reserve(text.size());
    for (qsizetype i = 0; i < text.size(); ++i) {
        const QChar c = text[i];
        if (c == QLatin1Char('\r') && i + 1 < text.size() && text[i + 1] == QLatin1Char('\n')) continue;
        if (c == QLatin1Char('\n') || c == QLatin1Char('\t') || c.unicode() >= 0x20) {
            out += c.unicode() == 0x7F ? QChar(0x2421) : c;
        } else {
            out += QChar(0x2400 + c.unicode());
        }
    }
    return out;
}

int64_t RunRecord::peak_memory_bytes() const {
    return steps.empty() ? 0 : steps.back().memory.reserved_peak;
}

double RunRecord::elapsed_seconds() const {
    if (state != RunState::running && seconds > 0.0) return seconds;
    return steps.empty() ? 0.0 : steps.back().wall_seconds;
}

QString hidden_layers_text(const std::vector<int64_t>& hidden) {
    QStringList parts;
    for (auto width : hidden) parts << QString::number(width);
    return parts.join(',');
}

QString key_settings_text(const RunConfig& config) {
    const auto micro = largest_micro_batch(config.batch_size, std::max<int64_t>(1, config.step_size),
                                           std::max<int64_t>(1, data_parallel_processes(config)));
    const QString model = config.model == ModelFamily::gpt
                              ? QStringLiteral("GPT L%1 H%2 C%3 T%4")
                                    .arg(config.n_layer)
                                    .arg(config.n_head)
                                    .arg(config.n_embd)
                                    .arg(config.block_size)
                          : config.model == ModelFamily::cnn
                              ? QStringLiteral("CNN c%1 %2 %3")
                                    .arg(hidden_layers_text(config.channels).replace(QLatin1Char(','), QStringLiteral("-c")),
                                         hidden_layers_text(config.hidden),
                                         QString::fromStdString(to_string(config.activation)))
                              : QStringLiteral("%1 %2").arg(hidden_layers_text(config.hidden),
                                                            QString::fromStdString(to_string(config.activation)));
    QString processes = data_parallel_processes(config) > 1 ? QStringLiteral("×%1 processes").arg(data_parallel_processes(config)) : QString();
    if (config.pipeline_stages > 1) processes += QStringLiteral(" over %1 pipeline stages").arg(config.pipeline_stages);
    return QStringLiteral("batch %1 = %2×%3%4 · %5 · %6 %7 · %8 · %9")
        .arg(config.batch_size)
        .arg(micro)
        .arg(config.step_size)
        .arg(processes)
        .arg(QString::fromStdString(to_string(config.precision)))
        .arg(QString::fromStdString(to_string(config.optimizer.kind)))
        .arg(QString::number(config.optimizer.resolved_lr(), 'g', 3))
        .arg(model)
        .arg(QString::fromStdString(config.dataset));
}

QString format_duration(double seconds) {
    if (!std::isfinite(seconds) || seconds < 0) return QStringLiteral("–");
    if (seconds < 10) return QString::number(seconds, 'f', 2) + QStringLiteral(" s");
    if (seconds < 60) return QString::number(seconds, 'f', 1) + QStringLiteral(" s");
    const auto total = static_cast<long long>(std::llround(seconds));
    if (total < 3600) return QStringLiteral("%1m %2s").arg(total / 60).arg(total % 60, 2, 10, QChar('0'));
    return QStringLiteral("%1h %2m").arg(total / 3600).arg((total % 3600) / 60, 2, 10, QChar('0'));
}

}  // namespace trainbench::ui
