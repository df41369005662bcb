#include "run_status_bar.hpp"

#include <QLabel>
#include <QLocale>
#include <QProgressBar>
#include <algorithm>
#include <cmath>
#include <limits>

#include "run_record.hpp"
#include "run_throughput.hpp"

namespace trainbench::ui {
namespace {

constexpr std::size_t kRecentUpdates = 50;

QLabel* make_field(const QString& tooltip, int minimum_width) {
    auto* label = new QLabel;
    label->setToolTip(tooltip);
    label->setMinimumWidth(minimum_width);
    return label;
}

}  // namespace

RunStatusBar::RunStatusBar(QWidget* parent) : QStatusBar(parent) {
    setObjectName(QStringLiteral("runStatusBar"));
    state_ = make_field(tr("The run being watched"), 160);
    progress_ = new QProgressBar;
    progress_->setObjectName(QStringLiteral("runProgress"));
    progress_->setMaximumWidth(220);
    progress_->setMaximumHeight(16);
    progress_->setTextVisible(true);
    progress_->setFormat(QStringLiteral("%p%"));
    eta_ = make_field(tr("Estimated time left, from the measured time of recent updates"), 110);
    throughput_ = make_field(tr("Training samples per second over recent updates"), 120);
    loss_ = make_field(tr("Training loss of the last update"), 100);
    memory_ = make_field(tr("Memory the engine's allocator holds (live + cached) and the process's resident memory"), 190);
    addWidget(state_);
    addPermanentWidget(progress_);
    addPermanentWidget(eta_);
    addPermanentWidget(throughput_);
    addPermanentWidget(loss_);
    addPermanentWidget(memory_);
    showIdle(tr("Ready"));
}

double RunStatusBar::estimatedSecondsLeft(const RunRecord& run) {
    if (!run.plan || run.steps.empty() || run.plan->total_updates <= 0) return std::numeric_limits<double>::quiet_NaN();
    const std::size_t recent = std::min(kRecentUpdates, run.steps.size());
    double total_ms = 0.0;
    for (std::size_t i = run.steps.size() - recent; i < run.steps.size(); ++i) total_ms += run.steps[i].update_ms;
    const double left = static_cast<double>(std::max<int64_t>(0, run.plan->total_updates - run.steps.back().update));
    return left * total_ms / static_cast<double>(recent) / 1000.0;
}

void RunStatusBar::showRun(const RunRecord& run) {
    const QLocale locale;
    state_->setText(QStringLiteral("%1: %2").arg(run.name, to_display_string(run.state)));
    progress_->show();
    const int64_t done = run.steps.empty() ? 0 : run.steps.back().update;
    const int64_t total = run.plan ? run.plan->total_updates : 0;
    progress_->setRange(0, static_cast<int>(std::max<int64_t>(total, 1)));
    progress_->setValue(static_cast<int>(std::min(done, std::max<int64_t>(total, 1))));
    progress_->setFormat(total > 0 ? QStringLiteral("%1 / %2 updates").arg(locale.toString(done), locale.toString(total))
                                   : QStringLiteral("%1 updates").arg(locale.toString(done)));
    const double left = estimatedSecondsLeft(run);
    eta_->setText(run.state == RunState::running && std::isfinite(left) ? tr("ETA %1").arg(format_duration(left))
                                                                      : tr("took %1").arg(format_duration(run.elapsed_seconds())));
    if (run.steps.empty()) {
        throughput_->clear();
        loss_->clear();
        memory_->clear();
        return;
    }
    const std::size_t recent = std::min(kRecentUpdates, run.steps.size());
    double samples = 0.0, ms = 0.0;
    for (std::size_t i = run.steps.size() - recent; i < run.steps.size(); ++i) {
        samples += static_cast<double>(run.steps[i].batch_samples);
        ms += run.steps[i].update_ms;
    }
    const double per_second = ms > 0 ? samples / ms * 1000.0 : 0.0;
    // A language model's throughput is counted in tokens, as nanoGPT and llm.c report it.
    if (const int64_t tokens = run_tokens_per_sample(run); tokens > 0)
        throughput_->setText(tr("%1 tokens/s").arg(locale.toString(per_second * static_cast<double>(tokens), 'f', 0)));
    else
        throughput_->setText(tr("%1 samples/s").arg(locale.toString(per_second, 'f', 0)));
    loss_->setText(tr("loss %1").arg(QString::number(run.steps.back().loss, 'g', 4)));
    const auto& last = run.steps.back();
    memory_->setText(tr("engine %1 · RSS %2")
                         .arg(QString::fromStdString(format_bytes(last.memory.reserved)),
                              QString::fromStdString(format_bytes(last.rss_bytes))));
}

void RunStatusBar::showIdle(const QString& text) {
    state_->setText(text);
    progress_->setRange(0, 1);
    progress_->setValue(0);
    progress_->setFormat(QString());
    progress_->hide();
    for (auto* label : {eta_, throughput_, loss_, memory_}) label->clear();
}

}  // namespace trainbench::ui
