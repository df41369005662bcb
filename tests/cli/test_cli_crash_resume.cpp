// Crash safety: a run that checkpoints after every update is killed with SIGKILL at seeded
// random moments, resumed each time with the same command plus --resume, and must
//  - find a complete checkpoint after every kill (the file's length is exactly what its
//    header describes, every tensor is there, the core reader accepts it), never older than
//    the last checkpoint the run reported written;
//  - resume from exactly that checkpoint (the "resumed from" note names its update);
//  - end with the weights, optimizer state and per-update metrics of an uninterrupted run with
//    the same flags, bit for bit.
// The kill moments are drawn from a seeded generator and printed; TRAINBENCH_CRASH_SEED
// replays another sequence. A moment is "k checkpoints into this launch, then d microseconds"
// (so it falls at the same point of training on a fast or a slow machine: inside the next
// update's compute or its checkpoint write), or, for k = 0, d microseconds after the process
// starts (while it loads the data and the checkpoint).
#include <algorithm>
#include <QElapsedTimer>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcessEnvironment>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QThread>

#include <csignal>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <set>

#include "cli/cli_process.hpp"
#include "core/sanitizer_build.hpp"
#include "trainbench/error.hpp"
#include "trainbench/weights.hpp"

namespace {

// Under a sanitizer every launch starts and checkpoints ~20 times slower, and 12 kills ran into
// Qt Test's 300-second limit: 4 there, each still resumed and checked bit for bit.
constexpr int kKills = TRAINBENCH_SANITIZED_BUILD ? 4 : 12;
constexpr uint64_t kDefaultSeed = 20261123;
constexpr int kMaxCheckpointsPerLaunch = 20;

// The run: 3600 training samples, batch 32 = 113 updates per epoch, 3 epochs (339 updates,
// two epoch ends with validation inside the run), Adam with warmup and a cosine schedule
// (which reads the update counter and the planned total), one thread so the products are
// deterministic.
QStringList run_flags(const QString& folder) {
    return {"train", "--dataset", "spirals", "--samples", "4000", "--hidden", "64,64",
            "--batch-size", "32", "--step-size", "2", "--epochs", "3", "--optimizer", "adam",
            "--lr", "0.003", "--schedule", "cosine", "--warmup-steps", "20", "--seed", "7",
            "--threads", "1", "--checkpoint-every", "1",
            "--checkpoint-dir", folder + "/checkpoints",
            "--save-weights", folder + "/weights.safetensors",
            "--metrics-out", folder + "/metrics.csv"};
}
constexpr int kTotalUpdates = 339;

const QRegularExpression kWritten("^note: checkpoint written at update (\\d+) ");
const QRegularExpression kResumed("^note: resumed from the checkpoint of update (\\d+) \\((.*)\\)$");

// One launch of the CLI whose stdout is read line by line while it runs.
class Launch {
public:
    Launch(const QStringList& arguments, const QString& cache_home) {
        QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
        // The peak-FLOPs cache is written at start-up: keep the killed runs' leftovers out of
        // the user's cache folder.
        environment.insert("XDG_CACHE_HOME", cache_home);
        process_.setProcessEnvironment(environment);
        process_.start(QStringLiteral(TRAINBENCH_CLI_PATH), arguments);
        started_ = process_.waitForStarted(10000);
        clock_.start();
    }
    bool started() const { return started_; }
    qint64 elapsed_ms() const { return clock_.elapsed(); }

    // Reads lines until `want` accepts one (true), or the process ends or the timeout passes
    // (false). Every line read is kept in lines().
    bool read_until(const std::function<bool(const QString&)>& want, int timeout_ms = 60000) {
        QElapsedTimer waited;
        waited.start();
        while (waited.elapsed() < timeout_ms) {
            while (process_.canReadLine()) {
                const QString line = QString::fromUtf8(process_.readLine()).trimmed();
                lines_ << line;
                if (want(line)) return true;
            }
            if (process_.state() == QProcess::NotRunning) return false;
            process_.waitForReadyRead(20);
        }
        return false;
    }

    void kill_now() {
        ::kill(static_cast<pid_t>(process_.processId()), SIGKILL);
        process_.waitForFinished(30000);
        drain();
    }
    bool wait_for_exit(int timeout_ms) {
        const bool finished = process_.waitForFinished(timeout_ms);
        drain();
        return finished;
    }
    bool killed() const { return process_.exitStatus() == QProcess::CrashExit; }
    int exit_code() const { return process_.exitStatus() == QProcess::NormalExit ? process_.exitCode() : -1; }
    const QStringList& lines() const { return lines_; }
    QString err() { return QString::fromUtf8(process_.readAllStandardError()); }

