#include "samples_panel.hpp"

#include <QFontDatabase>
#include <QLabel>
#include <QPlainTextEdit>
#include <QScrollBar>
#include <QSplitter>
#include <QTextBlock>
#include <QTextCursor>
#include <QTextDocument>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "run_record.hpp"
#include "run_store.hpp"

namespace trainbench::ui {

SamplesPanel::SamplesPanel(const RunStore& store, QWidget* parent) : QWidget(parent), store_(store) {
    setObjectName(QStringLiteral("samplesPanel"));
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 0);
    layout->setSpacing(4);

    title_ = new QLabel;
    title_->setObjectName(QStringLiteral("samplesTitle"));
    title_->setTextFormat(Qt::RichText);
    title_->setWordWrap(true);
    layout->addWidget(title_);

    hint_ = new QLabel;
    hint_->setObjectName(QStringLiteral("samplesHint"));
    hint_->setWordWrap(true);
    hint_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
    hint_->setMargin(8);
    hint_->setForegroundRole(QPalette::PlaceholderText);
    layout->addWidget(hint_, 1);

    view_ = new QPlainTextEdit;
    view_->setObjectName(QStringLiteral("samplesView"));
    view_->setReadOnly(true);
    view_->setUndoRedoEnabled(false);
    view_->setLineWrapMode(QPlainTextEdit::WidgetWidth);
    view_->setWordWrapMode(QTextOption::WrapAtWordBoundaryOrAnywhere);
    view_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    view_->setTextInteractionFlags(Qt::TextSelectableByMouse | Qt::TextSelectableByKeyboard);
    view_->setToolTip(tr("Text the model generated at each evaluation, newest on top."));
    layout->addWidget(view_, 1);

    connect(&store_, &RunStore::samplesAppended, this, &SamplesPanel::onSamplesAppended);
    connect(&store_, &RunStore::runChanged, this, &SamplesPanel::onRunChanged);
    connect(&store_, &RunStore::runRemoved, this, &SamplesPanel::onRunRemoved);
    connect(&store_, &RunStore::runAdded, this, &SamplesPanel::updateVisibility);

    render();
    hide();  // explicitly, so a splitter it joins leaves it hidden until a language-model run comes
    updateVisibility();
}

void SamplesPanel::showRun(int id) {
    if (id == run_id_ && store_.find(id)) return;
    run_id_ = store_.find(id) ? id : 0;
    render();
}

QString SamplesPanel::title() const { return title_->text(); }
QString SamplesPanel::text() const { return view_->toPlainText(); }
QString SamplesPanel::hint() const { return hint_->text(); }
bool SamplesPanel::hintShown() const { return !hint_->isHidden(); }

std::vector<int64_t> SamplesPanel::shownUpdates() const {
    std::vector<int64_t> updates;
    for (const auto& shown : shown_) updates.push_back(shown.update);
    return updates;
}

void SamplesPanel::updateVisibility() {
    // Only language models generate text: an MLP-only session keeps the plots' full width.
    const auto& runs = store_.runs();
    const bool wanted = std::any_of(runs.begin(), runs.end(), [](const auto& run) {
        return run->config.model == ModelFamily::gpt || !run->samples.empty();
    });
    if (wanted == !isHidden()) return;
    setVisible(wanted);
    // A splitter would give a widget that appears only its minimum width: take a quarter.
    auto* splitter = qobject_cast<QSplitter*>(parentWidget());
    if (!wanted || !splitter) return;
    QList<int> sizes = splitter->sizes();
    const int index = splitter->indexOf(this);
    int total = 0;
    for (int size : sizes) total += size;
    if (total <= 0) total = 4 * kPreferredWidth;  // not laid out yet: proportions are what count
    const int others = total - sizes[index];
    const int width = total / 4;
    for (int i = 0; i < sizes.size(); ++i)
        sizes[i] = i == index ? width : (others > 0 ? sizes[i] * (total - width) / others : (total - width));
    splitter->setSizes(sizes);
}

void SamplesPanel::onSamplesAppended(int id, qsizetype first) {
    updateVisibility();
    if (id != run_id_) return;
    const RunRecord* run = store_.find(id);
    if (!run) return;
    if (first < 0 || static_cast<std::size_t>(first) > run->samples.size()) return;
    const auto begin = std::max<qsizetype>(first, static_cast<qsizetype>(run->samples.size()) - kMaxShownSamples);
    QScrollBar* scroll = view_->verticalScrollBar();
    const int old_value = scroll->value();
    const int old_maximum = scroll->maximum();
    QTextCursor cursor(view_->document());
    cursor.beginEditBlock();
    for (auto i = static_cast<std::size_t>(begin); i < run->samples.size(); ++i) prepend(*run, run->samples[i]);
    while (shown_.size() > static_cast<std::size_t>(kMaxShownSamples)) dropOldest();
    cursor.endEditBlock();
    // Reading further down keeps the same text in view; at the top the new sample shows.
    if (old_value > scroll->minimum()) scroll->setValue(old_value + (scroll->maximum() - old_maximum));
    else scroll->setValue(scroll->minimum());
    updateTitle();
    updateHint();
}

