#pragma once
#include <QObject>
#include <memory>
#include <vector>

#include "run_record.hpp"

namespace trainbench::ui {

// Owns every run of the session (GUI thread only) and tells the views what changed.
class RunStore : public QObject {
    Q_OBJECT
public:
    explicit RunStore(QObject* parent = nullptr);

    RunRecord& addRun(const RunConfig& config);
    // Adopts a run read back from a session file, keeping its metrics; assigns a fresh id.
    RunRecord& adoptRun(std::unique_ptr<RunRecord> run);
    RunRecord* find(int id);
    const RunRecord* find(int id) const;
    const std::vector<std::unique_ptr<RunRecord>>& runs() const { return runs_; }
    int latestRunId() const { return runs_.empty() ? 0 : runs_.back()->id; }

    void setPlan(int id, const RunPlan& plan);
    void appendMetrics(int id, const std::vector<StepMetrics>& steps,
                       const std::vector<EpochMetrics>& epochs, const QStringList& notes);
    // Adds text samples (oldest first) to run `id`.
    void appendSamples(int id, std::vector<TextSample> samples);
    void finishRun(int id, RunState state, const QString& message, double seconds,
                   ModelWeights weights);
    void rename(int id, const QString& name);
    void setVisible(int id, bool visible);
    void remove(int id);
    void clear();

signals:
    void runAdded(int id);
    void runChanged(int id);  // name, state, plan or summary figures
    void runRemoved(int id);
    void visibilityChanged(int id, bool visible);
    // Steps [firstStep, end) and epochs [firstEpoch, end) of run `id` are new.
    void metricsAppended(int id, qsizetype firstStep, qsizetype firstEpoch);
    // Samples [first, end) of run `id` are new.
    void samplesAppended(int id, qsizetype first);

private:
    int nextColorIndex() const;
    std::vector<std::unique_ptr<RunRecord>> runs_;
    int next_id_ = 1;
};

}  // namespace trainbench::ui
