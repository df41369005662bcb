#include "runs_table.hpp"

#include <QHeaderView>
#include <QKeyEvent>
#include <QPainter>
#include <QPixmap>
#include <cmath>
#include <set>

#include "run_store.hpp"
#include "run_throughput.hpp"

namespace trainbench::ui {
namespace {

QIcon swatch(const QColor& color) {
    QPixmap pixmap(14, 14);
    pixmap.fill(Qt::transparent);
    QPainter painter(&pixmap);
    painter.setRenderHint(QPainter::Antialiasing);
    painter.setBrush(color);
    painter.setPen(color.darker(130));
    painter.drawRoundedRect(QRectF(1, 1, 12, 12), 3, 3);
    return QIcon(pixmap);
}

QString number_or_dash(double value, int precision) {
    return std::isfinite(value) ? QString::number(value, 'g', precision) : QStringLiteral("–");
}

QTableWidgetItem* read_only_item() {
    auto* item = new QTableWidgetItem;
    item->setFlags(Qt::ItemIsSelectable | Qt::ItemIsEnabled);
    return item;
}

}  // namespace

RunsTable::RunsTable(RunStore& store, QWidget* parent) : QTableWidget(parent), store_(store) {
    setObjectName(QStringLiteral("runsTable"));
    setColumnCount(kColumnCount);
    setHorizontalHeaderLabels({tr("Show"), tr("Name"), tr("State"), tr("Settings"), tr("Updates"), tr("Final loss"),
                               tr("Val. acc."), tr("Time"), tr("Tokens/s"), tr("MFU"), tr("Peak memory")});
    horizontalHeaderItem(kShown)->setToolTip(tr("Show or hide this run on every plot"));
    horizontalHeaderItem(kPeakMemory)->setToolTip(tr("Largest memory the engine's allocator held (live + cached)"));
    horizontalHeaderItem(kValAccuracy)->setToolTip(
        tr("Validation accuracy at the last evaluation (language models: share of next tokens predicted right)"));
    horizontalHeaderItem(kTokensPerSecond)
        ->setToolTip(tr("Language models: tokens trained on per second of update time, over the later half of the "
                        "run's updates (the first half, with its warm-up, is left out; evaluations are not "
                        "counted). Empty for models that do not read tokens."));
    horizontalHeaderItem(kMfu)->setToolTip(
        tr("Model FLOPs utilisation over the later half of the run's updates: the model's FLOPs per second "
           "(forward + backward) as a share of the peak measured on the run's device. Hover a cell for the "
           "peak and where it came from; empty when no peak is known."));
    verticalHeader()->hide();
    verticalHeader()->setDefaultSectionSize(fontMetrics().height() + 8);
    setSelectionBehavior(QAbstractItemView::SelectRows);
    setSelectionMode(QAbstractItemView::ExtendedSelection);
    setEditTriggers(QAbstractItemView::DoubleClicked | QAbstractItemView::EditKeyPressed);
    setAlternatingRowColors(true);
    setShowGrid(false);
    setWordWrap(false);
    auto* header = horizontalHeader();
    header->setHighlightSections(false);
    header->setSectionResizeMode(QHeaderView::Interactive);
    header->setSectionResizeMode(kSettings, QHeaderView::Stretch);
    header->setDefaultAlignment(Qt::AlignLeft | Qt::AlignVCenter);
    setColumnWidth(kShown, 56);
    setColumnWidth(kName, 110);
    setColumnWidth(kState, 70);
    setColumnWidth(kUpdates, 80);
    setColumnWidth(kFinalLoss, 84);
    setColumnWidth(kValAccuracy, 76);
    setColumnWidth(kTime, 72);
    setColumnWidth(kTokensPerSecond, 84);
    setColumnWidth(kMfu, 64);
    setColumnWidth(kPeakMemory, 96);

    connect(&store_, &RunStore::runAdded, this, &RunsTable::addRow);
    connect(&store_, &RunStore::runChanged, this, &RunsTable::updateRow);
    connect(&store_, &RunStore::runRemoved, this, [this](int id) {
        later_half_.erase(id);
        if (const int row = rowOf(id); row >= 0) removeRow(row);
    });
    connect(&store_, &RunStore::visibilityChanged, this, [this](int id, bool visible) {
        if (const int row = rowOf(id); row >= 0) {
            const bool was_updating = std::exchange(updating_, true);
            item(row, kShown)->setCheckState(visible ? Qt::Checked : Qt::Unchecked);
            updating_ = was_updating;
        }
    });
    connect(this, &QTableWidget::itemChanged, this, &RunsTable::onItemChanged);
    connect(this, &QTableWidget::itemSelectionChanged, this, [this] {
        const auto ids = selectedRunIds();
        emit selectionSizeChanged(static_cast<int>(ids.size()));
        if (!ids.empty()) emit focusRunChanged(ids.back());
    });
}

int RunsTable::rowOf(int id) const {
    for (int row = 0; row < rowCount(); ++row)
        if (item(row, kShown) && item(row, kShown)->data(Qt::UserRole).toInt() == id) return row;
    return -1;
}

std::vector<int> RunsTable::selectedRunIds() const {
    std::set<int> rows;
    for (const auto& index : selectionModel()->selectedRows()) rows.insert(index.row());
    std::vector<int> ids;
    for (int row : rows) ids.push_back(item(row, kShown)->data(Qt::UserRole).toInt());
    return ids;
}

void RunsTable::addRow(int id) {
    const auto* run = store_.find(id);
    if (!run) return;
    const bool was_updating = std::exchange(updating_, true);
    const int row = rowCount();
    insertRow(row);
    auto* shown = new QTableWidgetItem;
    shown->setFlags(Qt::ItemIsUserCheckable | Qt::ItemIsEnabled | Qt::ItemIsSelectable);
    shown->setCheckState(run->visible ? Qt::Checked : Qt::Unchecked);
    shown->setIcon(swatch(run->color));
    shown->setData(Qt::UserRole, id);
    setItem(row, kShown, shown);
    auto* name = new QTableWidgetItem(run->name);
    name->setFlags(Qt::ItemIsEditable | Qt::ItemIsEnabled | Qt::ItemIsSelectable);
    name->setToolTip(tr("Double-click to rename"));
    setItem(row, kName, name);
    for (int column = kState; column < kColumnCount; ++column) setItem(row, column, read_only_item());
    for (int column : {kUpdates, kFinalLoss, kValAccuracy, kTime, kTokensPerSecond, kMfu, kPeakMemory})
        item(row, column)->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    updating_ = was_updating;
    updateRow(id);
    scrollToItem(name);
}

void RunsTable::updateRow(int id) {
    const int row = rowOf(id);
    const auto* run = store_.find(id);
    if (row < 0 || !run) return;
    const bool was_updating = std::exchange(updating_, true);
    if (item(row, kName)->text() != run->name && !isPersistentEditorOpen(item(row, kName)))
        item(row, kName)->setText(run->name);
    auto* state = item(row, kState);
    state->setText(to_display_string(run->state));
    state->setToolTip(run->message);
    state->setForeground(run->state == RunState::failed ? QColor(0xb3261e) : palette().color(QPalette::Text));
    item(row, kSettings)->setText(key_settings_text(run->config));
    item(row, kSettings)->setToolTip(key_settings_text(run->config));
    const int64_t updates = run->steps.empty() ? 0 : run->steps.back().update;
    const int64_t planned = run->plan ? run->plan->total_updates : 0;
    item(row, kUpdates)->setText(planned > 0 && run->state == RunState::running
                                     ? QStringLiteral("%1/%2").arg(updates).arg(planned)
                                     : QString::number(updates));
    item(row, kFinalLoss)->setText(number_or_dash(run->final_loss(), 4));
    const double accuracy = run->final_val_accuracy();
    item(row, kValAccuracy)->setText(std::isfinite(accuracy) ? QString::number(accuracy * 100, 'f', 1) + "%"
                                                             : QStringLiteral("–"));
    item(row, kTime)->setText(format_duration(run->elapsed_seconds()));
    const LaterHalf& later = laterHalf(*run);
    auto* tokens = item(row, kTokensPerSecond);
    if (later.tokens_per_sample <= 0) {
        tokens->setText({});
        tokens->setToolTip(tr("Not a language model: no tokens"));
    } else {
        const bool measured = later.seconds > 0;
        tokens->setText(measured ? QLocale().toString(later.tokens / later.seconds, 'f', 0) : QStringLiteral("–"));
        const QString over = tr("Tokens per second (update time only) over updates %1–%2 (%3 tokens per sample)");
        tokens->setToolTip(measured ? over.arg(later.begin + 1).arg(later.end).arg(later.tokens_per_sample) : QString());
    }
    auto* mfu = item(row, kMfu);
    const QString source = peak_source_text(*run);
    if (later.mfu_covered > 0) {
        mfu->setText(mfu_text(later.mfu_seconds / later.mfu_covered));
        mfu->setToolTip(
            tr("MFU over updates %1–%2 against the peak of %3").arg(later.begin + 1).arg(later.end).arg(source));
    } else {
        mfu->setText({});
        mfu->setToolTip(run->steps.empty() ? QString()
                                           : source.isEmpty() ? tr("No measured peak for this run's device")
                                                              : tr("No MFU (%1)").arg(source));
    }
    const int64_t peak = run->peak_memory_bytes();
    item(row, kPeakMemory)->setText(peak > 0 ? QString::fromStdString(format_bytes(peak)) : QStringLiteral("–"));
    updating_ = was_updating;
}

RunsTable::LaterHalf& RunsTable::laterHalf(const RunRecord& run) {
    LaterHalf& later = later_half_[run.id];
    const int64_t tokens_per_sample = run_tokens_per_sample(run);
    if (later.tokens_per_sample != tokens_per_sample || later.end > run.steps.size())
        later = LaterHalf{0, 0, tokens_per_sample};
    auto add = [&](const StepMetrics& step, double sign) {
        const double seconds = step.update_ms / 1000.0;
        later.seconds += sign * seconds;
        later.tokens += sign * step_tokens_per_second(step, tokens_per_sample) * seconds;
        if (std::isfinite(step.mfu)) {
            later.mfu_seconds += sign * step.mfu * seconds;
            later.mfu_covered += sign * seconds;
        }
    };
    while (later.end < run.steps.size()) add(run.steps[later.end++], 1.0);
    while (later.begin < run.steps.size() / 2) add(run.steps[later.begin++], -1.0);
    if (later.begin == later.end) later = LaterHalf{later.begin, later.end, tokens_per_sample};
    return later;
}

void RunsTable::onItemChanged(QTableWidgetItem* changed) {
    if (updating_) return;
    const int id = item(changed->row(), kShown)->data(Qt::UserRole).toInt();
    if (changed->column() == kShown) store_.setVisible(id, changed->checkState() == Qt::Checked);
    if (changed->column() == kName) {
        store_.rename(id, changed->text());
        if (const auto* run = store_.find(id); run && changed->text() != run->name) {
            const bool was_updating = std::exchange(updating_, true);
            changed->setText(run->name);  // an empty name is refused
            updating_ = was_updating;
        }
    }
}

void RunsTable::keyPressEvent(QKeyEvent* event) {
    if (event->key() == Qt::Key_Delete && state() != QAbstractItemView::EditingState) {
        const auto ids = selectedRunIds();
        if (!ids.empty()) emit deleteRequested(ids);
        return;
    }
    QTableWidget::keyPressEvent(event);
}

}  // namespace trainbench::ui
