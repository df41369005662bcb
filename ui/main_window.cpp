#include "main_window.hpp"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QMenuBar>
#include <QMessageBox>
#include <QSaveFile>
#include <QSplitter>
#include <QStandardPaths>
#include <QStyle>
#include <QToolBar>
#include <QVBoxLayout>

#include "app_settings.hpp"
#include "config_panel.hpp"
#include "curve_export.hpp"
#include "dataset_cache.hpp"
#include "loss_plot.hpp"
#include "loss_scale_plot.hpp"
#include "memory_plot.hpp"
#include "message_banner.hpp"
#include "plot_area.hpp"
#include "plot_export.hpp"
#include "presets.hpp"
#include "run_controller.hpp"
#include "run_status_bar.hpp"
#include "run_store.hpp"
#include "runs_table.hpp"
#include "samples_panel.hpp"
#include "session_file.hpp"
#include "settings_diff_dialog.hpp"
#include "speed_plot.hpp"
#include "technique_comparison_dialog.hpp"
#include "trainbench/config_json.hpp"
#include "trainbench/error.hpp"
#include "trainbench/weights.hpp"

// Resources live in a static library, whose initialiser the linker would otherwise drop.
static void init_trainbench_resources() { Q_INIT_RESOURCE(trainbench); }

namespace trainbench::ui {
namespace {

constexpr int kRerunDebounceMs = 350;
const char* const kSessionFilter = "TrainBench session (*.tbsession.json *.json)";

}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
    init_trainbench_resources();
    setWindowTitle(QStringLiteral("TrainBench"));
    setWindowIcon(QIcon(QStringLiteral(":/icons/trainbench.svg")));
    resize(1400, 900);

    settings_ = std::make_unique<AppSettings>();
    store_ = new RunStore(this);
    datasets_ = new DatasetCache(this);
    controller_ = new RunController(*store_, this);

    buildActions();
    buildLayout();
    buildMenus();

    panel_->setConfig(settings_->lastConfig());
    restoreGeometry(settings_->raw().value(QStringLiteral("window/geometry")).toByteArray());
    plots_->setView(settings_->lastView());

    connect(panel_, &ConfigPanel::validityChanged, this, &MainWindow::updateActions);
    connect(panel_, &ConfigPanel::configChanged, this, &MainWindow::onConfigChanged);
    connect(controller_, &RunController::runStarted, this, &MainWindow::onRunStarted);
    connect(controller_, &RunController::metricsDrained, this, &MainWindow::onMetricsDrained);
    connect(controller_, &RunController::runFinished, this, &MainWindow::onRunFinished);
    connect(table_, &RunsTable::focusRunChanged, plots_, &PlotArea::setFocusRun);
    connect(table_, &RunsTable::focusRunChanged, samples_, &SamplesPanel::showRun);
    connect(controller_, &RunController::runStarted, samples_, &SamplesPanel::showRun);
    connect(table_, &RunsTable::focusRunChanged, this, [this](int id) {
        if (const auto* run = store_->find(id); run && !controller_->isRunning()) status_->showRun(*run);
    });
    connect(table_, &RunsTable::selectionSizeChanged, this, &MainWindow::updateActions);
    connect(table_, &RunsTable::deleteRequested, this, &MainWindow::deleteRuns);
    connect(store_, &RunStore::runRemoved, this, &MainWindow::updateActions);

    rerun_debounce_.setSingleShot(true);
    rerun_debounce_.setInterval(kRerunDebounceMs);
    connect(&rerun_debounce_, &QTimer::timeout, this, [this] {
        if (rerun_on_change_->isChecked() && panel_->isValid()) submit(panel_->config(), true);
    });
    updateActions();
}

MainWindow::~MainWindow() = default;

