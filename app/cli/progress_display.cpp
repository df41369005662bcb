#include "progress_display.hpp"

#include <algorithm>
#include <cinttypes>
#include <cmath>

#include "trainbench/memory.hpp"
#include "trainbench/run_config.hpp"

namespace trainbench::cli {

namespace {
constexpr auto kRedrawInterval = std::chrono::milliseconds(100);
constexpr int kBarWidth = 24;
constexpr int kPlainLinesPerRun = 10;
}  // namespace

std::string format_duration(double seconds) {
    if (!std::isfinite(seconds) || seconds < 0) return "?";
    auto total = static_cast<int64_t>(std::llround(seconds));
    char buffer[32];
    if (total < 60) std::snprintf(buffer, sizeof buffer, "%" PRId64 "s", total);
    else if (total < 3600)
        std::snprintf(buffer, sizeof buffer, "%" PRId64 ":%02" PRId64, total / 60, total % 60);
    else
        std::snprintf(buffer, sizeof buffer, "%" PRId64 ":%02" PRId64 ":%02" PRId64, total / 3600,
                      total / 60 % 60, total % 60);
    return buffer;
}

namespace {
// "  MFU 23.4%", or nothing when the device's peak is unknown.
std::string mfu_text(const StepMetrics& metrics) {
    if (!std::isfinite(metrics.mfu)) return {};
    char text[32];
    std::snprintf(text, sizeof text, "  MFU %.1f%%", 100.0 * metrics.mfu);
    return text;
}
}  // namespace

ProgressDisplay::ProgressDisplay(std::FILE* out, bool terminal, bool quiet)
    : out_(out), terminal_(terminal), quiet_(quiet) {}

void ProgressDisplay::start(const RunPlan& plan) {
    total_updates_ = plan.total_updates;
    updates_per_epoch_ = plan.updates_per_epoch;
    line_every_ = std::max<int64_t>(1, total_updates_ / kPlainLinesPerRun);
    if (quiet_) return;
    // A language model's sample is a window of tokens: say how many tokens an update sees.
    std::string tokens;
    if (plan.tokens_per_sample > 0)
        tokens = " (" + std::to_string(plan.global_batch * plan.tokens_per_sample) + " tokens)";
    // Several processes: the third factor of the global batch, and how the cores are shared.
    std::string processes;
    if (plan.pipeline_stages > 1) {
        // The batch's third factor is the pipeline's data-parallel copies; every copy runs the stages.
        if (plan.processes > 1) processes = " x " + std::to_string(plan.processes) + " data-parallel copies";
        processes += ", over " + std::to_string(plan.pipeline_stages) + " pipeline stages (" + plan.pipeline_schedule + "; " +
                     std::to_string(plan.processes * plan.pipeline_stages) + " processes, " + std::to_string(plan.threads) +
                     (plan.threads == 1 ? " thread" : " threads") + " each";
        if (plan.zero > 0) processes += ", ZeRO-" + std::to_string(plan.zero) + " within each stage's copies";
        processes += ")";
    } else if (plan.processes > 1) {
        processes = " x processes " + std::to_string(plan.processes) + " (" + std::to_string(plan.threads) +
                    (plan.threads == 1 ? " thread" : " threads") + " each";
        if (plan.zero > 0) processes += ", ZeRO-" + std::to_string(plan.zero);
        processes += ")";
    }
    std::string parameters = std::to_string(plan.parameter_count) + " parameters";
    if (plan.trainable_parameter_count < plan.parameter_count)
        parameters += ", " + std::to_string(plan.trainable_parameter_count) + " of them trainable";
    parameters += nf4_parameters_note(plan);
    std::fprintf(out_,
                 "plan: %s (%s), %" PRId64 " training %s, global batch %" PRId64
                 "%s = micro-batch %" PRId64 " x step_size %" PRId64 "%s, %" PRId64 " updates/epoch, %" PRId64
                 " updates\n",
                 plan.model_summary.c_str(), parameters.c_str(), plan.train_samples,
                 plan.tokens_per_sample > 0 ? "windows" : "samples", plan.global_batch, tokens.c_str(), plan.micro_batch,
                 plan.step_size, processes.c_str(), plan.updates_per_epoch, plan.total_updates);
    // What the engine will allocate at the peak of an update, before it allocates it: the
    // figure a user sizes --memory-limit and --step-size by.
    std::string categories;
    for (int c = 0; c < kMemoryCategoryCount; ++c) {
        if (plan.planned_bytes[c] == 0) continue;
        categories += (categories.empty() ? "" : ", ") + std::string(to_string(MemoryCategory(c))) + " " +
                      format_bytes(plan.planned_bytes[c]);
    }
    std::fprintf(out_, "memory plan%s: %s (%s)\n",
                 plan.pipeline_stages > 1 ? " of process 0 (stage 1)" : plan.processes > 1 ? " per process" : "",
                 format_bytes(plan.planned_total()).c_str(), categories.c_str());
    if (const std::string note = checkpointing_note(plan); !note.empty()) std::fprintf(out_, "%s\n", note.c_str());
    if (const std::string note = recomputed_attention_note(plan); !note.empty()) std::fprintf(out_, "%s\n", note.c_str());
    if (!plan.products.empty()) std::fprintf(out_, "matrix products: %s\n", plan.products.c_str());
    if (plan.fused_traffic_bytes > 0)
        std::fprintf(out_, "memory traffic per update: %s with fused kernels (--fused on), %s one op at a time (--fused off)\n",
                     format_bytes(plan.fused_traffic_bytes).c_str(), format_bytes(plan.eager_traffic_bytes).c_str());
    if (plan.peak_flops > 0.0)
        std::fprintf(out_, "MFU: %.3g GFLOP per sample (forward + backward) against the peak of %s\n",
                     plan.flops_per_sample / 1e9, plan.peak_source.c_str());
    std::fflush(out_);
}

double ProgressDisplay::eta_seconds(const StepMetrics& metrics) const {
    if (metrics.update <= 0 || total_updates_ <= 0) return NAN;
    double per_update = metrics.wall_seconds / static_cast<double>(metrics.update);
    return per_update * static_cast<double>(std::max<int64_t>(0, total_updates_ - metrics.update));
}

void ProgressDisplay::update(const StepMetrics& metrics) {
    if (quiet_) return;
    if (terminal_) {
        auto now = std::chrono::steady_clock::now();
        bool last = metrics.update >= total_updates_;
        if (bar_shown_ && !last && now - last_draw_ < kRedrawInterval) return;
        last_draw_ = now;
        draw_bar(metrics);
    } else if (metrics.update % line_every_ == 0 || metrics.update == 1) {
        print_line(metrics);
    }
}

void ProgressDisplay::draw_bar(const StepMetrics& metrics) {
    // samples/s over the interval since the last redraw: steadier than one update's figure.
    double elapsed = metrics.wall_seconds - wall_at_last_draw_;
    if (elapsed > 0.0)
        shown_rate_ = static_cast<double>(metrics.samples_seen - samples_at_last_draw_) / elapsed;
    samples_at_last_draw_ = metrics.samples_seen;
    wall_at_last_draw_ = metrics.wall_seconds;

    double fraction = total_updates_ > 0 ? static_cast<double>(metrics.update) / total_updates_ : 0.0;
    int filled = static_cast<int>(std::clamp(fraction, 0.0, 1.0) * kBarWidth);
    char bar[kBarWidth + 1];
    for (int i = 0; i < kBarWidth; ++i) bar[i] = i < filled ? '#' : '.';
    bar[kBarWidth] = '\0';
    // A language model's throughput reads in tokens (samples x context length).
    const double per_sample = metrics.samples_per_second > 0.0 ? metrics.tokens_per_second / metrics.samples_per_second : 0.0;
    const bool tokens = per_sample > 0.0;
    std::fprintf(out_, "\r[%s] %" PRId64 "/%" PRId64 " epoch %" PRId64 "  loss %.4f  %.0f %s/s%s  ETA %s\033[K",
                 bar, metrics.update, total_updates_, metrics.epoch, metrics.loss,
                 tokens ? shown_rate_ * per_sample : shown_rate_, tokens ? "tokens" : "samples", mfu_text(metrics).c_str(),
                 format_duration(eta_seconds(metrics)).c_str());
    std::fflush(out_);
    bar_shown_ = true;
}

void ProgressDisplay::print_line(const StepMetrics& metrics) {
    std::fprintf(out_,
                 "update %" PRId64 "/%" PRId64 "  epoch %" PRId64 "  loss %.6g  lr %.3g  %.0f %s/s%s  "
                 "elapsed %s  ETA %s\n",
                 metrics.update, total_updates_, metrics.epoch, metrics.loss, metrics.learning_rate,
                 metrics.tokens_per_second > 0.0 ? metrics.tokens_per_second : metrics.samples_per_second,
                 metrics.tokens_per_second > 0.0 ? "tokens" : "samples", mfu_text(metrics).c_str(),
                 format_duration(metrics.wall_seconds).c_str(),
                 format_duration(eta_seconds(metrics)).c_str());
    std::fflush(out_);
}

void ProgressDisplay::clear_bar() {
    if (!bar_shown_) return;
    std::fputs("\r\033[K", out_);
    bar_shown_ = false;
}

void ProgressDisplay::epoch_end(const EpochMetrics& epoch) {
    if (quiet_) return;
    clear_bar();
    // A run cut short by --max-steps or Ctrl-C validates mid-epoch; the update says where.
    // --eval-every evaluations within an epoch read "eval" and the epoch's loss so far.
    std::fprintf(out_, "%s %" PRId64 " (update %" PRId64 "): train loss %.6g",
                 epoch.epoch_ended ? "epoch" : "eval, epoch", epoch.epoch, epoch.update, epoch.train_loss);
    if (!std::isnan(epoch.val_loss)) std::fprintf(out_, "  val loss %.6g", epoch.val_loss);
    if (!std::isnan(epoch.val_accuracy)) std::fprintf(out_, "  val accuracy %.2f%%", 100.0 * epoch.val_accuracy);
    std::fprintf(out_, "  (elapsed %s)\n", format_duration(epoch.wall_seconds).c_str());
    std::fflush(out_);
}

void ProgressDisplay::sample(int64_t update, const std::string& text) {
    if (quiet_) return;
    clear_bar();
    std::fprintf(out_, "sample after update %" PRId64 ":\n  ", update);
    // The prompt is a newline: the text starts on the line below the heading.
    const size_t start = !text.empty() && text.front() == '\n' ? 1 : 0;
    for (size_t i = start; i < text.size(); ++i) {
        std::fputc(text[i], out_);
        if (text[i] == '\n' && i + 1 < text.size()) std::fputs("  ", out_);
    }
    std::fputc('\n', out_);
    std::fflush(out_);
}

void ProgressDisplay::note(const std::string& text) {
    if (quiet_) return;
    clear_bar();
    std::fprintf(out_, "note: %s\n", text.c_str());
    std::fflush(out_);
}

void ProgressDisplay::finish() {
    if (terminal_ && bar_shown_) {
        std::fputc('\n', out_);
        bar_shown_ = false;
    }
    std::fflush(out_);
}

}  // namespace trainbench::cli
