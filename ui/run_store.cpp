#include "run_store.hpp"

#include <algorithm>

#include "run_palette.hpp"

namespace trainbench::ui {

RunStore::RunStore(QObject* parent) : QObject(parent) {}

int RunStore::nextColorIndex() const {
    for (int index = 0; index < kRunPaletteSize; ++index) {
        const QColor candidate = run_palette_color(index);
        const bool taken = std::any_of(runs_.begin(), runs_.end(),
                                       [&](const auto& run) { return run->color == candidate; });
        if (!taken) return index;
    }
    return next_id_ - 1;
}

namespace {
// Room for every update a run will make, so that appending never moves the whole history: at
// each doubling the vector copied all its steps (432 bytes each) inside one drain, a GUI stall
// of ~100 ms at 65,536 updates and growing with the run (tests/ui/test_plot_scale). Pages are
// only touched as steps arrive; capped so a huge run reserves no more than a million updates'
// worth of address space.
void reserve_steps(RunRecord& run, int64_t updates) {
    constexpr int64_t kMostStepsReserved = 1'000'000;
    if (updates > 0) run.steps.reserve(static_cast<size_t>(std::min(updates, kMostStepsReserved)));
}
}  // namespace

RunRecord& RunStore::addRun(const RunConfig& config) {
    auto run = std::make_unique<RunRecord>();
    run->config = config;
    if (config.max_steps > 0) reserve_steps(*run, config.max_steps);
    run->name = QStringLiteral("Run %1").arg(next_id_);
    return adoptRun(std::move(run));
}

RunRecord& RunStore::adoptRun(std::unique_ptr<RunRecord> run) {
    run->id = next_id_++;
    if (run->name.isEmpty()) run->name = QStringLiteral("Run %1").arg(run->id);
    if (!run->color.isValid()) run->color = run_palette_color(nextColorIndex());
    runs_.push_back(std::move(run));
    RunRecord& added = *runs_.back();
    emit runAdded(added.id);
    if (!added.steps.empty() || !added.epochs.empty()) emit metricsAppended(added.id, 0, 0);
    if (!added.samples.empty()) emit samplesAppended(added.id, 0);
    return added;
}

RunRecord* RunStore::find(int id) {
    for (auto& run : runs_)
        if (run->id == id) return run.get();
    return nullptr;
}

const RunRecord* RunStore::find(int id) const {
    for (const auto& run : runs_)
        if (run->id == id) return run.get();
    return nullptr;
}

void RunStore::setPlan(int id, const RunPlan& plan) {
    if (auto* run = find(id)) {
        run->plan = plan;
        reserve_steps(*run, plan.total_updates);  // a run bounded by epochs: known from here
        emit runChanged(id);
    }
}

void RunStore::appendMetrics(int id, const std::vector<StepMetrics>& steps,
                             const std::vector<EpochMetrics>& epochs, const QStringList& notes) {
    auto* run = find(id);
    if (!run || (steps.empty() && epochs.empty() && notes.isEmpty())) return;
    const auto first_step = static_cast<qsizetype>(run->steps.size());
    const auto first_epoch = static_cast<qsizetype>(run->epochs.size());
    run->steps.insert(run->steps.end(), steps.begin(), steps.end());
    for (auto step = run->steps.begin() + first_step; step != run->steps.end(); ++step) {
        if (step->pipeline_stages.empty()) continue;
        run->last_pipeline = std::move(step->pipeline_stages);
        run->last_pipeline_update = step->update;
        step->pipeline_stages = {};
    }
    run->epochs.insert(run->epochs.end(), epochs.begin(), epochs.end());
    run->notes += notes;
    if (!steps.empty() || !epochs.empty()) emit metricsAppended(id, first_step, first_epoch);
    emit runChanged(id);
}

void RunStore::appendSamples(int id, std::vector<TextSample> samples) {
    auto* run = find(id);
    if (!run || samples.empty()) return;
    const auto first = static_cast<qsizetype>(run->samples.size());
    run->samples.insert(run->samples.end(), std::make_move_iterator(samples.begin()),
                        std::make_move_iterator(samples.end()));
    emit samplesAppended(id, first);
}

void RunStore::finishRun(int id, RunState state, const QString& message, double seconds,
                         ModelWeights weights) {
    if (auto* run = find(id)) {
        run->state = state;
        run->message = message;
        run->seconds = seconds;
        run->weights = std::move(weights);
        emit runChanged(id);
    }
}

void RunStore::rename(int id, const QString& name) {
    auto* run = find(id);
    if (!run || name.trimmed().isEmpty() || run->name == name) return;
    run->name = name.trimmed();
    emit runChanged(id);
}

void RunStore::setVisible(int id, bool visible) {
    auto* run = find(id);
    if (!run || run->visible == visible) return;
    run->visible = visible;
    emit visibilityChanged(id, visible);
}

void RunStore::remove(int id) {
    auto it = std::find_if(runs_.begin(), runs_.end(), [&](const auto& run) { return run->id == id; });
    if (it == runs_.end()) return;
    runs_.erase(it);
    emit runRemoved(id);
}

void RunStore::clear() {
    while (!runs_.empty()) remove(runs_.front()->id);
}

}  // namespace trainbench::ui