void MainWindow::buildActions() {
    run_ = new QAction(style()->standardIcon(QStyle::SP_MediaPlay), tr("&Run"), this);
    run_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_R));
    run_->setToolTip(tr("Start a new run with the current settings (Ctrl+R). A run in progress is stopped and kept."));
    connect(run_, &QAction::triggered, this, &MainWindow::startRun);

    stop_ = new QAction(style()->standardIcon(QStyle::SP_MediaStop), tr("&Stop"), this);
    stop_->setShortcut(QKeySequence(Qt::Key_Escape));
    stop_->setToolTip(tr("Stop the active run after its current micro-batch (Esc); its curves are kept."));
    connect(stop_, &QAction::triggered, this, [this] {
        queued_runs_.clear();  // stopping a comparison stops the runs it had left too
        controller_->requestStop();
    });

    rerun_ = new QAction(style()->standardIcon(QStyle::SP_BrowserReload), tr("R&erun selected"), this);
    rerun_->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_R));
    rerun_->setToolTip(tr("Load the selected run's settings into the panel and run them again (Ctrl+Shift+R)."));
    connect(rerun_, &QAction::triggered, this, &MainWindow::rerunSelected);

    rerun_on_change_ = new QAction(tr("Rerun on change"), this);
    rerun_on_change_->setCheckable(true);
    rerun_on_change_->setToolTip(tr("Restart the run whenever a setting changes, for instant feedback while dragging "
                                    "a slider. Restarted runs replace the one they interrupted."));
    connect(rerun_on_change_, &QAction::toggled, this, [this](bool on) {
        if (on && panel_->isValid()) submit(panel_->config(), true);
    });

    resume_ = new QAction(tr("Resume from checkpoint"), this);
    resume_->setToolTip(tr("Continue the selected stopped run from its last checkpoint (runs need Checkpoints set)."));
    connect(resume_, &QAction::triggered, this, &MainWindow::resumeSelected);

    compare_ = new QAction(style()->standardIcon(QStyle::SP_FileDialogContentsView), tr("&Compare settings"), this);
    compare_->setToolTip(tr("Select two runs to list the settings in which they differ."));
    connect(compare_, &QAction::triggered, this, &MainWindow::compareSelected);

    delete_ = new QAction(style()->standardIcon(QStyle::SP_TrashIcon), tr("&Delete runs"), this);
    delete_->setToolTip(tr("Remove the selected runs from the session (Del)."));
    connect(delete_, &QAction::triggered, this, [this] { deleteRuns(table_->selectedRunIds()); });

    measure_ = new QAction(style()->standardIcon(QStyle::SP_FileDialogDetailedView), tr("&Measure techniques…"), this);
    measure_->setToolTip(tr("Run the current settings as a baseline and once per efficiency technique, then show what "
                            "each really changed in time per update and peak memory."));
    connect(measure_, &QAction::triggered, this, &MainWindow::measureTechniques);

    export_weights_ = new QAction(tr("Weights of selected run (safetensors)…"), this);
    connect(export_weights_, &QAction::triggered, this, [this] {
        const QString path = askSavePath(tr("Export weights"), QStringLiteral("weights.safetensors"),
                                         tr("safetensors (*.safetensors)"));
        if (!path.isEmpty()) reportErrors(tr("Exporting weights"), [&] { exportWeights(path); });
    });
}

