#include "curve_export.hpp"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSaveFile>
#include <QStringList>
#include <QTextStream>

#include "run_record.hpp"
#include "trainbench/config_json.hpp"
#include "trainbench/error.hpp"

namespace trainbench::ui {
namespace {

QString exact(double value) { return QString::number(value, 'g', 17); }

QString csv_field(const QString& text) {
    if (!text.contains(',') && !text.contains('"') && !text.contains('\n')) return text;
    QString quoted = text;
    quoted.replace('"', QStringLiteral("\"\""));
    return '"' + quoted + '"';
}

void commit(QSaveFile& file, const QString& path) {
    if (!file.commit())
        throw Error("cannot write " + path.toStdString() + ": " + file.errorString().toStdString() +
                    "; choose a folder you can write to");
}

void open_for_writing(QSaveFile& file, const QString& path) {
    if (!file.open(QIODevice::WriteOnly | QIODevice::Text))
        throw Error("cannot write " + path.toStdString() + ": " + file.errorString().toStdString() +
                    "; choose a folder you can write to");
}

// The per-category memory columns, in the CLI's order (mem_<category>, mem_update_peak_<category>).
constexpr MemoryCategory kCategoryColumns[] = {
    MemoryCategory::parameters,     MemoryCategory::gradients,   MemoryCategory::optimizer_state,
    MemoryCategory::master_weights, MemoryCategory::activations, MemoryCategory::workspace,
    MemoryCategory::cache};

QString category_name(MemoryCategory category) {
    const std::string_view name = to_string(category);
    return QString::fromLatin1(name.data(), static_cast<qsizetype>(name.size()));
}

}  // namespace

QStringList curves_csv_columns() {
    // The run's settings, then the per-update figures under the names the CLI's metrics CSV
    // gives the same quantities (docs/METRICS.md). Columns added later go at the end.
    QStringList columns{"run",          "dataset",     "model",       "hidden",        "n_layer",       "n_head",
                        "n_embd",       "block_size",  "batch_size",  "step_size",     "micro_batch",
                        "precision",    "device",      "optimizer",   "lr",            "update",        "epoch",
                        "samples_seen", "wall_seconds", "loss",       "learning_rate", "grad_norm",     "update_ms",
                        "samples_per_second", "loss_scale", "skipped", "mem_update_peak_live", "mem_total", "rss_bytes"};
    for (MemoryCategory category : kCategoryColumns) columns << "mem_" + category_name(category);
    columns << "mem_peak_total" << "device_used_bytes";
    for (MemoryCategory category : kCategoryColumns)
        columns << "mem_update_peak_" + category_name(category);
    columns << "tokens_per_second" << "mfu" << "comm_ms";
    return columns;
}

void write_curves_csv(const QString& path, const std::vector<const RunRecord*>& runs) {
    QSaveFile file(path);
    open_for_writing(file, path);
    QTextStream out(&file);
    out << curves_csv_columns().join(',') << '\n';
    for (const auto* run : runs) {
        const auto& c = run->config;
        const bool gpt = c.model == ModelFamily::gpt;
        const QString settings = QStringList{csv_field(run->name),
                                             csv_field(QString::fromStdString(c.dataset)),
                                             QString::fromStdString(to_string(c.model)),
                                             // Each family's own shape; the other family's fields stay empty.
                                             gpt ? QString() : csv_field(hidden_layers_text(c.hidden)),
                                             gpt ? QString::number(c.n_layer) : QString(),
                                             gpt ? QString::number(c.n_head) : QString(),
                                             gpt ? QString::number(c.n_embd) : QString(),
                                             gpt ? QString::number(c.block_size) : QString(),
                                             QString::number(c.batch_size),
                                             QString::number(c.step_size),
                                             QString::number(largest_micro_batch(c.batch_size, c.step_size, c.processes)),
                                             QString::fromStdString(to_string(c.precision)),
                                             QString::fromStdString(c.device),
                                             QString::fromStdString(to_string(c.optimizer.kind)),
                                             exact(c.optimizer.resolved_lr())}
                                     .join(',');
        for (const auto& step : run->steps) {
            out << settings << ',' << step.update << ',' << step.epoch << ',' << step.samples_seen << ','
                << exact(step.wall_seconds) << ',' << exact(step.loss) << ',' << exact(step.learning_rate) << ','
                << exact(step.grad_norm) << ',' << exact(step.update_ms) << ',' << exact(step.samples_per_second)
                << ',' << exact(step.loss_scale) << ',' << (step.skipped ? 1 : 0) << ',' << step.memory.update_live_peak << ',' << step.memory.reserved
                << ',' << step.rss_bytes;
            for (MemoryCategory category : kCategoryColumns) out << ',' << step.memory.bytes(category);
            out << ',' << step.memory.reserved_peak << ',' << step.device_used_bytes;
            for (MemoryCategory category : kCategoryColumns) out << ',' << step.memory.update_peak_bytes(category);
            // Empty where they do not apply, as in the CLI's file: tokens for language models
            // only, MFU where the device's peak is known.
            out << ',' << (step.tokens_per_second > 0.0 ? exact(step.tokens_per_second) : QString()) << ','
                << (std::isfinite(step.mfu) ? exact(step.mfu) : QString());
            out << ',' << exact(step.comm_ms);
            out << '\n';
        }
    }
    out.flush();
    commit(file, path);
}

void write_curves_json(const QString& path, const std::vector<const RunRecord*>& runs) {
    QJsonArray run_array;
    for (const auto* run : runs) {
        QJsonArray update, epoch, samples, wall, loss, lr, update_ms, comm_ms, throughput, tokens, mfu;
        for (const auto& step : run->steps) {
            update.append(static_cast<qint64>(step.update));
            epoch.append(static_cast<qint64>(step.epoch));
            samples.append(static_cast<qint64>(step.samples_seen));
            wall.append(step.wall_seconds);
            loss.append(step.loss);
            lr.append(step.learning_rate);
            update_ms.append(step.update_ms);
            comm_ms.append(step.comm_ms);
            throughput.append(step.samples_per_second);
            // null where they do not apply (an MLP's tokens, an unknown peak's MFU)
            tokens.append(step.tokens_per_second > 0.0 ? QJsonValue(step.tokens_per_second) : QJsonValue());
            mfu.append(std::isfinite(step.mfu) ? QJsonValue(step.mfu) : QJsonValue());
        }
        QJsonArray text_samples;
        for (const auto& sample : run->samples)
            text_samples.append(QJsonObject{{"update", static_cast<qint64>(sample.update)}, {"text", sample.text}});
        QJsonArray validation;
        for (const auto& e : run->epochs) {
            QJsonObject point{{"epoch", static_cast<qint64>(e.epoch)},
                              {"update", static_cast<qint64>(e.update)},
                              {"train_loss", e.train_loss}};
            if (std::isfinite(e.val_loss)) point["val_loss"] = e.val_loss;
            if (std::isfinite(e.val_accuracy)) point["val_accuracy"] = e.val_accuracy;
            validation.append(point);
        }
        QJsonObject entry;
        entry["name"] = run->name;
        entry["config"] = QJsonDocument::fromJson(QByteArray::fromStdString(config_to_json(run->config))).object();
        entry["updates"] = QJsonObject{{"update", update},   {"epoch", epoch},         {"samples_seen", samples},
                                       {"wall_seconds", wall}, {"loss", loss},         {"learning_rate", lr},
                                       {"update_ms", update_ms}, {"comm_ms", comm_ms},
                                       {"samples_per_second", throughput},
                                       {"tokens_per_second", tokens}, {"mfu", mfu}};
        entry["epochs"] = validation;
        entry["samples"] = text_samples;
        run_array.append(entry);
    }
    QSaveFile file(path);
    open_for_writing(file, path);
    file.write(QJsonDocument(QJsonObject{{"runs", run_array}}).toJson(QJsonDocument::Indented));
    commit(file, path);
}

}  // namespace trainbench::ui
