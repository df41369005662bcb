#pragma once
#include <QWidget>
#include <deque>

class QLabel;
class QPlainTextEdit;

namespace trainbench::ui {

class RunStore;
struct RunRecord;
struct TextSample;

// The text a language model generated at each evaluation, for one run: newest on top, each
// headed by its update (and the validation loss measured there), in a monospace font with the
// model's whitespace kept. It shows the run set with showRun() (the active run while it trains,
// the run picked in the runs table); new samples are inserted at the top, so a long run never
// re-renders its history. It is visible only while the session holds a language-model run.
class SamplesPanel : public QWidget {
    Q_OBJECT
public:
    // At most this many samples are on screen at once (the newest); the run keeps them all.
    static constexpr int kMaxShownSamples = 200;
    static constexpr int kPreferredWidth = 320;  // before its splitter is laid out

    explicit SamplesPanel(const RunStore& store, QWidget* parent = nullptr);

    void showRun(int id);
    int runId() const { return run_id_; }
    // What is on screen, for tests: the title line, the samples' text, or the hint shown instead.
    QString title() const;
    QString text() const;
    QString hint() const;
    bool hintShown() const;
    int shownSampleCount() const { return static_cast<int>(shown_.size()); }
    // The update of each sample on screen, top to bottom.
    std::vector<int64_t> shownUpdates() const;

private:
    void onSamplesAppended(int id, qsizetype first);
    void onRunChanged(int id);
    void onRunRemoved(int id);
    void updateVisibility();
    void render();
    void updateTitle();
    void updateHint();
    void prepend(const RunRecord& run, const TextSample& sample);
    void dropOldest();

    const RunStore& store_;
    int run_id_ = 0;
    QLabel* title_ = nullptr;
    QLabel* hint_ = nullptr;
    QPlainTextEdit* view_ = nullptr;
    // Per sample on screen, newest first: its update and how many blocks (lines) it takes,
    // its separating blank line included.
    struct Shown {
        int64_t update;
        int blocks;
    };
    std::deque<Shown> shown_;
};

}  // namespace trainbench::ui