void MainWindow::buildLayout() {
    auto* toolbar = addToolBar(tr("Run"));
    toolbar->setObjectName(QStringLiteral("runToolbar"));
    toolbar->setMovable(false);
    toolbar->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    toolbar->addAction(run_);
    toolbar->addAction(stop_);
    toolbar->addAction(rerun_);
    toolbar->addAction(rerun_on_change_);
    toolbar->addSeparator();
    toolbar->addAction(compare_);
    toolbar->addAction(delete_);
    toolbar->addSeparator();
    toolbar->addAction(measure_);

    panel_ = new ConfigPanel(*datasets_);
    plots_ = new PlotArea(*store_);
    table_ = new RunsTable(*store_);
    banner_ = new MessageBanner;

    auto* centre = new QWidget;
    auto* centre_layout = new QVBoxLayout(centre);
    centre_layout->setContentsMargins(4, 4, 4, 0);
    centre_layout->setSpacing(4);
    centre_layout->addWidget(banner_);
    // The text a language model generates sits beside the plots (it hides itself for MLP-only sessions).
    samples_ = new SamplesPanel(*store_);
    auto* plots_and_samples = new QSplitter(Qt::Horizontal);
    plots_and_samples->setObjectName(QStringLiteral("samplesSplitter"));
    plots_and_samples->addWidget(plots_);
    plots_and_samples->addWidget(samples_);
    plots_and_samples->setCollapsible(0, false);
    plots_and_samples->setStretchFactor(0, 3);
    plots_and_samples->setStretchFactor(1, 1);
    plots_and_samples->setSizes({690, 300});
    centre_layout->addWidget(plots_and_samples, 1);

    auto* right = new QSplitter(Qt::Vertical);
    right->setChildrenCollapsible(false);
    right->addWidget(centre);
    right->addWidget(table_);
    right->setStretchFactor(0, 4);
    right->setStretchFactor(1, 1);
    right->setSizes({700, 190});

    auto* main = new QSplitter(Qt::Horizontal);
    main->setObjectName(QStringLiteral("mainSplitter"));
    main->setChildrenCollapsible(false);
    main->addWidget(panel_);
    main->addWidget(right);
    main->setStretchFactor(0, 0);
    main->setStretchFactor(1, 1);
    main->setSizes({410, 990});
    setCentralWidget(main);

    status_ = new RunStatusBar;
    setStatusBar(status_);
}

void MainWindow::buildMenus() {
    auto* file = menuBar()->addMenu(tr("&File"));
    file->addAction(tr("&Open session…"), QKeySequence::Open, this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, tr("Open session"), QString(), tr(kSessionFilter));
        if (!path.isEmpty()) reportErrors(tr("Opening the session"), [&] { openSession(path); });
    });
    file->addAction(tr("&Save session…"), QKeySequence::Save, this, [this] {
        const QString path = askSavePath(tr("Save session"), QStringLiteral("session.tbsession.json"), tr(kSessionFilter));
        if (!path.isEmpty()) reportErrors(tr("Saving the session"), [&] { saveSession(path); });
    });
    file->addSeparator();
    file->addAction(tr("&Import config…"), this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, tr("Import run config"), QString(), tr("JSON (*.json)"));
        if (!path.isEmpty()) reportErrors(tr("Importing the config"), [&] { importConfig(path); });
    });
    file->addSeparator();
    file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

    auto* run_menu = menuBar()->addMenu(tr("&Run"));
    for (auto* action : {run_, stop_, rerun_, rerun_on_change_, resume_}) run_menu->addAction(action);
    run_menu->addSeparator();
    for (auto* action : {compare_, delete_, measure_}) run_menu->addAction(action);

    presets_menu_ = menuBar()->addMenu(tr("&Presets"));
    reportErrors(tr("Loading presets"), [&] {
        for (const auto& preset : load_presets()) {
            auto* action = presets_menu_->addAction(preset.name);
            action->setToolTip(preset.description);
            action->setStatusTip(preset.description);
            connect(action, &QAction::triggered, this,
                    [this, config = preset.config, variants = preset.variants] { applyPreset(config, variants); });
        }
    });
    presets_menu_->setToolTipsVisible(true);
    presets_menu_->addSeparator();
    presets_menu_->addAction(tr("Default example (a small GPT on the King James Bible)"), this,
                             [this] { panel_->setConfig(default_example_config()); });
    presets_menu_->addAction(tr("MLP defaults"), this, [this] { panel_->setConfig(default_config(ModelFamily::mlp)); });
    presets_menu_->addAction(tr("CNN defaults (Fashion-MNIST)"), this,
                             [this] { panel_->setConfig(default_config(ModelFamily::cnn)); });

    auto* export_menu = menuBar()->addMenu(tr("&Export"));
    export_menu->addAction(tr("Loss curves as &CSV…"), this, [this] {
        const QString path = askSavePath(tr("Export loss curves"), QStringLiteral("loss-curves.csv"), tr("CSV (*.csv)"));
        if (!path.isEmpty()) reportErrors(tr("Exporting CSV"), [&] { exportCurvesCsv(path); });
    });
    export_menu->addAction(tr("Loss curves as &JSON…"), this, [this] {
        const QString path = askSavePath(tr("Export loss curves"), QStringLiteral("loss-curves.json"), tr("JSON (*.json)"));
        if (!path.isEmpty()) reportErrors(tr("Exporting JSON"), [&] { exportCurvesJson(path); });
    });
    export_menu->addAction(tr("&Plots (PNG, PDF or SVG)…"), this, [this] {
        const QString path = askSavePath(tr("Export plots"), QStringLiteral("trainbench.png"),
                                         tr("PNG image (*.png);;PDF document (*.pdf);;SVG drawing (*.svg)"));
        if (path.isEmpty()) return;
        reportErrors(tr("Exporting plots"), [&] {
            const auto written = exportPlots(path);
            banner_->showMessage(tr("Wrote %1").arg(QStringList(written.begin(), written.end()).join(QStringLiteral(", "))),
                                 MessageBanner::Kind::info);
        });
    });
    export_menu->addAction(tr("Current &config (JSON)…"), this, [this] {
        const QString path = askSavePath(tr("Export run config"), QStringLiteral("run-config.json"), tr("JSON (*.json)"));
        if (!path.isEmpty()) reportErrors(tr("Exporting the config"), [&] { exportConfig(path); });
    });
    export_menu->addAction(export_weights_);

    auto* help = menuBar()->addMenu(tr("&Help"));
    help->addAction(tr("&About TrainBench"), this, [this] {
        QMessageBox::about(this, tr("About TrainBench"),
                           tr("<b>TrainBench</b> %1<br>A workbench for the knobs that decide how fast, and in how much "
                              "memory, a neural network trains. Every number it shows is measured.")
                               .arg(QApplication::applicationVersion()));
    });
}