    // The update of the last "checkpoint written" note (or `otherwise`).
    int64_t last_written(int64_t otherwise) const {
        for (auto line = lines_.crbegin(); line != lines_.crend(); ++line)
            if (auto match = kWritten.match(*line); match.hasMatch()) return match.captured(1).toLongLong();
        return otherwise;
    }
    // The update the launch said it resumed from; -1 when it did not say (yet).
    int64_t resumed_from(QString* path = nullptr) const {
        for (const QString& line : lines_)
            if (auto match = kResumed.match(line); match.hasMatch()) {
                if (path) *path = match.captured(2);
                return match.captured(1).toLongLong();
            }
        return -1;
    }

private:
    void drain() {
        while (process_.canReadLine()) lines_ << QString::fromUtf8(process_.readLine()).trimmed();
        const QByteArray rest = process_.readAllStandardOutput();
        if (!rest.isEmpty()) lines_ << QString::fromUtf8(rest).trimmed();
    }

    QProcess process_;
    bool started_ = false;
    QElapsedTimer clock_;
    QStringList lines_;
};

// A checkpoint is complete when the file is exactly as long as its header says (8-byte length,
// JSON header, then the data up to the last tensor's end), it holds every tensor of `names`
// and the counters, and the core reader accepts it. Returns its update, or an explanation.
struct CheckpointCheck {
    int64_t update = -1;
    QString problem;  // empty when complete
};

CheckpointCheck check_checkpoint(const QString& path, const std::set<QString>& names) {
    CheckpointCheck check;
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly)) {
        check.problem = "cannot open " + path;
        return check;
    }
    const QByteArray bytes = file.readAll();
    if (bytes.size() < 8) {
        check.problem = QString("%1 bytes: shorter than the header length").arg(bytes.size());
        return check;
    }
    quint64 header_length = 0;
    for (int i = 7; i >= 0; --i) header_length = header_length << 8 | static_cast<unsigned char>(bytes[i]);
    if (header_length > static_cast<quint64>(bytes.size() - 8)) {
        check.problem = QString("header of %1 bytes in a %2-byte file").arg(header_length).arg(bytes.size());
        return check;
    }
    QJsonParseError error{};
    const QJsonObject header =
        QJsonDocument::fromJson(bytes.mid(8, static_cast<qsizetype>(header_length)), &error).object();
    if (error.error != QJsonParseError::NoError) {
        check.problem = "header is not JSON: " + error.errorString();
        return check;
    }
    qint64 data_end = 0;
    std::set<QString> found;
    for (auto entry = header.begin(); entry != header.end(); ++entry) {
        if (entry.key() == "__metadata__") continue;
        found.insert(entry.key());
        data_end = std::max<qint64>(data_end, entry.value().toObject()["data_offsets"].toArray().at(1).toInteger());
    }
    const qint64 expected_size = 8 + static_cast<qint64>(header_length) + data_end;
    if (bytes.size() != expected_size) {
        check.problem = QString("%1 bytes, the header describes %2").arg(bytes.size()).arg(expected_size);
        return check;
    }
    if (found != names) {
        check.problem = QString("%1 tensors, expected %2").arg(found.size()).arg(names.size());
        return check;
    }
    const QJsonObject metadata = header["__metadata__"].toObject();
    if (metadata["format"].toString() != "trainbench-checkpoint-1") {
        check.problem = "format '" + metadata["format"].toString() + "'";
        return check;
    }
    try {
        trainbench::read_safetensors(path.toStdString());
    } catch (const trainbench::Error& e) {
        check.problem = QString("refused by the reader: ") + e.what();
        return check;
    }
    bool number = false;
    check.update = metadata["update"].toString().toLongLong(&number);
    if (!number) check.problem = "no update counter";
    return check;
}

std::map<std::string, std::vector<float>> tensors_of(const QString& path) {
    std::map<std::string, std::vector<float>> tensors;
    for (auto& t : trainbench::read_safetensors(path.toStdString())) tensors[t.name] = std::move(t.data);
    return tensors;
}

