#include "session_file.hpp"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSaveFile>
#include <cmath>
#include <functional>
#include <limits>

#include "run_store.hpp"
#include "trainbench/config_json.hpp"
#include "trainbench/error.hpp"

namespace trainbench::ui {
namespace {

constexpr int kSessionFormatVersion = 1;
const QString kFormatName = QStringLiteral("trainbench-session");

constexpr std::pair<const char*, BytesByCategory MemoryReport::*> kCategoryArrays[] = {
    {"memory_bytes", &MemoryReport::current},
    {"update_peak_bytes", &MemoryReport::update_peak},
    {"update_peak_held_bytes", &MemoryReport::update_peak_held},
    {"peak_bytes", &MemoryReport::peak}};

QString category_key(int category) {
    const auto name = to_string(static_cast<MemoryCategory>(category));
    return QString::fromUtf8(name.data(), static_cast<qsizetype>(name.size()));
}

template <typename Get>
QJsonArray column(const std::vector<StepMetrics>& steps, Get get) {
    QJsonArray values;
    for (const auto& step : steps) values.append(get(step));
    return values;
}

QJsonObject plan_to_json(const RunPlan& plan) {
    QJsonArray planned;
    for (auto bytes : plan.planned_bytes) planned.append(static_cast<qint64>(bytes));
    return {{"global_batch", static_cast<qint64>(plan.global_batch)},
            {"step_size", static_cast<qint64>(plan.step_size)},
            {"processes", static_cast<qint64>(plan.processes)},
            {"zero", static_cast<qint64>(plan.zero)},
            {"threads", plan.threads},
            {"micro_batch", static_cast<qint64>(plan.micro_batch)},
            {"train_samples", static_cast<qint64>(plan.train_samples)},
            {"updates_per_epoch", static_cast<qint64>(plan.updates_per_epoch)},
            {"total_updates", static_cast<qint64>(plan.total_updates)},
            {"model_summary", QString::fromStdString(plan.model_summary)},
            {"parameter_count", static_cast<qint64>(plan.parameter_count)},
            {"planned_bytes", planned},
            {"auto_fit_note", QString::fromStdString(plan.auto_fit_note)},
            {"activations_without_checkpointing", static_cast<qint64>(plan.activations_without_checkpointing)},
            {"rebuilt_segments", plan.rebuilt_segments},
            {"recomputed_attention_bytes", static_cast<qint64>(plan.recomputed_attention_bytes)},
            {"tokens_per_sample", static_cast<qint64>(plan.tokens_per_sample)},
            {"flops_per_sample", plan.flops_per_sample},
            {"peak_flops", plan.peak_flops},
            {"peak_source", QString::fromStdString(plan.peak_source)}};
}

RunPlan plan_from_json(const QJsonObject& j) {
    RunPlan plan;
    plan.global_batch = j["global_batch"].toInteger();
    plan.step_size = j["step_size"].toInteger();
    // Absent in sessions saved before runs of several processes: one process.
    plan.processes = j["processes"].toInteger(1);
    plan.zero = j["zero"].toInteger(0);
    plan.threads = j["threads"].toInt(0);
    plan.micro_batch = j["micro_batch"].toInteger();
    plan.train_samples = j["train_samples"].toInteger();
    plan.updates_per_epoch = j["updates_per_epoch"].toInteger();
    plan.total_updates = j["total_updates"].toInteger();
    plan.model_summary = j["model_summary"].toString().toStdString();
    if (plan.model_summary.empty()) {
        // Sessions saved before models were described as data list an MLP's widths.
        std::string widths;
        for (const auto& v : j["layer_sizes"].toArray()) {
            if (!widths.empty()) widths += '-';
            widths += std::to_string(v.toInteger());
        }
        if (!widths.empty()) plan.model_summary = "MLP " + widths;
    }
    plan.parameter_count = j["parameter_count"].toInteger();
    const auto planned = j["planned_bytes"].toArray();
    for (int i = 0; i < kMemoryCategoryCount && i < planned.size(); ++i) plan.planned_bytes[static_cast<std::size_t>(i)] = planned[i].toInteger();
    plan.auto_fit_note = j["auto_fit_note"].toString().toStdString();
    // Absent in sessions saved before it was planned: no note.
    plan.activations_without_checkpointing = j["activations_without_checkpointing"].toInteger(-1);
    plan.rebuilt_segments = j["rebuilt_segments"].toInt(0);
    plan.recomputed_attention_bytes = j["recomputed_attention_bytes"].toInteger(0);  // absent before 2026-11-29: none
    // MFU's terms; absent (0, empty) in sessions saved before MFU was measured.
    plan.tokens_per_sample = j["tokens_per_sample"].toInteger();
    plan.flops_per_sample = j["flops_per_sample"].toDouble();
    plan.peak_flops = j["peak_flops"].toDouble();
    plan.peak_source = j["peak_source"].toString().toStdString();
    return plan;
}

QString state_name(RunState state) {
    switch (state) {
        case RunState::running: return QStringLiteral("stopped");  // a saved run is no longer running
        case RunState::completed: return QStringLiteral("completed");
        case RunState::stopped: return QStringLiteral("stopped");
        case RunState::failed: return QStringLiteral("failed");
    }
    return {};
}

RunState parse_state(const QString& name) {
    if (name == QStringLiteral("completed")) return RunState::completed;
    if (name == QStringLiteral("failed")) return RunState::failed;
    return RunState::stopped;
}

QJsonObject steps_to_json(const std::vector<StepMetrics>& s) {
    QJsonObject j;
    j["update"] = column(s, [](const StepMetrics& m) { return static_cast<qint64>(m.update); });
    j["epoch"] = column(s, [](const StepMetrics& m) { return static_cast<qint64>(m.epoch); });
    j["samples_seen"] = column(s, [](const StepMetrics& m) { return static_cast<qint64>(m.samples_seen); });
    j["wall_seconds"] = column(s, [](const StepMetrics& m) { return m.wall_seconds; });
    j["loss"] = column(s, [](const StepMetrics& m) { return m.loss; });
    j["learning_rate"] = column(s, [](const StepMetrics& m) { return m.learning_rate; });
    j["grad_norm"] = column(s, [](const StepMetrics& m) { return m.grad_norm; });
    j["update_ms"] = column(s, [](const StepMetrics& m) { return m.update_ms; });
    j["samples_per_second"] = column(s, [](const StepMetrics& m) { return m.samples_per_second; });
    j["batch_samples"] = column(s, [](const StepMetrics& m) { return static_cast<qint64>(m.batch_samples); });
    j["tokens_per_second"] = column(s, [](const StepMetrics& m) { return m.tokens_per_second; });
    j["mfu"] = column(s, [](const StepMetrics& m) { return std::isfinite(m.mfu) ? QJsonValue(m.mfu) : QJsonValue(); });
    j["loss_scale"] = column(s, [](const StepMetrics& m) { return m.loss_scale; });
    j["skipped"] = column(s, [](const StepMetrics& m) { return m.skipped; });
    j["skipped_updates"] = column(s, [](const StepMetrics& m) { return static_cast<qint64>(m.skipped_updates); });
    j["rss_bytes"] = column(s, [](const StepMetrics& m) { return static_cast<qint64>(m.rss_bytes); });
    j["device_used_bytes"] = column(s, [](const StepMetrics& m) { return static_cast<qint64>(m.device_used_bytes); });
    j["device_total_bytes"] = column(s, [](const StepMetrics& m) { return static_cast<qint64>(m.device_total_bytes); });
    j["update_live_peak_bytes"] = column(s, [](const StepMetrics& m) { return static_cast<qint64>(m.memory.update_live_peak); });
    j["live_peak_bytes"] = column(s, [](const StepMetrics& m) { return static_cast<qint64>(m.memory.live_peak); });
    j["reserved_bytes"] = column(s, [](const StepMetrics& m) { return static_cast<qint64>(m.memory.reserved); });
    j["reserved_peak_bytes"] = column(s, [](const StepMetrics& m) { return static_cast<qint64>(m.memory.reserved_peak); });
    // Per category: bytes held after the update, the most held during it, the most since the start.
    for (const auto& [key, member] : kCategoryArrays) {
        QJsonObject by_category;
        for (int c = 0; c < kMemoryCategoryCount; ++c) {
            const auto category = static_cast<std::size_t>(c);
            by_category[category_key(c)] = column(s, [&](const StepMetrics& m) { return static_cast<qint64>((m.memory.*member)[category]); });
        }
        j[QLatin1String(key)] = by_category;
    }
    return j;
}

std::vector<StepMetrics> steps_from_json(const QJsonObject& j) {
    const qsizetype count = j["update"].toArray().size();
    std::vector<StepMetrics> steps(static_cast<std::size_t>(count));
    auto read = [&](const char* key, const std::function<void(StepMetrics&, const QJsonValue&)>& set) {
        const QJsonArray values = j[QLatin1String(key)].toArray();
        if (values.size() != count)
            throw Error(std::string("session file: column '") + key + "' has " + std::to_string(values.size()) +
                        " values for " + std::to_string(count) + " updates; the file is damaged");
        for (qsizetype i = 0; i < count; ++i) set(steps[static_cast<std::size_t>(i)], values[i]);
    };
    read("update", [](StepMetrics& m, const QJsonValue& v) { m.update = v.toInteger(); });
    read("epoch", [](StepMetrics& m, const QJsonValue& v) { m.epoch = v.toInteger(); });
    read("samples_seen", [](StepMetrics& m, const QJsonValue& v) { m.samples_seen = v.toInteger(); });
    read("wall_seconds", [](StepMetrics& m, const QJsonValue& v) { m.wall_seconds = v.toDouble(); });
    read("loss", [](StepMetrics& m, const QJsonValue& v) { m.loss = v.toDouble(std::numeric_limits<double>::quiet_NaN()); });
    read("learning_rate", [](StepMetrics& m, const QJsonValue& v) { m.learning_rate = v.toDouble(); });
    read("grad_norm", [](StepMetrics& m, const QJsonValue& v) { m.grad_norm = v.toDouble(std::numeric_limits<double>::quiet_NaN()); });
    read("update_ms", [](StepMetrics& m, const QJsonValue& v) { m.update_ms = v.toDouble(); });
    read("samples_per_second", [](StepMetrics& m, const QJsonValue& v) { m.samples_per_second = v.toDouble(); });
    read("batch_samples", [](StepMetrics& m, const QJsonValue& v) { m.batch_samples = v.toInteger(); });
    // Columns added with language models; sessions saved before them lack them.
    if (j.contains(QLatin1String("tokens_per_second")))
        read("tokens_per_second", [](StepMetrics& m, const QJsonValue& v) { m.tokens_per_second = v.toDouble(); });
    if (j.contains(QLatin1String("mfu")))
        read("mfu", [](StepMetrics& m, const QJsonValue& v) { m.mfu = v.toDouble(std::numeric_limits<double>::quiet_NaN()); });
    read("loss_scale", [](StepMetrics& m, const QJsonValue& v) { m.loss_scale = v.toDouble(1.0); });
    read("skipped", [](StepMetrics& m, const QJsonValue& v) { m.skipped = v.toBool(); });
    read("skipped_updates", [](StepMetrics& m, const QJsonValue& v) { m.skipped_updates = v.toInteger(); });
    read("rss_bytes", [](StepMetrics& m, const QJsonValue& v) { m.rss_bytes = v.toInteger(); });
    read("device_used_bytes", [](StepMetrics& m, const QJsonValue& v) { m.device_used_bytes = v.toInteger(); });
    read("device_total_bytes", [](StepMetrics& m, const QJsonValue& v) { m.device_total_bytes = v.toInteger(); });
    read("update_live_peak_bytes", [](StepMetrics& m, const QJsonValue& v) { m.memory.update_live_peak = v.toInteger(); });
    read("live_peak_bytes", [](StepMetrics& m, const QJsonValue& v) { m.memory.live_peak = v.toInteger(); });
    read("reserved_bytes", [](StepMetrics& m, const QJsonValue& v) { m.memory.reserved = v.toInteger(); });
    read("reserved_peak_bytes", [](StepMetrics& m, const QJsonValue& v) { m.memory.reserved_peak = v.toInteger(); });
    for (const auto& [key, member] : kCategoryArrays) {
        const QJsonObject by_category = j[QLatin1String(key)].toObject();
        for (int c = 0; c < kMemoryCategoryCount; ++c) {
            const QJsonArray values = by_category[category_key(c)].toArray();
            for (qsizetype i = 0; i < count && i < values.size(); ++i)
                (steps[static_cast<std::size_t>(i)].memory.*member)[static_cast<std::size_t>(c)] = values[i].toInteger();
        }
    }
    return steps;
}

QJsonValue finite_or_null(double value) { return std::isfinite(value) ? QJsonValue(value) : QJsonValue(); }

QJsonArray samples_to_json(const std::vector<TextSample>& samples) {
    QJsonArray values;
    for (const auto& sample : samples)
        values.append(QJsonObject{{"update", static_cast<qint64>(sample.update)}, {"text", sample.text}});
    return values;
}

// Sessions saved before text samples have no "samples" key: no samples.
std::vector<TextSample> samples_from_json(const QJsonValue& value) {
    std::vector<TextSample> samples;
    if (value.isUndefined() || value.isNull()) return samples;
    if (!value.isArray()) throw Error("session file: 'samples' is not a list; the file is damaged");
    for (const auto& entry : value.toArray()) {
        const QJsonObject o = entry.toObject();
        if (!o["update"].isDouble() || !o["text"].isString())
            throw Error("session file: a text sample lacks its 'update' or 'text'; the file is damaged");
        samples.push_back({o["update"].toInteger(), o["text"].toString()});
    }
    return samples;
}

}  // namespace

void save_session(const QString& path, const RunStore& store) {
    QJsonArray runs;
    for (const auto& run : store.runs()) {
        QJsonObject j;
        j["name"] = run->name;
        j["color"] = run->color.name();
        j["visible"] = run->visible;
        j["config"] = QJsonDocument::fromJson(QByteArray::fromStdString(config_to_json(run->config))).object();
        j["state"] = state_name(run->state);
        j["message"] = run->message;
        j["seconds"] = run->elapsed_seconds();
        j["notes"] = QJsonArray::fromStringList(run->notes);
        if (run->plan) j["plan"] = plan_to_json(*run->plan);
        j["updates"] = steps_to_json(run->steps);
        QJsonArray epochs;
        for (const auto& e : run->epochs)
            epochs.append(QJsonObject{{"epoch", static_cast<qint64>(e.epoch)},
                                      {"epoch_ended", e.epoch_ended},
                                      {"update", static_cast<qint64>(e.update)},
                                      {"train_loss", finite_or_null(e.train_loss)},
                                      {"val_loss", finite_or_null(e.val_loss)},
                                      {"val_accuracy", finite_or_null(e.val_accuracy)},
                                      {"val_samples", static_cast<qint64>(e.val_samples)},
                                      {"wall_seconds", e.wall_seconds}});
        j["epochs"] = epochs;
        j["samples"] = samples_to_json(run->samples);
        runs.append(j);
    }
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly))
        throw Error("cannot write session " + path.toStdString() + ": " + file.errorString().toStdString());
    file.write(QJsonDocument(QJsonObject{{"format", kFormatName}, {"version", kSessionFormatVersion}, {"runs", runs}})
                   .toJson(QJsonDocument::Compact));
    if (!file.commit())
        throw Error("cannot write session " + path.toStdString() + ": " + file.errorString().toStdString());
}

