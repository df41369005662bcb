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

}  // namespace

QStringList curves_csv_columns() {
    return {"run",          "dataset",     "hidden",      "batch_size",    "step_size",     "micro_batch",
            "precision",    "device",      "optimizer",   "lr",            "update",        "epoch",
            "samples_seen", "wall_seconds", "loss",       "learning_rate", "grad_norm",     "update_ms",
            "samples_per_second", "loss_scale", "skipped", "update_live_peak_bytes", "reserved_bytes", "rss_bytes"};
}

void write_curves_csv(const QString& path, const std::vector<const RunRecord*>& runs) {
    QSaveFile file(path);
    open_for_writing(file, path);
    QTextStream out(&file);
    out << curves_csv_columns().join(',') << '\n';
    for (const auto* run : runs) {
        const auto& c = run->config;
        const QString settings = QStringList{csv_field(run->name),
                                             csv_field(QString::fromStdString(c.dataset)),
                                             csv_field(hidden_layers_text(c.hidden)),
                                             QString::number(c.batch_size),
                                             QString::number(c.step_size),
                                             QString::number((c.batch_size + c.step_size - 1) / c.step_size),
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
                << ',' << step.rss_bytes << '\n';
        }
    }
    out.flush();
    commit(file, path);
}

void write_curves_json(const QString& path, const std::vector<const RunRecord*>& runs) {
    QJsonArray run_array;
    for (const auto* run : runs) {
        QJsonArray update, epoch, samples, wall, loss, lr, update_ms, throughput;
        for (const auto& step : run->steps) {
            update.append(static_cast<qint64>(step.update));
            epoch.append(static_cast<qint64>(step.epoch));
            samples.append(static_cast<qint64>(step.samples_seen));
            wall.append(step.wall_seconds);
            loss.append(step.loss);
            lr.append(step.learning_rate);
            update_ms.append(step.update_ms);
            throughput.append(step.samples_per_second);
        }
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
                                       {"update_ms", update_ms}, {"samples_per_second", throughput}};
        entry["epochs"] = validation;
        run_array.append(entry);
    }
    QSaveFile file(path);
    open_for_writing(file, path);
    file.write(QJsonDocument(QJsonObject{{"runs", run_array}}).toJson(QJsonDocument::Indented));
    commit(file, path);
}

}  // namespace trainbench::ui