template <typename Action>
void MainWindow::reportErrors(const QString& what, Action&& action) {
    try {
        action();
    } catch (const std::exception& error) {
        banner_->showMessage(tr("%1 failed: %2").arg(what, QString::fromUtf8(error.what())));
    }
}

QString MainWindow::askSavePath(const QString& title, const QString& suggestedName, const QString& filter) {
    const QString folder = settings_->raw().value(QStringLiteral("export/folder"),
                                                  QStandardPaths::writableLocation(QStandardPaths::DocumentsLocation)).toString();
    const QString path = QFileDialog::getSaveFileName(this, title, QDir(folder).filePath(suggestedName), filter);
    if (!path.isEmpty()) settings_->raw().setValue(QStringLiteral("export/folder"), QFileInfo(path).absolutePath());
    return path;
}

void MainWindow::updateActions() {
    const auto selected = table_->selectedRunIds();
    const RunRecord* single = selected.size() == 1 ? store_->find(selected.front()) : nullptr;
    run_->setEnabled(panel_->isValid());
    run_->setToolTip(panel_->isValid() ? tr("Start a new run with the current settings (Ctrl+R).")
                                       : tr("Fix the setting marked in red first: %1").arg(panel_->validationError()));
    stop_->setEnabled(controller_->isRunning());
    rerun_->setEnabled(single != nullptr);
    resume_->setEnabled(single && single->state != RunState::running && single->config.checkpoint_every > 0 &&
                        !single->config.checkpoint_dir.empty());
    compare_->setEnabled(selected.size() == 2);
    delete_->setEnabled(!selected.empty());
    const RunRecord* weights_run = single ? single : store_->find(store_->latestRunId());
    export_weights_->setEnabled(weights_run && !weights_run->weights.empty());
}

