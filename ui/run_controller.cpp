#include "run_controller.hpp"

#include <QCoreApplication>
#include <QDeadlineTimer>
#include <QThread>
#include <atomic>
#include <chrono>

#include "metrics_buffer.hpp"
#include "process_run.hpp"
#include "trainbench/trainer.hpp"

namespace trainbench::ui {

struct RunController::Job {
    int run_id = 0;
    RunConfig config;
    std::shared_ptr<const Dataset> data;
    std::atomic<bool> stop{false};
    bool discard = false;
    MetricsBuffer buffer;
    // Several processes: the child run (no thread then).
    std::unique_ptr<ProcessRun> process;
    // Written by the worker before it finishes; read after QThread::finished.
    RunResult result;
    QString error;
    std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
};

struct RunController::PendingStart {
    RunConfig config;
    std::shared_ptr<const Dataset> data;
};

RunController::RunController(RunStore& store, QObject* parent)
    : QObject(parent), store_(store),
      cli_program_(QCoreApplication::applicationDirPath() + QStringLiteral("/trainbench-cli")) {
    drain_timer_.setInterval(kDrainIntervalMs);
    connect(&drain_timer_, &QTimer::timeout, this, &RunController::drain);
}

RunController::~RunController() {
    pending_.reset();
    if (!job_) return;
    job_->stop = true;
    if (job_->process) {
        job_->process->disconnect(this);
        job_->process->finishWithin(10000);
    } else {
        thread_->wait();
        delete thread_;
    }
}

int RunController::activeRunId() const { return job_ ? job_->run_id : 0; }

void RunController::submit(const RunConfig& config, std::shared_ptr<const Dataset> data,
                           bool discardActive) {
    if (!job_) {
        startNow(config, std::move(data));
        return;
    }
    pending_ = std::make_unique<PendingStart>(PendingStart{config, std::move(data)});
    job_->discard = job_->discard || discardActive;
    stopActive();
}

void RunController::requestStop() {
    pending_.reset();
    if (job_) stopActive();
}

void RunController::stopActive() {
    job_->stop = true;
    if (job_->process) job_->process->requestStop();
}

void RunController::startNow(const RunConfig& config, std::shared_ptr<const Dataset> data) {
    auto job = std::make_shared<Job>();
    job->config = config;
    job->data = std::move(data);
    job->run_id = store_.addRun(config).id;
    job_ = job;
    if (config.processes > 1) {
        // MPI starts the processes; the data set is theirs to load.
        job->data.reset();
        job->process = std::make_unique<ProcessRun>(config, cli_program_, job->buffer.observer());
        connect(job->process.get(), &ProcessRun::finished, this, &RunController::onJobFinished, Qt::QueuedConnection);
        job->process->start();
        drain_timer_.start();
        emit runStarted(job->run_id);
        return;
    }
    thread_ = QThread::create([job] {
        try {
            job->result = train(job->config, job->buffer.observer(), &job->stop, job->data);
        } catch (const std::exception& error) {
            job->error = QString::fromUtf8(error.what());
        }
    });
    thread_->setObjectName(QStringLiteral("trainbench-run-%1").arg(job->run_id));
    connect(thread_, &QThread::finished, this, &RunController::onJobFinished);
    thread_->start();
    drain_timer_.start();
    emit runStarted(job->run_id);
}

void RunController::drain() {
    if (!job_) return;
    MetricsBatch batch = job_->buffer.take();
    if (batch.empty()) return;
    if (batch.plan) store_.setPlan(job_->run_id, *batch.plan);
    QStringList notes;
    for (const auto& note : batch.notes) notes << QString::fromStdString(note);
    store_.appendMetrics(job_->run_id, batch.steps, batch.epochs, notes);
    // After the metrics, so a sample's evaluation (its validation loss) is already in the record.
    if (!batch.samples.empty()) {
        std::vector<TextSample> samples;
        samples.reserve(batch.samples.size());
        for (const auto& sample : batch.samples) samples.push_back({sample.update, decode_sample_text(sample.text)});
        store_.appendSamples(job_->run_id, std::move(samples));
    }
    emit metricsDrained(job_->run_id);
}

void RunController::onJobFinished() {
    drain();
    drain_timer_.stop();
    auto job = std::move(job_);
    if (job->process) {
        job->result = job->process->result();
        job->process.release()->deleteLater();
    } else {
        thread_->deleteLater();
        thread_ = nullptr;
    }

    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - job->started).count();
    if (job->discard || !store_.find(job->run_id)) {
        store_.remove(job->run_id);
    } else if (!job->error.isEmpty()) {
        store_.finishRun(job->run_id, RunState::failed, job->error, seconds, {});
    } else {
        RunState state = RunState::completed;
        switch (job->result.reason) {
            case StopReason::completed:
            case StopReason::max_steps: state = RunState::completed; break;
            case StopReason::stopped: state = RunState::stopped; break;
            case StopReason::diverged:
            case StopReason::failed: state = RunState::failed; break;
        }
        if (!store_.find(job->run_id)->plan) store_.setPlan(job->run_id, job->result.plan);
        store_.finishRun(job->run_id, state, QString::fromStdString(job->result.message),
                         job->result.seconds > 0 ? job->result.seconds : seconds,
                         std::move(job->result.weights));
    }
    emit runFinished(job->run_id);

    if (pending_) {
        auto next = std::move(pending_);
        startNow(next->config, std::move(next->data));
    }
}

bool RunController::waitUntilIdle(int timeoutMs) {
    QDeadlineTimer deadline(timeoutMs);
    while (job_ || pending_) {
        if (deadline.hasExpired()) return false;
        QCoreApplication::processEvents(QEventLoop::AllEvents, 10);
        if (thread_) thread_->wait(QDeadlineTimer(5));
    }
    return true;
}

}  // namespace trainbench::ui
