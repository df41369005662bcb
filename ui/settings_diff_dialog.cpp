#include "settings_diff_dialog.hpp"

#include <QCheckBox>
#include <QDialogButtonBox>
#include <QHeaderView>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QTableWidget>
#include <QVBoxLayout>
#include <map>

#include "run_record.hpp"
#include "trainbench/config_json.hpp"

namespace trainbench::ui {
namespace {

QString json_value_text(const QJsonValue& value) {
    if (value.isString()) return value.toString();
    if (value.isBool()) return value.toBool() ? QStringLiteral("true") : QStringLiteral("false");
    if (value.isDouble()) return QString::number(value.toDouble(), 'g', 12);
    if (value.isNull()) return QStringLiteral("null");
    if (value.isArray()) {
        QStringList parts;
        for (const auto& item : value.toArray()) parts << json_value_text(item);
        return QStringLiteral("[") + parts.join(',') + QStringLiteral("]");
    }
    return QString::fromUtf8(QJsonDocument(value.toObject()).toJson(QJsonDocument::Compact));
}

void flatten(const QJsonObject& object, const QString& prefix, std::vector<std::pair<QString, QString>>& out) {
    for (auto it = object.begin(); it != object.end(); ++it) {
        const QString key = prefix.isEmpty() ? it.key() : prefix + '.' + it.key();
        if (it.value().isObject())
            flatten(it.value().toObject(), key, out);
        else
            out.emplace_back(key, json_value_text(it.value()));
    }
}

std::vector<std::pair<QString, QString>> flat_config(const RunConfig& config) {
    const auto json = QJsonDocument::fromJson(QByteArray::fromStdString(config_to_json(config)));
    std::vector<std::pair<QString, QString>> out;
    flatten(json.object(), QString(), out);
    return out;
}

}  // namespace

std::vector<SettingDifference> compare_settings(const RunConfig& first, const RunConfig& second, bool onlyDifferent) {
    const auto a = flat_config(first);
    std::map<QString, QString> b;
    for (const auto& [key, value] : flat_config(second)) b[key] = value;
    std::vector<SettingDifference> result;
    for (const auto& [key, value] : a) {
        const QString other = b.count(key) ? b[key] : QString();
        if (!onlyDifferent || other != value) result.push_back({key, value, other});
    }
    return result;
}

SettingsDiffDialog::SettingsDiffDialog(const RunRecord& first, const RunRecord& second, QWidget* parent)
    : QDialog(parent), first_(first), second_(second) {
    setWindowTitle(tr("Compare settings: %1 vs %2").arg(first.name, second.name));
    resize(620, 460);
    auto* layout = new QVBoxLayout(this);
    auto* summary = new QLabel;
    summary->setObjectName(QStringLiteral("diffSummary"));
    const auto differences = compare_settings(first.config, second.config);
    summary->setText(differences.empty() ? tr("The two runs have identical settings.")
                                         : tr("%n setting(s) differ.", nullptr, static_cast<int>(differences.size())));
    layout->addWidget(summary);
    table_ = new QTableWidget;
    table_->setObjectName(QStringLiteral("diffTable"));
    table_->setColumnCount(3);
    table_->setHorizontalHeaderLabels({tr("Setting"), first.name, second.name});
    table_->verticalHeader()->hide();
    table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
    table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    table_->setAlternatingRowColors(true);
    layout->addWidget(table_, 1);
    show_all_ = new QCheckBox(tr("Show settings that are the same too"));
    connect(show_all_, &QCheckBox::toggled, this, &SettingsDiffDialog::fill);
    layout->addWidget(show_all_);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    layout->addWidget(buttons);
    fill();
}

void SettingsDiffDialog::fill() {
    const auto rows = compare_settings(first_.config, second_.config, !show_all_->isChecked());
    table_->setRowCount(static_cast<int>(rows.size()));
    for (int row = 0; row < static_cast<int>(rows.size()); ++row) {
        const auto& difference = rows[static_cast<std::size_t>(row)];
        const bool differs = difference.first != difference.second;
        int column = 0;
        for (const QString& text : {difference.key, difference.first, difference.second}) {
            auto* item = new QTableWidgetItem(text);
            if (differs) {
                QFont font = item->font();
                font.setBold(true);
                item->setFont(font);
            }
            table_->setItem(row, column++, item);
        }
    }
}

}  // namespace trainbench::ui
