#pragma once
#include <QElapsedTimer>
#include <QString>
#include <QObject>
#include <QTimer>
#include <memory>

#include "run_store.hpp"
#include "trainbench/dataset.hpp"

class QThread;

namespace trainbench::ui {

// Runs trainbench::train on a worker thread, one run at a time; a run of several processes runs
// as a child trainbench-cli under mpirun instead (ProcessRun), its event stream read into the same
// buffer. A GUI-thread timer drains the metrics into the RunStore about 30 times a second; the
// end of a run arrives through a queued signal (QThread::finished, ProcessRun::finished), so
// nothing here ever waits on the engine.
class RunController : public QObject {
    Q_OBJECT
public:
    static constexpr int kDrainIntervalMs = 33;

    explicit RunController(RunStore& store, QObject* parent = nullptr);
    ~RunController() override;

    bool isRunning() const { return job_ != nullptr; }
    int activeRunId() const;
    // Starts a run with `config` (reusing `data` when given). When a run is active it is asked
    // to stop first; with `discardActive` its record is removed instead of kept as "stopped"
    // (rerun-on-change restarts should not litter the runs table).
    void submit(const RunConfig& config, std::shared_ptr<const Dataset> data = nullptr,
                bool discardActive = false);
    void requestStop();
    // The trainbench-cli that runs several processes; by default the one beside the app.
    void setCliProgram(const QString& path) { cli_program_ = path; }
    const QString& cliProgram() const { return cli_program_; }
    // Blocks until no run is active; for shutdown and tests. Returns false on timeout.
    bool waitUntilIdle(int timeoutMs);

signals:
    void runStarted(int id);
    void metricsDrained(int id);
    void runFinished(int id);

private:
    struct Job;
    struct PendingStart;
    void startNow(const RunConfig& config, std::shared_ptr<const Dataset> data);
    void drain();
    void stopActive();
    void onJobFinished();

    RunStore& store_;
    std::shared_ptr<Job> job_;
    QThread* thread_ = nullptr;
    QTimer drain_timer_;
    std::unique_ptr<PendingStart> pending_;
    QString cli_program_;
};

}  // namespace trainbench::ui