// When a leftover temporary checkpoint was last written (nullopt: there is none).
std::optional<std::filesystem::file_time_type> partial_stamp(const QString& path) {
    std::error_code error;
    const auto stamp = std::filesystem::last_write_time(path.toStdString(), error);
    if (error) return std::nullopt;
    return stamp;
}

QByteArray file_bytes(const QString& path) {
    QFile file(path);
    return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
}

}  // namespace

class CliCrashResumeTest : public QObject {
    Q_OBJECT

private slots:
    void kill9_during_checkpointing_resumes_bit_identically() {
        QTemporaryDir scratch;
        QVERIFY(scratch.isValid());
        const QString cache_home = scratch.filePath("cache");
        const QString reference = scratch.filePath("reference"), crashed = scratch.filePath("crashed");
        QVERIFY(QDir().mkpath(reference) && QDir().mkpath(crashed));

        bool seed_given = false;
        const uint64_t seed = qEnvironmentVariable("TRAINBENCH_CRASH_SEED").toULongLong(&seed_given);
        const uint64_t used_seed = seed_given ? seed : kDefaultSeed;
        std::mt19937_64 random(used_seed);
        qInfo("kill moments from seed %llu (rerun with TRAINBENCH_CRASH_SEED=%llu)",
              static_cast<unsigned long long>(used_seed), static_cast<unsigned long long>(used_seed));

        // The uninterrupted run, with the same flags: its final checkpoint, weights and rows
        // are what the crashed run must end with. It also times an update and the start-up.
        QElapsedTimer clock;
        clock.start();
        Launch uninterrupted(run_flags(reference), cache_home);
        QVERIFY(uninterrupted.started());
        QVERIFY(uninterrupted.read_until([](const QString& line) { return kWritten.match(line).hasMatch(); }));
        // A start-up kill must come before the launch's first checkpoint. This first launch also
        // measures the peak-FLOPs cache's figure, which the later ones read back, so each launch
        // that reaches a checkpoint narrows the window to the quickest start-up seen.
        qint64 startup_ms = uninterrupted.elapsed_ms();
        QVERIFY(uninterrupted.wait_for_exit(120000));
        QVERIFY2(uninterrupted.exit_code() == 0, qPrintable(uninterrupted.lines().join('\n') + uninterrupted.err()));
        const QString reference_checkpoint = reference + "/checkpoints/latest.safetensors";
        const auto reference_table = read_metrics_csv(reference + "/metrics.csv");
        QVERIFY(reference_table.has_value());
        QCOMPARE(reference_table->rows.size(), kTotalUpdates);
        const double training_seconds = reference_table->cell(kTotalUpdates - 1, "wall_seconds").toDouble() -
                                        reference_table->cell(0, "wall_seconds").toDouble();
        const int64_t update_us = std::max<int64_t>(50, static_cast<int64_t>(1e6 * training_seconds / (kTotalUpdates - 1)));
        qInfo("uninterrupted run: %lld ms, start-up %lld ms, %lld us per update with its checkpoint",
              static_cast<long long>(clock.elapsed()), static_cast<long long>(startup_ms),
              static_cast<long long>(update_us));
        std::set<QString> names;
        for (const auto& [name, data] : tensors_of(reference_checkpoint)) names.insert(QString::fromStdString(name));
        QVERIFY(names.size() > 6);  // 3 layers' weights and biases, and Adam's moments

        const QString checkpoint = crashed + "/checkpoints/latest.safetensors";
        int64_t checkpoint_update = 0;  // of the complete checkpoint on disk; 0: none yet
        int kills = 0, mid_write = 0;
        for (int round = 1; round <= kKills; ++round) {
            // One kill in six (never the first) comes during start-up.
            const bool at_startup = round > 1 && std::uniform_int_distribution<int>(1, 6)(random) == 1;
            const int k = at_startup ? 0 : std::uniform_int_distribution<int>(1, kMaxCheckpointsPerLaunch)(random);
            const int64_t delay_us = k == 0 ? std::uniform_int_distribution<int64_t>(0, 1000 * startup_ms)(random)
                                            : std::uniform_int_distribution<int64_t>(0, 2 * update_us)(random);
            QStringList arguments = run_flags(crashed);
            const bool resuming = QFile::exists(checkpoint);
            const auto partial_before = partial_stamp(checkpoint + ".tmp");
            if (resuming) arguments << "--resume" << crashed + "/checkpoints";
            Launch launch(arguments, cache_home);
            QVERIFY(launch.started());
            if (k > 0) {
                int seen = 0;
                const bool reached = launch.read_until([&](const QString& line) {
                    if (!kWritten.match(line).hasMatch()) return false;
                    if (++seen == 1) startup_ms = std::min(startup_ms, launch.elapsed_ms());
                    return seen == k;
                });
                QVERIFY2(reached, qPrintable("the run ended before its kill: " + launch.lines().join('\n') + launch.err()));
            }
            QThread::usleep(static_cast<unsigned long>(delay_us));
            launch.kill_now();
            QVERIFY2(launch.killed(), "the run was not killed: it ended by itself");
            ++kills;
            // This launch was inside a checkpoint write (before its rename) when it died.
            const auto partial_after = partial_stamp(checkpoint + ".tmp");
            const bool left_partial = partial_after && partial_after != partial_before;
            if (left_partial) ++mid_write;

            // It resumed from the checkpoint the previous round found complete.
            if (resuming) {
                QString path;
                const int64_t from = launch.resumed_from(&path);
                if (from >= 0 || k > 0) {  // a k = 0 kill may come before the note
                    QCOMPARE(from, checkpoint_update);
                    QCOMPARE(path, checkpoint);
                }
            }
            // What is on disk now is complete and no older than what the run reported.
            const int64_t acknowledged = launch.last_written(checkpoint_update);
            if (!QFile::exists(checkpoint)) {
                QCOMPARE(acknowledged, int64_t{0});  // killed before its first checkpoint
            } else {
                const CheckpointCheck check = check_checkpoint(checkpoint, names);
                QVERIFY2(check.problem.isEmpty(),
                         qPrintable(QString("round %1: the checkpoint is not complete: %2").arg(round).arg(check.problem)));
                QVERIFY2(check.update >= acknowledged && check.update >= checkpoint_update,
                         qPrintable(QString("round %1: checkpoint of update %2, but update %3 was reported written")
                                        .arg(round).arg(check.update).arg(acknowledged)));
                checkpoint_update = check.update;
            }
            qInfo("kill %d/%d: %s%lld us -> complete checkpoint of update %lld%s", round, kKills,
                  qPrintable(k == 0 ? QString("at start-up + ") : QString("%1 checkpoints in + ").arg(k)),
                  static_cast<long long>(delay_us), static_cast<long long>(checkpoint_update),
                  left_partial ? " (killed inside a checkpoint write: a partial latest.safetensors.tmp beside it)" : "");
        }
        QCOMPARE(kills, kKills);
        QVERIFY2(checkpoint_update < kTotalUpdates, "the kills came too late to leave anything to resume");

        // The last launch runs to the end.
        Launch last(run_flags(crashed) << "--resume" << crashed + "/checkpoints", cache_home);
        QVERIFY(last.started());
        QVERIFY(last.wait_for_exit(120000));
        QVERIFY2(last.exit_code() == 0, qPrintable(last.lines().join('\n') + last.err()));
        QCOMPARE(last.resumed_from(), checkpoint_update);
        qInfo("%d kills, %d of them inside a checkpoint write; the last launch resumed "
              "at update %lld of %d",
              kills, mid_write, static_cast<long long>(checkpoint_update), kTotalUpdates);

        // Bit-identical: the saved weights, the final checkpoint's tensors (weights and Adam's
        // moments) and every row the last launch measured.
        QVERIFY(!file_bytes(crashed + "/weights.safetensors").isEmpty());
        QVERIFY(file_bytes(crashed + "/weights.safetensors") == file_bytes(reference + "/weights.safetensors"));
        QVERIFY(tensors_of(checkpoint) == tensors_of(reference_checkpoint));
        QVERIFY(!QFile::exists(checkpoint + ".tmp"));
        const auto table = read_metrics_csv(crashed + "/metrics.csv");
        QVERIFY(table.has_value());
        QCOMPARE(table->rows.size(), static_cast<qsizetype>(kTotalUpdates - checkpoint_update));
        for (int i = 0; i < table->rows.size(); ++i) {
            const int reference_row = static_cast<int>(checkpoint_update) + i;
            for (const char* column : {"update", "epoch", "samples_seen", "loss", "learning_rate", "grad_norm",
                                       "val_loss", "val_accuracy"})
                QCOMPARE(table->cell(i, column), reference_table->cell(reference_row, column));
        }
    }
};

QTEST_APPLESS_MAIN(CliCrashResumeTest)
#include "test_cli_crash_resume.moc"
