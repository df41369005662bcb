#include "dataset_field_control.hpp"

#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>

namespace trainbench::ui {
namespace {

// Entries whose data is one of these open a dialog; the chosen path is appended.
const QString kCsv = QStringLiteral("csv:");
const QString kIdx = QStringLiteral("idx:");
const QString kText = QStringLiteral("text:");

bool is_chooser(const QString& data) { return data == kCsv || data == kIdx || data == kText; }

}  // namespace

DatasetFieldControl::DatasetFieldControl(const ConfigField& field) : FieldControl(field), combo_(new QComboBox) {
    combo_->setObjectName(QString::fromStdString(field.key));
    connect(combo_, &QComboBox::activated, this, &DatasetFieldControl::onActivated);
    // A named set picked without the popup (keyboard, tests) counts as chosen too; the
    // file entries wait for activated(), which opens their dialog.
    connect(combo_, &QComboBox::currentIndexChanged, this, [this](int index) {
        const QString data = combo_->itemData(index).toString();
        if (index < 0 || is_chooser(data) || data == selected_) return;
        selected_ = data;
        emit edited();
    });
}

QWidget* DatasetFieldControl::widget() const { return combo_; }

void DatasetFieldControl::listFamily(ModelFamily family) {
    if (listed_ == family) return;
    listed_ = family;
    combo_->clear();
    if (family == ModelFamily::gpt) {
        combo_->addItem(tr("King James Bible (kjv, 4.3 MB of text)"), QStringLiteral("kjv"));
        combo_->addItem(tr("Text file…"), kText);
    } else if (family == ModelFamily::cnn) {
        combo_->addItem(tr("Fashion-MNIST (28×28, 10 classes)"), QStringLiteral("fashion-mnist"));
        combo_->addItem(tr("IDX folder…"), kIdx);
    } else {
        combo_->addItem(tr("Spirals (2-D, 3 classes)"), QStringLiteral("spirals"));
        combo_->addItem(tr("Moons (2-D, 2 classes)"), QStringLiteral("moons"));
        combo_->addItem(tr("Blobs (2-D, 4 classes)"), QStringLiteral("blobs"));
        combo_->addItem(tr("Sine (regression)"), QStringLiteral("sine"));
        combo_->addItem(tr("Fashion-MNIST (28×28, 10 classes)"), QStringLiteral("fashion-mnist"));
        combo_->addItem(tr("CSV file…"), kCsv);
        combo_->addItem(tr("IDX folder…"), kIdx);
    }
}

void DatasetFieldControl::select(const QString& spec) {
    selected_ = spec;
    int index = combo_->findData(spec);
    if (index < 0) {
        // A file chosen earlier (or a set of the other family, which validation then names):
        // list it just above the first chooser entry.
        int chooser = 0;
        while (chooser < combo_->count() && !is_chooser(combo_->itemData(chooser).toString())) ++chooser;
        const int colon = spec.indexOf(QLatin1Char(':'));
        const QString path = colon > 0 ? spec.mid(colon + 1) : QString();
        const QString label = path.isEmpty() ? spec : QStringLiteral("%1: %2").arg(spec.left(colon).toUpper(),
                                                                                  QFileInfo(path).fileName());
        combo_->insertItem(chooser, label, spec);
        if (!path.isEmpty()) combo_->setItemData(chooser, path, Qt::ToolTipRole);
        index = chooser;
    }
    combo_->setCurrentIndex(index);
}

void DatasetFieldControl::load(const RunConfig& config) {
    const QSignalBlocker blocker(combo_);
    listFamily(config.model);
    select(QString::fromStdString(config.dataset));
}

QString DatasetFieldControl::store(RunConfig& config) const {
    config.dataset = selected_.toStdString();
    return {};
}

void DatasetFieldControl::onActivated(int index) {
    const QString data = combo_->itemData(index).toString();
    QString spec = data;
    if (is_chooser(data)) {
        QString path;
        if (data == kIdx)
            path = QFileDialog::getExistingDirectory(combo_, tr("Folder with IDX files"));
        else if (data == kCsv)
            path = QFileDialog::getOpenFileName(combo_, tr("Open CSV data"), QString(),
                                                tr("CSV files (*.csv);;All files (*)"));
        else
            path = QFileDialog::getOpenFileName(combo_, tr("Open a text to train on"), QString(),
                                                tr("Text files (*.txt);;All files (*)"));
        if (path.isEmpty()) {
            select(selected_);  // cancelled: back to the data in use
            return;
        }
        spec = data + path;
    }
    if (spec == selected_) return;
    select(spec);
    emit edited();
}

}  // namespace trainbench::ui