int load_session(const QString& path, RunStore& store) {
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly))
        throw Error("cannot open session " + path.toStdString() + ": " + file.errorString().toStdString());
    QJsonParseError parse_error;
    const auto document = QJsonDocument::fromJson(file.readAll(), &parse_error);
    if (document.isNull())
        throw Error("session " + path.toStdString() + " is not valid JSON: " + parse_error.errorString().toStdString() +
                    " at byte " + std::to_string(parse_error.offset));
    const QJsonObject root = document.object();
    if (root["format"].toString() != kFormatName)
        throw Error("session " + path.toStdString() + " is not a TrainBench session file (no \"format\": \"" +
                    kFormatName.toStdString() + "\")");
    if (root["version"].toInt() > kSessionFormatVersion)
        throw Error("session " + path.toStdString() + " was written by a newer TrainBench (format version " +
                    std::to_string(root["version"].toInt()) + "); update TrainBench to open it");
    std::vector<std::unique_ptr<RunRecord>> loaded;
    for (const auto& value : root["runs"].toArray()) {
        const QJsonObject j = value.toObject();
        auto run = std::make_unique<RunRecord>();
        run->name = j["name"].toString();
        run->color = QColor(j["color"].toString());
        run->visible = j["visible"].toBool(true);
        run->config = config_from_json(QJsonDocument(j["config"].toObject()).toJson().toStdString());
        run->state = parse_state(j["state"].toString());
        run->message = j["message"].toString();
        run->seconds = j["seconds"].toDouble();
        for (const auto& note : j["notes"].toArray()) run->notes << note.toString();
        if (j.contains("plan")) run->plan = plan_from_json(j["plan"].toObject());
        run->steps = steps_from_json(j["updates"].toObject());
        for (const auto& e : j["epochs"].toArray()) {
            const QJsonObject o = e.toObject();
            EpochMetrics epoch;
            epoch.epoch = o["epoch"].toInteger();
            epoch.epoch_ended = o["epoch_ended"].toBool(true);  // older sessions: the app's evaluations ended epochs
            epoch.update = o["update"].toInteger();
            epoch.train_loss = o["train_loss"].toDouble(std::numeric_limits<double>::quiet_NaN());
            epoch.val_loss = o["val_loss"].toDouble(std::numeric_limits<double>::quiet_NaN());
            epoch.val_accuracy = o["val_accuracy"].toDouble(std::numeric_limits<double>::quiet_NaN());
            epoch.val_samples = o["val_samples"].toInteger();
            epoch.wall_seconds = o["wall_seconds"].toDouble();
            run->epochs.push_back(epoch);
        }
        run->samples = samples_from_json(j["samples"]);
        loaded.push_back(std::move(run));
    }
    // Adopt only after the whole file parsed, so a damaged file adds nothing.
    for (auto& run : loaded) store.adoptRun(std::move(run));
    return static_cast<int>(loaded.size());
}

}  // namespace trainbench::ui
