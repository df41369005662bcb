#include "metrics_csv_writer.hpp"

#include <cinttypes>
#include <cmath>

namespace trainbench::cli {

const char* metrics_csv_header() {
    return "update,epoch,samples_seen,wall_seconds,loss,learning_rate,grad_norm,update_ms,"
           "samples_per_second,batch_samples,loss_scale,skipped,mem_parameters,mem_gradients,"
           "mem_optimizer_state,mem_master_weights,mem_activations,mem_workspace,mem_cache,"
           "mem_total,mem_peak_total,rss_bytes,device_used_bytes,val_loss,val_accuracy,tokens_per_second,mfu,"
           // Added later, so at the end: each category's peak during the update, and the
           // most live bytes at once during it (torch.cuda.max_memory_allocated after
           // reset_peak_memory_stats at the update's start).
           "mem_update_peak_parameters,mem_update_peak_gradients,mem_update_peak_optimizer_state,"
           "mem_update_peak_master_weights,mem_update_peak_activations,mem_update_peak_workspace,"
           "mem_update_peak_cache,mem_update_peak_live,"
           // Several processes: the update's time in collectives.
           "comm_ms";
}

MetricsCsvWriter::MetricsCsvWriter(const std::string& path) : file_(path) {
    std::fprintf(file_.stream(), "%s\n", metrics_csv_header());
}

void MetricsCsvWriter::add_update(const StepMetrics& metrics) {
    if (pending_) write_pending(nullptr);
    pending_ = metrics;
}

void MetricsCsvWriter::add_epoch_end(const EpochMetrics& epoch) {
    if (pending_ && pending_->update == epoch.update) write_pending(&epoch);
}

void MetricsCsvWriter::commit() {
    if (pending_) write_pending(nullptr);
    file_.commit();
}

namespace {

// The order of the per-category memory columns (mem_<category>, mem_update_peak_<category>).
constexpr MemoryCategory kCategoryColumns[] = {
    MemoryCategory::parameters,  MemoryCategory::gradients,  MemoryCategory::optimizer_state,
    MemoryCategory::master_weights, MemoryCategory::activations, MemoryCategory::workspace,
    MemoryCategory::cache};

// Empty for NaN: the figure does not exist for this row (no validation, regression accuracy).
void write_optional(std::FILE* out, double value) {
    if (std::isnan(value)) std::fputc(',', out);
    else std::fprintf(out, ",%.9g", value);
}

}  // namespace

void MetricsCsvWriter::write_pending(const EpochMetrics* epoch) {
    const StepMetrics& m = *pending_;
    std::FILE* out = file_.stream();
    std::fprintf(out, "%" PRId64 ",%" PRId64 ",%" PRId64 ",%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%" PRId64
                      ",%.9g,%d",
                 m.update, m.epoch, m.samples_seen, m.wall_seconds, m.loss, m.learning_rate,
                 m.grad_norm, m.update_ms, m.samples_per_second, m.batch_samples, m.loss_scale,
                 m.skipped ? 1 : 0);
    for (MemoryCategory category : kCategoryColumns) std::fprintf(out, ",%" PRId64, m.memory.bytes(category));
    std::fprintf(out, ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64, m.memory.reserved,
                 m.memory.reserved_peak, m.rss_bytes, m.device_used_bytes);
    const double nan = std::nan("");
    write_optional(out, epoch ? epoch->val_loss : nan);
    write_optional(out, epoch ? epoch->val_accuracy : nan);
    write_optional(out, m.tokens_per_second > 0.0 ? m.tokens_per_second : nan);  // language models only
    write_optional(out, m.mfu);
    for (MemoryCategory category : kCategoryColumns)
        std::fprintf(out, ",%" PRId64, m.memory.update_peak_bytes(category));
    std::fprintf(out, ",%" PRId64 ",%.9g\n", m.memory.update_live_peak, m.comm_ms);
    pending_.reset();
    ++rows_written_;
}

}  // namespace trainbench::cli
