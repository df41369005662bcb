#pragma once
#include <QFutureWatcher>
#include <QObject>
#include <QString>
#include <deque>
#include <map>
#include <memory>

#include "trainbench/dataset.hpp"
#include "trainbench/run_config.hpp"
#include "trainbench/trainer.hpp"

namespace trainbench::ui {

// Loads data sets once and shares them between the panel (which needs the exact number of
// training samples to show updates per epoch) and the runs (which then skip reloading).
// Synthetic sets load at once; files load on a worker thread so the window never freezes.
class DatasetCache : public QObject {
    Q_OBJECT
public:
    explicit DatasetCache(QObject* parent = nullptr);
    ~DatasetCache() override;

    std::shared_ptr<const Dataset> find(const RunConfig& config) const;
    // The load error for this config's data, empty when it loaded or is still loading.
    QString errorFor(const RunConfig& config) const;
    bool isLoading(const RunConfig& config) const;
    void request(const RunConfig& config);

signals:
    void finished(const QString& key);

private:
    struct LoadResult {
        QString key;
        std::shared_ptr<const Dataset> data;
        QString error;
    };
    static QString keyOf(const RunConfig& config);
    static LoadResult load(const QString& key, const std::string& spec, const DataOptions& options);
    void store(const LoadResult& result);

    std::deque<std::pair<QString, std::shared_ptr<const Dataset>>> loaded_;
    std::map<QString, QString> errors_;
    QString loading_key_;
    QFutureWatcher<LoadResult> watcher_;
    std::unique_ptr<RunConfig> queued_;  // the latest request made while a load was running
};

}  // namespace trainbench::ui