void MainWindow::submit(RunConfig config, bool replaceActive) {
    if (config.checkpoint_every > 0 && config.checkpoint_dir.empty()) {
        const QString folder = QDir(QStandardPaths::writableLocation(QStandardPaths::AppLocalDataLocation))
                                   .filePath(QStringLiteral("checkpoints/") +
                                             QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmmss-zzz")));
        QDir().mkpath(folder);
        config.checkpoint_dir = folder.toStdString();
    }
    RunConfig remembered = config;
    remembered.resume_dir.clear();
    remembered.checkpoint_dir.clear();
    settings_->saveConfig(remembered);
    controller_->submit(config, datasets_->find(config), replaceActive);
    updateActions();
}

void MainWindow::startRun() {
    if (!panel_->isValid()) {
        banner_->showMessage(panel_->validationError());
        return;
    }
    submit(panel_->config(), false);
}

void MainWindow::onConfigChanged() {
    if (rerun_on_change_->isChecked()) rerun_debounce_.start();
}

void MainWindow::onRunStarted(int id) {
    banner_->hide();
    plots_->setFocusRun(id);
    if (const auto* run = store_->find(id)) status_->showRun(*run);
    updateActions();
}

void MainWindow::onMetricsDrained(int id) {
    const auto* run = store_->find(id);
    if (!run) return;
    status_->showRun(*run);
    const double left = RunStatusBar::estimatedSecondsLeft(*run);
    if (run->plan && std::isfinite(left) && !run->steps.empty()) {
        const double total = run->steps.back().wall_seconds + left;
        panel_->showRunEstimate(tr("%1: estimated %2 in total for %L3 updates (measured %4 ms per update)")
                                    .arg(run->name, format_duration(total))
                                    .arg(run->plan->total_updates)
                                    .arg(run->steps.back().update_ms, 0, 'f', 2));
    }
}

void MainWindow::applyPreset(const RunConfig& config, const std::vector<RunConfig>& variants) {
    queued_runs_.clear();
    panel_->setConfig(config);
    if (variants.empty()) return;
    queued_runs_.assign(variants.begin(), variants.end());
    startRun();
}

void MainWindow::onRunFinished(int id) {
    panel_->showRunEstimate(QString());
    const RunRecord* finished = store_->find(id);
    if (!queued_runs_.empty() && finished && finished->state == RunState::completed && !controller_->isRunning()) {
        // The next run of a comparison preset; the panel shows its settings while it runs.
        panel_->setConfig(queued_runs_.front());
        queued_runs_.pop_front();
        QTimer::singleShot(0, this, &MainWindow::startRun);
    } else if (finished && finished->state != RunState::completed) {
        queued_runs_.clear();
    }
    if (const auto* run = store_->find(id)) {
        status_->showRun(*run);
        if (run->state == RunState::failed)
            banner_->showMessage(tr("%1 failed: %2").arg(run->name, run->message));
        if (run->plan && !run->plan->auto_fit_note.empty())
            status_->showMessage(QString::fromStdString(run->plan->auto_fit_note), 10000);
    }
    updateActions();
}

void MainWindow::rerunSelected() {
    const auto ids = table_->selectedRunIds();
    if (ids.size() != 1) return;
    if (const auto* run = store_->find(ids.front())) {
        RunConfig config = run->config;
        config.resume_dir.clear();
        config.checkpoint_dir.clear();
        panel_->setConfig(config);
        startRun();
    }
}

void MainWindow::resumeSelected() {
    const auto ids = table_->selectedRunIds();
    const auto* run = ids.size() == 1 ? store_->find(ids.front()) : nullptr;
    if (!run) return;
    RunConfig config = run->config;
    config.resume_dir = config.checkpoint_dir;
    submit(config, false);
}

void MainWindow::compareSelected() {
    const auto ids = table_->selectedRunIds();
    if (ids.size() != 2) return;
    const auto* first = store_->find(ids[0]);
    const auto* second = store_->find(ids[1]);
    if (!first || !second) return;
    auto* dialog = new SettingsDiffDialog(*first, *second, this);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    // The dialog reads the records; deleting either run closes it first.
    connect(store_, &RunStore::runRemoved, dialog, [dialog, a = ids[0], b = ids[1]](int id) {
        if (id == a || id == b) dialog->close();
    });
    dialog->show();
}

void MainWindow::deleteRuns(const std::vector<int>& ids) {
    for (int id : ids) {
        if (id == controller_->activeRunId()) {
            // Removing the record makes the controller drop the run when its thread ends.
            controller_->requestStop();
        }
        store_->remove(id);
    }
}

void MainWindow::measureTechniques() {
    if (!panel_->isValid()) {
        banner_->showMessage(panel_->validationError());
        return;
    }
    controller_->requestStop();
    auto* dialog = new TechniqueComparisonDialog(panel_->config(), datasets_->find(panel_->config()),
                                                 controller_->cliProgram(), this);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    dialog->show();
    dialog->start();
}

std::vector<const RunRecord*> MainWindow::runsToExport() const {
    std::vector<const RunRecord*> runs;
    for (int id : table_->selectedRunIds())
        if (const auto* run = store_->find(id)) runs.push_back(run);
    if (runs.empty())
        for (const auto& run : store_->runs())
            if (run->visible) runs.push_back(run.get());
    return runs;
}

void MainWindow::exportCurvesCsv(const QString& path) const {
    const auto runs = runsToExport();
    if (runs.empty()) throw Error("no runs to export; run something or tick a run's Show box");
    write_curves_csv(path, runs);
}

void MainWindow::exportCurvesJson(const QString& path) const {
    const auto runs = runsToExport();
    if (runs.empty()) throw Error("no runs to export; run something or tick a run's Show box");
    write_curves_json(path, runs);
}

std::vector<QString> MainWindow::exportPlots(const QString& path) const {
    std::vector<std::pair<QString, QCustomPlot*>> plots = {
        {QStringLiteral("loss"), plots_->lossPlot()},
        {QStringLiteral("memory"), plots_->memoryPlot()},
        {QStringLiteral("speed"), plots_->speedPlot()}};
    if (plots_->lossScalePlot()->hasFp16Runs()) plots.emplace_back(QStringLiteral("loss-scale"), plots_->lossScalePlot());
    return save_plots(plots, path);
}

void MainWindow::exportConfig(const QString& path) const {
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly | QIODevice::Text))
        throw Error("cannot write " + path.toStdString() + ": " + file.errorString().toStdString());
    RunConfig config = panel_->config();
    config.resume_dir.clear();
    file.write(QByteArray::fromStdString(config_to_json(config) + "\n"));
    if (!file.commit()) throw Error("cannot write " + path.toStdString() + ": " + file.errorString().toStdString());
}

