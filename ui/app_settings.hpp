#pragma once
#include <QSettings>
#include <memory>

#include "plot_view.hpp"
#include "trainbench/run_config.hpp"

namespace trainbench::ui {

// The app's persistent settings (last run configuration, window layout) in an INI file under
// QStandardPaths' AppConfigLocation, so tests that enable QStandardPaths' test mode never touch
// the user's real settings.
class AppSettings {
public:
    AppSettings();
    explicit AppSettings(const QString& path);

    // The configuration saved last, or the defaults when none was saved or it no longer parses.
    RunConfig lastConfig() const;
    void saveConfig(const RunConfig& config);
    // The plots' view saved last; the defaults for what is missing or out of range.
    PlotView lastView() const;
    void saveView(const PlotView& view);
    QSettings& raw() { return *settings_; }
    QString fileName() const { return settings_->fileName(); }

private:
    std::unique_ptr<QSettings> settings_;
};

}  // namespace trainbench::ui