void SamplesPanel::onRunChanged(int id) {
    if (id != run_id_) return;
    updateTitle();
    updateHint();
}

void SamplesPanel::onRunRemoved(int id) {
    updateVisibility();
    if (id != run_id_) return;
    run_id_ = store_.latestRunId();
    render();
}

void SamplesPanel::render() {
    view_->clear();
    shown_.clear();
    if (const RunRecord* run = store_.find(run_id_)) {
        const std::size_t count = run->samples.size();
        const std::size_t begin = count > static_cast<std::size_t>(kMaxShownSamples) ? count - kMaxShownSamples : 0;
        QTextCursor cursor(view_->document());
        cursor.beginEditBlock();
        for (std::size_t i = begin; i < count; ++i) prepend(*run, run->samples[i]);
        cursor.endEditBlock();
    }
    view_->verticalScrollBar()->setValue(0);
    updateTitle();
    updateHint();
}

void SamplesPanel::updateTitle() {
    const RunRecord* run = store_.find(run_id_);
    if (!run) {
        title_->setText(tr("<b>Text samples</b>"));
        return;
    }
    QString text = tr("<span style=\"color:%1\">■</span> <b>%2</b> · ").arg(run->color.name(), run->name.toHtmlEscaped());
    const auto count = static_cast<qsizetype>(run->samples.size());
    if (count > kMaxShownSamples)
        text += tr("newest %1 of %L2 text samples").arg(kMaxShownSamples).arg(count);
    else if (count == 1)
        text += tr("1 text sample");
    else if (count > 1)
        text += tr("%L1 text samples").arg(count);
    else
        text += tr("text samples");
    title_->setText(text);
}

void SamplesPanel::updateHint() {
    const RunRecord* run = store_.find(run_id_);
    QString hint;
    if (!run || run->samples.empty()) {
        if (!run || run->config.model != ModelFamily::gpt) {
            hint = tr("Text samples appear here for GPT runs at each evaluation.");
        } else if (run->config.sample_chars <= 0) {
            hint = tr("This run generates no text: its sample length is 0.");
        } else if (run->state == RunState::running) {
            hint = run->config.eval_every > 0
                       ? tr("The first sample appears at the first evaluation, after update %L1.").arg(run->config.eval_every)
                       : tr("The first sample appears at the end of the first epoch.");
        } else {
            hint = tr("This run ended before its first evaluation, so it has no text samples.");
        }
    }
    hint_->setText(hint);
    hint_->setVisible(!hint.isEmpty());
    view_->setVisible(hint.isEmpty());
}

void SamplesPanel::prepend(const RunRecord& run, const TextSample& sample) {
    QTextDocument* document = view_->document();
    const bool first = shown_.empty();
    const int before = first ? 0 : document->blockCount();

    // Headers in the window's own (narrower) font, so they stand apart from the model's text.
    QTextCharFormat header;
    header.setFont(font());
    header.setFontWeight(QFont::Bold);
    QTextCharFormat detail;
    detail.setFont(font());
    detail.setForeground(palette().color(QPalette::PlaceholderText));
    QTextCharFormat body;

    QTextCursor cursor(document);
    cursor.movePosition(QTextCursor::Start);
    cursor.insertText(tr("update %L1").arg(sample.update), header);
    if (const double loss = run.val_loss_at(sample.update); std::isfinite(loss))
        cursor.insertText(tr(" · val loss %1").arg(loss, 0, 'f', 3), detail);
    cursor.insertText(QStringLiteral("\n"), body);
    // The engine's prompt is a newline (as nanoGPT's sample.py starts): the header ends a line already.
    cursor.insertText(sample.text.startsWith(QLatin1Char('\n')) ? sample.text.mid(1) : sample.text, body);
    // A blank line parts it from the sample below.
    if (!first) cursor.insertText(QStringLiteral("\n\n"), body);
    shown_.push_front({sample.update, document->blockCount() - before});
}

void SamplesPanel::dropOldest() {
    if (shown_.size() < 2) return;
    QTextDocument* document = view_->document();
    const int oldest_first_block = document->blockCount() - shown_.back().blocks;
    // Remove from the end of the text above the blank separator line down to the end.
    const QTextBlock last_kept = document->findBlockByNumber(oldest_first_block - 2);
    QTextCursor cursor(document);
    cursor.setPosition(last_kept.position() + last_kept.length() - 1);
    cursor.movePosition(QTextCursor::End, QTextCursor::KeepAnchor);
    cursor.removeSelectedText();
    shown_.pop_back();
    shown_.back().blocks -= 1;  // its separator went with the sample below it
}

}  // namespace trainbench::ui
