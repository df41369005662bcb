#include "technique_comparison_dialog.hpp"

#include <QCloseEvent>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QSaveFile>
#include <QSplitter>
#include <QTableWidget>
#include <QThread>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <qcustomplot.h>

#include "run_palette.hpp"
#include "scatter_labels.hpp"
#include "trainbench/error.hpp"

namespace trainbench::ui {
namespace {

constexpr double kMarkerSize = 10;  // the points' diameter in pixels, which their labels keep clear of

enum Column { kTechnique, kChange, kClaimFaster, kClaimMemory, kUpdateMs, kTimeChange, kThroughput, kPeak, kPeakChange, kLoss, kColumns };

QString percent(double value) {
    if (!std::isfinite(value)) return QStringLiteral("–");
    return QStringLiteral("%1%2%").arg(value > 0 ? QStringLiteral("+") : QString()).arg(value, 0, 'f', 1);
}

}  // namespace

TechniqueComparisonDialog::TechniqueComparisonDialog(const RunConfig& base, std::shared_ptr<const Dataset> data,
                                                     QString cliProgram, QWidget* parent)
    : QDialog(parent), base_(base), data_(std::move(data)), cli_program_(std::move(cliProgram)) {
    setObjectName(QStringLiteral("techniqueComparisonDialog"));
    setWindowTitle(tr("Measure the efficiency techniques"));
    resize(1100, 720);
    auto* layout = new QVBoxLayout(this);
    status_ = new QLabel(tr("Each technique runs the current settings with one knob changed, for the same number "
                            "of updates. Times are medians over the updates after warm-up."));
    status_->setWordWrap(true);
    layout->addWidget(status_);

    table_ = new QTableWidget(0, kColumns);
    table_->setObjectName(QStringLiteral("comparisonTable"));
    table_->setHorizontalHeaderLabels({tr("Technique"), tr("Change"), tr("Claimed faster?"), tr("Claimed less memory?"),
                                       tr("ms/update"), tr("Time change"),
                                       base_.model == ModelFamily::gpt ? tr("tokens/s") : tr("samples/s"),
                                       tr("Peak memory"),
                                       tr("Memory change"), tr("Final loss")});
    table_->verticalHeader()->hide();
    table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    table_->setAlternatingRowColors(true);
    table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    table_->horizontalHeader()->setSectionResizeMode(kChange, QHeaderView::Stretch);

    plot_ = new QCustomPlot;
    plot_->setObjectName(QStringLiteral("comparisonScatter"));
    plot_->xAxis->setLabel(tr("median time per update (ms)"));
    plot_->yAxis->setLabel(tr("peak engine memory (MiB)"));
    plot_->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
    plot_->setMinimumHeight(240);
    connect(plot_, &QCustomPlot::afterLayout, this, &TechniqueComparisonDialog::placeLabels);

    auto* splitter = new QSplitter(Qt::Vertical);
    splitter->addWidget(table_);
    splitter->addWidget(plot_);
    splitter->setSizes({330, 330});
    layout->addWidget(splitter, 1);

    auto* buttons = new QHBoxLayout;
    stop_button_ = new QPushButton(tr("Stop"));
    connect(stop_button_, &QPushButton::clicked, this, [this] { *stop_ = true; });
    export_button_ = new QPushButton(tr("Export table…"));
    export_button_->setEnabled(false);
    connect(export_button_, &QPushButton::clicked, this, &TechniqueComparisonDialog::exportTable);
    auto* close = new QPushButton(tr("Close"));
    connect(close, &QPushButton::clicked, this, &QDialog::close);
    buttons->addStretch(1);
    buttons->addWidget(stop_button_);
    buttons->addWidget(export_button_);
    buttons->addWidget(close);
    layout->addLayout(buttons);
}

TechniqueComparisonDialog::~TechniqueComparisonDialog() {
    if (thread_) {
        *stop_ = true;
        thread_->wait();
        delete thread_;
    }
}

void TechniqueComparisonDialog::start() {
    if (thread_) return;
    ComparisonObserver observer;
    QPointer<TechniqueComparisonDialog> self(this);
    observer.on_run_start = [self](int index, int total, const ComparisonRow& row) {
        QMetaObject::invokeMethod(self, [self, index, total, row] { if (self) self->onRunStarted(index, total, row); },
                                  Qt::QueuedConnection);
    };
    observer.on_run_end = [self](int index, int total, const ComparisonRow& row) {
        QMetaObject::invokeMethod(self, [self, index, total, row] { if (self) self->onRunEnded(index, total, row); },
                                  Qt::QueuedConnection);
    };
    ComparisonOptions options;
    left_out_ = QString::fromStdString(add_process_rows(options, cli_program_.toStdString(), base_));
    thread_ = QThread::create([base = base_, data = data_, stop = stop_, result = result_, error = error_, observer,
                               options] {
        try {
            *result = compare_techniques(base, options, observer, stop.get(), data);
        } catch (const std::exception& e) {
            *error = QString::fromUtf8(e.what());
        }
    });
    connect(thread_, &QThread::finished, this, &TechniqueComparisonDialog::onAllDone);
    thread_->start();
}

void TechniqueComparisonDialog::onRunStarted(int index, int total, const ComparisonRow& row) {
    status_->setText(tr("Measuring %1 of %2: %3 (%4)…")
                         .arg(index + 1)
                         .arg(total)
                         .arg(QString::fromStdString(to_string(row.technique)), QString::fromStdString(row.change)));
}

void TechniqueComparisonDialog::onRunEnded(int, int, const ComparisonRow& row) {
    rows_.push_back(row);
    const int r = table_->rowCount();
    table_->insertRow(r);
    auto set = [&](int column, const QString& text, bool numeric = false) {
        auto* item = new QTableWidgetItem(text);
        if (numeric) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
        table_->setItem(r, column, item);
    };
    set(kTechnique, QString::fromStdString(to_string(row.technique)));
    set(kChange, row.ok ? QString::fromStdString(row.change_measured())
                        : tr("%1 — failed: %2").arg(QString::fromStdString(row.change), QString::fromStdString(row.error)));
    set(kClaimFaster, QString::fromStdString(row.claim.faster));
    set(kClaimMemory, QString::fromStdString(row.claim.less_memory));
    if (row.ok) {
        set(kUpdateMs, QString::number(row.median_update_ms, 'f', 2), true);
        set(kTimeChange, percent(row.update_time_change_pct), true);
        // A language model's throughput is counted in tokens, as nanoGPT and llm.c report it.
        const double throughput = row.tokens_per_sample > 0 ? row.tokens_per_second() : row.samples_per_second;
        set(kThroughput, QLocale().toString(throughput, 'f', 0), true);
        set(kPeak, QString::fromStdString(format_bytes(row.peak_memory_bytes)), true);
        set(kPeakChange, percent(row.peak_memory_change_pct), true);
        set(kLoss, QString::number(row.final_loss, 'g', 4), true);
    }
    refreshPlot();
}

void TechniqueComparisonDialog::refreshPlot() {
    plot_->clearGraphs();
    plot_->clearItems();
    labels_.clear();
    for (std::size_t i = 0; i < rows_.size(); ++i) {
        const auto& row = rows_[i];
        if (!row.ok) continue;
        auto* graph = plot_->addGraph();
        const QColor color = run_palette_color(static_cast<int>(i));
        graph->setLineStyle(QCPGraph::lsNone);
        graph->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, color, color, kMarkerSize));
        const double mib = static_cast<double>(row.peak_memory_bytes) / (1024.0 * 1024.0);
        graph->addData(row.median_update_ms, mib);
        auto* label = new QCPItemText(plot_);
        label->position->setType(QCPItemPosition::ptAbsolute);  // pixels, set by placeLabels
        label->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);
        label->setPadding(QMargins(0, 0, 0, 0));
        label->setText(QString::fromStdString(to_string(row.technique)));
        label->setColor(color.darker(140));
        label->setClipToAxisRect(false);
        auto* leader = new QCPItemLine(plot_);
        leader->start->setType(QCPItemPosition::ptAbsolute);
        leader->end->setType(QCPItemPosition::ptAbsolute);
        leader->setPen(QPen(color.darker(120), 1));
        leader->setVisible(false);
        labels_.push_back({row.median_update_ms, mib, label, leader});
    }
    plot_->rescaleAxes();
    plot_->xAxis->scaleRange(1.25);
    plot_->yAxis->scaleRange(1.25);
    plot_->replot(QCustomPlot::rpQueuedReplot);
}

