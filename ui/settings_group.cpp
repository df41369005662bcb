#include "settings_group.hpp"

#include <QFormLayout>
#include <QLabel>

namespace trainbench::ui {
namespace {

const char* const kErrorStyle = "color: #b3261e;";

// What the field does (the long explanation where there is one), then where else it lives.
QString tooltip_of(const ConfigField& field) {
    QString text = QString::fromStdString(field.details.empty() ? field.help : field.details);
    if (field.range && !field.range->hint.empty()) text += QStringLiteral(" (%1)").arg(QString::fromStdString(field.range->hint));
    QString where = QObject::tr("JSON: %1").arg(QString::fromStdString(field.key));
    if (!field.flag.empty()) where = QObject::tr("CLI: %1 · ").arg(QString::fromStdString(field.flag)) + where;
    return text + QStringLiteral("\n\n") + where;
}

}  // namespace

SettingsGroup::SettingsGroup(const QString& title, QWidget* parent) : QGroupBox(title, parent) {
    form_ = new QFormLayout(this);
    form_->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
    form_->setLabelAlignment(Qt::AlignRight | Qt::AlignVCenter);
    form_->setHorizontalSpacing(10);
    form_->setVerticalSpacing(4);
}

FieldControl* SettingsGroup::addField(std::unique_ptr<FieldControl> owned) {
    FieldControl* control = owned.release();
    control->setParent(this);
    const ConfigField& field = control->field();
    QWidget* widget = control->widget();
    const QString tooltip = tooltip_of(field);
    auto* label = new QLabel(QString::fromStdString(field.label));
    label->setToolTip(tooltip);
    label->setBuddy(widget);
    widget->setToolTip(tooltip);
    for (auto* child : widget->findChildren<QWidget*>()) child->setToolTip(tooltip);
    form_->addRow(label, widget);

    auto* error = new QLabel;
    error->setObjectName(QStringLiteral("error_") + QString::fromStdString(field.key));
    error->setWordWrap(true);
    error->setStyleSheet(kErrorStyle);
    error->hide();
    form_->addRow(error);
    errors_[field.key] = error;
    controls_.push_back(control);
    return control;
}

void SettingsGroup::addNote(QWidget* note) { form_->addRow(note); }

void SettingsGroup::showRowsFor(const RunConfig& config) {
    bool any = false;
    for (FieldControl* control : controls_) {
        const ConfigField& field = control->field();
        const bool applies = field.applies_to(config.model) && field.condition_holds(config);
        form_->setRowVisible(control->widget(), applies);
        QLabel* error = errors_.at(field.key);
        form_->setRowVisible(error, applies && !error->text().isEmpty());
        any = any || applies;
    }
    setVisible(any);
}

bool SettingsGroup::showError(const std::string& key, const QString& message) {
    auto it = errors_.find(key);
    if (it == errors_.end()) return false;
    it->second->setText(message);
    form_->setRowVisible(it->second, true);
    it->second->show();
    return true;
}

void SettingsGroup::clearErrors() {
    for (auto& [key, label] : errors_) {
        label->clear();
        label->hide();
        form_->setRowVisible(label, false);
    }
}

}  // namespace trainbench::ui
