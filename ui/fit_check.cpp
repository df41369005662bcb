#include "fit_check.hpp"

#include <QComboBox>
#include <QDialog>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QTableWidget>
#include <QVBoxLayout>
#include <cmath>

#include "trainbench/error.hpp"
#include "trainbench/memory_fit.hpp"
#include "trainbench/trainer.hpp"

namespace trainbench::ui {

namespace {
QString q(const std::string& s) { return QString::fromStdString(s); }
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
}  // namespace

FitCheck::FitCheck(QWidget* parent) : QWidget(parent) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    auto* row = new QHBoxLayout;
    row->addWidget(new QLabel(tr("Will it fit? Plan for:")));
    target_ = new QComboBox;
    target_->setObjectName(QStringLiteral("fitTarget"));
    target_->addItem(tr("this device"), QStringLiteral("configured"));
    target_->addItem(tr("a CUDA GPU with"), QStringLiteral("cuda"));
    target_->addItem(tr("a CPU machine with"), QStringLiteral("cpu"));
    row->addWidget(target_);
    memory_ = new QDoubleSpinBox;
    memory_->setObjectName(QStringLiteral("fitMemoryGiB"));
    memory_->setRange(0.25, 4096.0);
    memory_->setDecimals(2);
    memory_->setValue(24.0);
    memory_->setSuffix(tr(" GiB"));
    row->addWidget(memory_);
    what_if_ = new QPushButton(tr("What if…"));
    what_if_->setObjectName(QStringLiteral("fitWhatIf"));
    what_if_->setToolTip(tr("Plan each efficiency knob and their combinations for this device, with the largest "
                            "micro-batch that fits"));
    row->addStretch(1);
    layout->addLayout(row);
    verdict_ = new QLabel;
    verdict_->setObjectName(QStringLiteral("fitVerdict"));
    verdict_->setWordWrap(true);
    verdict_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(verdict_);
    // Under the verdict, where the narrow settings panel keeps it in view.
    auto* button_row = new QHBoxLayout;
    button_row->addWidget(what_if_);
    button_row->addStretch(1);
    layout->addLayout(button_row);
    connect(target_, &QComboBox::currentIndexChanged, this, [this] { refresh(); });
    connect(memory_, &QDoubleSpinBox::valueChanged, this, [this] { refresh(); });
    connect(what_if_, &QPushButton::clicked, this, [this] { showWhatIf(); });
    refresh();
}

void FitCheck::setRun(const RunConfig& config, std::shared_ptr<const Dataset> data) {
    config_ = config;
    data_ = std::move(data);
    refresh();
}

RunConfig FitCheck::plannedConfig() const {
    RunConfig config = config_.value_or(RunConfig{});
    const QString target = target_->currentData().toString();
    if (target == "cuda" && config.device.rfind("cuda", 0) != 0) config.device = "cuda";
    if (target == "cpu") config.device = "cpu";
    return config;
}

QString FitCheck::verdict() const { return verdict_->text(); }

bool FitCheck::otherDevice() const { return target_->currentData().toString() != "configured"; }

DeviceBudget FitCheck::budgetFor(const RunConfig& planned) const {
    return device_budget(planned, otherDevice() ? static_cast<int64_t>(std::llround(memory_->value() * kGiB)) : 0);
}

void FitCheck::refresh() {
    memory_->setEnabled(otherDevice());
    what_if_->setEnabled(config_ && data_);
    if (!config_ || !data_) {
        verdict_->clear();
        return;
    }
    const RunConfig config = plannedConfig();
    try {
        const RunPlan plan = plan_run(config, *data_);
        const DeviceBudget budget = budgetFor(config);
        const int64_t needed = needed_bytes(config, plan, budget);
        QString text = tr("Planned, nothing run: needs %1 on %2").arg(q(format_bytes(needed)), q(budget.description));
        if (budget.fixed_bytes > 0)
            text += tr(" (the plan %1 + the CUDA context %2, as measured on an H200)")
                        .arg(q(format_bytes(plan.planned_total())), q(format_bytes(budget.fixed_bytes)));
        if (!budget.known())
            text += tr(": its memory is unknown, choose a size.");
        else if (budget.fits(needed))
            text += tr(": fits, %1 to spare.").arg(q(format_bytes(budget.memory_bytes - needed)));
        else
            text += tr(": does not fit, short by %1. What if… shows which knobs make it fit.")
                        .arg(q(format_bytes(needed - budget.memory_bytes)));
        verdict_->setText(text);
    } catch (const Error& e) {
        verdict_->setText(tr("Cannot plan for this device: %1").arg(QString::fromUtf8(e.what())));
    }
}

void FitCheck::showWhatIf() {
    if (!config_ || !data_) return;
    const RunConfig config = plannedConfig();
    const DeviceBudget budget = budgetFor(config);
    const std::vector<WhatIfRow> rows = what_if_table(config, *data_, budget);

    QDialog dialog(this);
    dialog.setObjectName(QStringLiteral("whatIfDialog"));
    dialog.setWindowTitle(tr("What if: %1").arg(q(budget.description)));
    auto* layout = new QVBoxLayout(&dialog);
    auto* note = new QLabel(tr("Planned for %1, nothing was run. Per process: the bytes TrainBench's engine allocates "
                               "at the peak of an update; needed adds the processes sharing the machine and the CUDA "
                               "context. ★ marks the least memory among the rows that train the same update.")
                                .arg(q(budget.description)));
    note->setWordWrap(true);
    layout->addWidget(note);
    auto* table = new QTableWidget(static_cast<int>(rows.size()), 6);
    table->setObjectName(QStringLiteral("whatIfTable"));
    table->setHorizontalHeaderLabels(
        {tr("What if"), tr("Micro-batch"), tr("Per process"), tr("Needed"), tr("Fits"), tr("Largest micro-batch that fits")});
    table->verticalHeader()->hide();
    table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    for (int r = 0; r < static_cast<int>(rows.size()); ++r) {
        const WhatIfRow& row = rows[static_cast<size_t>(r)];
        auto set = [&](int column, const QString& text) { table->setItem(r, column, new QTableWidgetItem(text)); };
        set(0, q(row.change) + (row.smallest ? QStringLiteral(" ★") : QString()));
        if (!row.error.empty()) {
            set(4, tr("cannot run: %1").arg(q(row.error)));
            continue;
        }
        const bool judged = budget.known();
        set(1, QString::number(row.micro_batch));
        set(2, q(format_bytes(row.planned_bytes)));
        set(3, q(format_bytes(row.needed)));
        set(4, !judged ? tr("?") : row.fits ? tr("yes") : tr("no"));
        set(5, !judged                            ? tr("?")
               : row.largest_fitting_micro_batch ? tr("%1 (step_size %2)").arg(row.largest_fitting_micro_batch).arg(row.step_size_for_largest)
                                                 : tr("none"));
    }
    table->resizeColumnsToContents();
    table->horizontalHeader()->setStretchLastSection(true);
    layout->addWidget(table);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close);
    connect(buttons, &QDialogButtonBox::rejected, &dialog, &QDialog::reject);
    layout->addWidget(buttons);
    dialog.resize(860, 560);
    dialog.exec();
}

}  // namespace trainbench::ui