void TechniqueComparisonDialog::placeLabels() {
    if (labels_.empty()) return;
    std::vector<QPointF> points;
    std::vector<QSizeF> sizes;
    for (const PointLabel& label : labels_) {
        points.emplace_back(plot_->xAxis->coordToPixel(label.x), plot_->yAxis->coordToPixel(label.y));
        sizes.push_back(QFontMetricsF(label.text->font()).size(0, label.text->text()) + QSizeF(2, 0));
    }
    const std::vector<LabelPlacement> placed = place_scatter_labels(points, sizes, plot_->axisRect()->rect(), kMarkerSize / 2);
    for (std::size_t i = 0; i < labels_.size(); ++i) {
        const QRectF& box = placed[i].box;
        labels_[i].text->position->setCoords(box.topLeft());
        labels_[i].leader->setVisible(placed[i].leader);
        if (placed[i].leader) {  // from the point to the nearest point of the label's box
            const QPointF p = points[i];
            labels_[i].leader->start->setCoords(p);
            labels_[i].leader->end->setCoords(std::clamp(p.x(), box.left(), box.right()),
                                              std::clamp(p.y(), box.top(), box.bottom()));
        }
    }
}

void TechniqueComparisonDialog::showRows(std::vector<ComparisonRow> rows) {
    table_->setRowCount(0);
    rows_.clear();
    for (const auto& row : rows) onRunEnded(0, 0, row);
}

