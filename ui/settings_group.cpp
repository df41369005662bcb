#include "settings_group.hpp"

#include <QGridLayout>
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

// A grid rather than a QFormLayout: Qt 6.4's QFormLayout::setRowVisible corrupted memory
// (valgrind: invalid writes in QFormLayout's heightForWidth) once the form grew by LoRA's and the
// CNN's rows; a grid of label, field and error line shows and hides plain widgets, and its empty
// rows take no space.
SettingsGroup::SettingsGroup(const QString& title, QWidget* parent) : QGroupBox(title, parent) {
    grid_ = new QGridLayout(this);
    grid_->setHorizontalSpacing(10);
    grid_->setVerticalSpacing(4);
    grid_->setColumnStretch(1, 1);
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
    const int row = grid_->rowCount();
    grid_->addWidget(label, row, 0, Qt::AlignRight | Qt::AlignVCenter);
    grid_->addWidget(widget, row, 1);
    labels_[control] = label;

    auto* error = new QLabel;
    error->setObjectName(QStringLiteral("error_") + QString::fromStdString(field.key));
    error->setWordWrap(true);
    error->setStyleSheet(kErrorStyle);
    error->hide();
    grid_->addWidget(error, row + 1, 0, 1, 2);
    errors_[field.key] = error;
    controls_.push_back(control);
    return control;
}

void SettingsGroup::addNote(QWidget* note) { grid_->addWidget(note, grid_->rowCount(), 0, 1, 2); }

void SettingsGroup::showRowsFor(const RunConfig& config) {
    bool any = false;
    for (FieldControl* control : controls_) {
        const ConfigField& field = control->field();
        const bool applies = field.applies_to(config.model) && field.condition_holds(config);
        control->widget()->setVisible(applies);
        labels_.at(control)->setVisible(applies);
        QLabel* error = errors_.at(field.key);
        error->setVisible(applies && !error->text().isEmpty());
        any = any || applies;
    }
    setVisible(any);
}

bool SettingsGroup::showError(const std::string& key, const QString& message) {
    auto it = errors_.find(key);
    if (it == errors_.end()) return false;
    it->second->setText(message);
    it->second->show();
    return true;
}

void SettingsGroup::clearErrors() {
    for (auto& [key, label] : errors_) {
        label->clear();
        label->hide();
    }
}

}  // namespace trainbench::ui
