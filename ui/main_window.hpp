#pragma once
#include <QMainWindow>
#include <QTimer>
#include <deque>
#include <memory>
#include <vector>

#include "trainbench/run_config.hpp"

class QAction;
class QMenu;

namespace trainbench::ui {

class AppSettings;
class ConfigPanel;
class DatasetCache;
class MessageBanner;
class PlotArea;
class RunController;
class RunStatusBar;
class RunStore;
class RunsTable;
class SamplesPanel;
struct RunRecord;

// The workbench window: settings on the left, live plots in the centre, the runs below, a
// status bar at the bottom. It wires the pieces together and owns no training logic itself.
class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    explicit MainWindow(QWidget* parent = nullptr);
    ~MainWindow() override;

    ConfigPanel* configPanel() const { return panel_; }
    PlotArea* plotArea() const { return plots_; }
    RunsTable* runsTable() const { return table_; }
    SamplesPanel* samplesPanel() const { return samples_; }
    RunStore& runStore() const { return *store_; }
    RunController& runController() const { return *controller_; }
    MessageBanner* messageBanner() const { return banner_; }
    QAction* runAction() const { return run_; }
    QAction* stopAction() const { return stop_; }
    QAction* rerunAction() const { return rerun_; }
    QAction* rerunOnChangeAction() const { return rerun_on_change_; }

    // Starts a run with the panel's settings (stopping the active one first, which is kept).
    void startRun();
    // The runs the export actions act on: the selected rows, or every visible run when none is.
    std::vector<const RunRecord*> runsToExport() const;
    // Export targets without file dialogs (menus call these after asking for a path; so do tests).
    // They throw trainbench::Error on failure.
    void exportCurvesCsv(const QString& path) const;
    void exportCurvesJson(const QString& path) const;
    std::vector<QString> exportPlots(const QString& path) const;
    void exportConfig(const QString& path) const;
    void exportWeights(const QString& path) const;
    void saveSession(const QString& path) const;
    void openSession(const QString& path);
    void importConfig(const QString& path);
    // Loads the preset; a comparison preset also runs its config and then each variant.
    void applyPreset(const RunConfig& config, const std::vector<RunConfig>& variants);

protected:
    void closeEvent(QCloseEvent* event) override;

private:
    void buildActions();
    void buildMenus();
    void buildLayout();
    void updateActions();
    void onRunStarted(int id);
    void onMetricsDrained(int id);
    void onRunFinished(int id);
    void onConfigChanged();
    void rerunSelected();
    void resumeSelected();
    void compareSelected();
    void deleteRuns(const std::vector<int>& ids);
    void measureTechniques();
    void submit(RunConfig config, bool replaceActive);
    // Runs `action` and shows a trainbench::Error (or any exception) in the banner.
    template <typename Action>
    void reportErrors(const QString& what, Action&& action);
    QString askSavePath(const QString& title, const QString& suggestedName, const QString& filter);

    std::unique_ptr<AppSettings> settings_;
    RunStore* store_ = nullptr;
    DatasetCache* datasets_ = nullptr;
    RunController* controller_ = nullptr;
    ConfigPanel* panel_ = nullptr;
    PlotArea* plots_ = nullptr;
    RunsTable* table_ = nullptr;
    SamplesPanel* samples_ = nullptr;
    MessageBanner* banner_ = nullptr;
    RunStatusBar* status_ = nullptr;
    QTimer rerun_debounce_;
    // The runs a comparison preset still has to make, started one after another.
    std::deque<RunConfig> queued_runs_;

    QAction* run_ = nullptr;
    QAction* stop_ = nullptr;
    QAction* rerun_ = nullptr;
    QAction* rerun_on_change_ = nullptr;
    QAction* resume_ = nullptr;
    QAction* compare_ = nullptr;
    QAction* delete_ = nullptr;
    QAction* measure_ = nullptr;
    QAction* export_weights_ = nullptr;
    QMenu* presets_menu_ = nullptr;
};

}  // namespace trainbench::ui