void TechniqueComparisonDialog::onAllDone() {
    thread_->deleteLater();
    thread_ = nullptr;
    stop_button_->setEnabled(false);
    export_button_->setEnabled(!result_->empty());
    if (!result_->empty()) rows_ = *result_;  // the final rows carry the baseline-relative changes
    if (!error_->isEmpty())
        status_->setText(tr("The comparison could not run: %1").arg(*error_) +
                         (left_out_.isEmpty() ? QString() : tr(" Note: %1.").arg(left_out_)));
    else
        status_->setText(tr("Measured %n run(s). Changes are relative to the baseline.", nullptr,
                            static_cast<int>(rows_.size())) +
                         (left_out_.isEmpty() ? QString() : tr(" Note: %1.").arg(left_out_)));
    // Rebuild the table from the final rows: changes against the baseline are only known now.
    showRows(std::move(rows_));
    emit finished();
}

void TechniqueComparisonDialog::exportTable() {
    const QString path = QFileDialog::getSaveFileName(this, tr("Export comparison"), QStringLiteral("techniques.md"),
                                                      tr("Markdown (*.md);;CSV (*.csv)"));
    if (path.isEmpty()) return;
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly | QIODevice::Text)) return;
    const std::string text = path.endsWith(QStringLiteral(".csv"), Qt::CaseInsensitive) ? comparison_to_csv(rows_)
                                                                                         : comparison_to_markdown(rows_);
    file.write(QByteArray::fromStdString(text));
    if (!file.commit()) status_->setText(tr("Could not write %1: %2").arg(path, file.errorString()));
}

void TechniqueComparisonDialog::closeEvent(QCloseEvent* event) {
    *stop_ = true;
    QDialog::closeEvent(event);
}

}  // namespace trainbench::ui
