#pragma once
#include <QObject>
#include <QProcess>
#include <QString>
#include <QTemporaryDir>
#include <memory>
#include <string>

#include "trainbench/run_events.hpp"
#include "trainbench/trainer.hpp"

namespace trainbench::ui {

// A run of several processes (config.processes > 1): MPI needs a job of its own, so the app runs
// `trainbench-cli train --config FILE --events-out - --save-weights FILE` as a child through
// QProcess (the CLI starts itself under mpirun) and reads process 0's event stream
// (docs/METRICS.md, "Event stream") line by line into `observer` as it arrives, on the GUI
// thread. A stop is a line "stop" on the child's stdin (--stop-on-input), which mpirun hands to
// process 0 and process 0 agrees with the others at the next micro-batch; a signal would make
// mpirun tear the job's output down before the last events and the weights are out. Should the
// app die, the pipe closes and that stops the run too. Nothing here blocks: the end arrives as
// finished().
class ProcessRun : public QObject {
    Q_OBJECT
public:
    // `cli` is the trainbench-cli to start.
    ProcessRun(const RunConfig& config, QString cli, Observer observer, QObject* parent = nullptr);
    ~ProcessRun() override;

    void start();
    // Asks every process to stop after its current micro-batch (once; repeats do nothing).
    void requestStop();
    bool isRunning() const { return process_.state() != QProcess::NotRunning; }
    // Ends the run for good: a stop request, up to `graceMs` for the processes to finish, then
    // SIGTERM and SIGKILL to mpirun. For the app's shutdown; blocks.
    void finishWithin(int graceMs);

    // Valid after finished(): how the run ended, its plan and last metrics, its final weights
    // (when the run wrote them) and one clear line for a failure (the run's own error, mpirun's
    // account of a dead process, or the CLI that could not start).
    const RunResult& result() const { return result_; }

signals:
    void finished();

private:
    void readEvents();
    void readEvent(const QByteArray& line);
    void onFinished(int exitCode, QProcess::ExitStatus status);
    void onErrorOccurred(QProcess::ProcessError error);
    // Ends the run as failed before any process trained.
    void failToStart(const std::string& message);
    // Where the child saves the final weights for the app to read back.
    QString weightsPath() const;

    RunConfig config_;
    QString cli_;
    QTemporaryDir scratch_;
    QProcess process_;
    RunEventReader reader_;
    RunResult result_;
    QByteArray errors_;  // the child's stderr, for the failure line
    bool stop_sent_ = false;
    bool done_ = false;
};

}  // namespace trainbench::ui
