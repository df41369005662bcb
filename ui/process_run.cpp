#include "process_run.hpp"

#include <QFile>
#include <QFileInfo>
#include <signal.h>

#include "trainbench/config_json.hpp"
#include "trainbench/error.hpp"
#include "trainbench/process_runs.hpp"
#include "trainbench/weights.hpp"

namespace trainbench::ui {
namespace {

constexpr qsizetype kErrorTailBytes = 16 * 1024;  // enough for mpirun's longest account

QString q(const std::string& text) { return QString::fromStdString(text); }

}  // namespace

ProcessRun::ProcessRun(const RunConfig& config, QString cli, Observer observer, QObject* parent)
    : QObject(parent), config_(config), cli_(std::move(cli)), reader_(std::move(observer)) {
    process_.setProgram(cli_);
    connect(&process_, &QProcess::readyReadStandardOutput, this, &ProcessRun::readEvents);
    connect(&process_, &QProcess::readyReadStandardError, this, [this] {
        errors_ += process_.readAllStandardError();
        if (errors_.size() > kErrorTailBytes) errors_ = errors_.right(kErrorTailBytes);
    });
    connect(&process_, &QProcess::finished, this, &ProcessRun::onFinished);
    connect(&process_, &QProcess::errorOccurred, this, &ProcessRun::onErrorOccurred);
}

ProcessRun::~ProcessRun() {
    if (isRunning()) finishWithin(10000);
}

void ProcessRun::start() {
    if (!scratch_.isValid())
        return failToStart("cannot create a temporary folder for the run: " + scratch_.errorString().toStdString());
    RunConfig child = config_;
    // The app keeps the final weights of every run; the child writes them for it to read back.
    child.save_weights = weightsPath().toStdString();
    child.metrics_out.clear();
    const QString config_path = scratch_.filePath(QStringLiteral("config.json"));
    QFile file(config_path);
    if (!file.open(QIODevice::WriteOnly) || file.write(q(config_to_json(child)).toUtf8()) < 0)
        return failToStart("cannot write the run's configuration to " + config_path.toStdString());
    file.close();
    process_.setArguments({QStringLiteral("train"), QStringLiteral("--config"), config_path,
                           QStringLiteral("--events-out"), QStringLiteral("-"), QStringLiteral("--stop-on-input"),
                           QStringLiteral("--quiet")});
    process_.start();
}

void ProcessRun::requestStop() {
    if (stop_sent_ || !isRunning()) return;
    stop_sent_ = true;
    process_.write("stop\n");
}

void ProcessRun::finishWithin(int graceMs) {
    if (!isRunning()) return;
    requestStop();
    process_.waitForBytesWritten(1000);
    if (process_.waitForFinished(graceMs)) return;
    // Signals: mpirun passes SIGTERM on to the processes; after that, the last resort.
    process_.terminate();
    if (process_.waitForFinished(3000)) return;
    process_.kill();
    process_.waitForFinished(3000);
}

void ProcessRun::readEvents() {
    while (process_.canReadLine()) readEvent(process_.readLine());
}

void ProcessRun::readEvent(const QByteArray& line) {
    reader_.read_line_of_child(std::string_view(line.constData(), static_cast<size_t>(line.size())));
}

void ProcessRun::onErrorOccurred(QProcess::ProcessError error) {
    if (error != QProcess::FailedToStart || done_) return;
    const QString why = QFileInfo::exists(cli_) ? process_.errorString()
                                                : tr("it is missing; build trainbench-cli, which sits beside the app");
    failToStart(tr("a run of several processes starts %1, and it cannot start: %2").arg(cli_, why).toStdString());
}

void ProcessRun::failToStart(const std::string& message) {
    result_.reason = StopReason::failed;
    result_.message = message;
    done_ = true;
    emit finished();
}

QString ProcessRun::weightsPath() const { return scratch_.filePath(QStringLiteral("weights.safetensors")); }

void ProcessRun::onFinished(int exitCode, QProcess::ExitStatus status) {
    if (done_) return;
    // What is still in the pipe, the last line included even without its newline.
    readEvents();
    readEvent(process_.readAllStandardOutput());
    errors_ += process_.readAllStandardError();
    const int code = status == QProcess::NormalExit ? exitCode : 128 + SIGKILL;
    result_ = child_run_result(reader_, stop_sent_, errors_.toStdString(), config_.processes, code);
    const QString weights = weightsPath();
    if (result_.reason != StopReason::failed && result_.reason != StopReason::diverged && QFileInfo::exists(weights)) {
        try {
            result_.weights = load_weights(weights.toStdString());
        } catch (const Error& e) {
            result_.message += (result_.message.empty() ? "" : "; ") + std::string("its weights could not be read: ") + e.what();
        }
    }
    done_ = true;
    emit finished();
}

}  // namespace trainbench::ui