void MainWindow::exportWeights(const QString& path) const {
    const auto ids = table_->selectedRunIds();
    const RunRecord* run = ids.size() == 1 ? store_->find(ids.front()) : store_->find(store_->latestRunId());
    if (!run || run->weights.empty())
        throw Error("the chosen run has no trained weights (runs opened from a session keep metrics only); "
                    "select a finished run from this session");
    save_weights(path.toStdString(), run->weights);
}

void MainWindow::saveSession(const QString& path) const { save_session(path, *store_); }

void MainWindow::openSession(const QString& path) {
    const int count = load_session(path, *store_);
    status_->showMessage(tr("Opened %n run(s) from %1", nullptr, count).arg(QFileInfo(path).fileName()), 8000);
}

void MainWindow::importConfig(const QString& path) { panel_->setConfig(load_config_file(path.toStdString())); }

void MainWindow::closeEvent(QCloseEvent* event) {
    settings_->raw().setValue(QStringLiteral("window/geometry"), saveGeometry());
    settings_->saveView(plots_->view());
    RunConfig config = panel_->config();
    config.resume_dir.clear();
    config.checkpoint_dir.clear();
    settings_->saveConfig(config);
    controller_->requestStop();
    controller_->waitUntilIdle(5000);
    QMainWindow::closeEvent(event);
}

}  // namespace trainbench::ui
