#include "dataset_cache.hpp"

#include <QtConcurrent/QtConcurrentRun>

namespace trainbench::ui {
namespace {

constexpr std::size_t kKeptDatasets = 4;

bool is_synthetic(const std::string& spec) {
    return spec == "spirals" || spec == "moons" || spec == "blobs" || spec == "sine";
}

}  // namespace

DatasetCache::DatasetCache(QObject* parent) : QObject(parent) {
    connect(&watcher_, &QFutureWatcher<LoadResult>::finished, this, [this] {
        store(watcher_.result());
        loading_key_.clear();
        if (queued_) {
            auto next = std::move(queued_);
            request(*next);
        }
    });
}

DatasetCache::~DatasetCache() { watcher_.waitForFinished(); }

QString DatasetCache::keyOf(const RunConfig& config) {
    // A text's windows are block_size + 1 tokens long: another context length is another set;
    // and a text read by a model starting from saved weights takes their vocabulary
    // (data_options_for), so another weights file is another set too.
    const bool text = config.model == ModelFamily::gpt;
    return QStringLiteral("%1|%2|%3|%4|%5|%6|%7")
        .arg(QString::fromStdString(config.dataset))
        .arg(config.seed)
        .arg(config.val_fraction, 0, 'g', 17)
        .arg(config.shuffle)
        .arg(is_synthetic(config.dataset) ? config.synthetic_samples : 0)
        .arg(text ? config.block_size : 0)
        .arg(QString::fromStdString(text ? config.init_weights : std::string()));
}

std::shared_ptr<const Dataset> DatasetCache::find(const RunConfig& config) const {
    const QString key = keyOf(config);
    for (const auto& [cached_key, data] : loaded_)
        if (cached_key == key) return data;
    return nullptr;
}

QString DatasetCache::errorFor(const RunConfig& config) const {
    auto it = errors_.find(keyOf(config));
    return it == errors_.end() ? QString() : it->second;
}

bool DatasetCache::isLoading(const RunConfig& config) const {
    return !loading_key_.isEmpty() && loading_key_ == keyOf(config);
}

DatasetCache::LoadResult DatasetCache::load(const QString& key, const std::string& spec,
                                            const DataOptions& options) {
    LoadResult result;
    result.key = key;
    try {
        result.data = std::make_shared<const Dataset>(load_dataset(spec, options));
    } catch (const std::exception& error) {
        result.error = QString::fromUtf8(error.what());
    }
    return result;
}

void DatasetCache::store(const LoadResult& result) {
    if (result.data) {
        errors_.erase(result.key);
        loaded_.emplace_back(result.key, result.data);
        while (loaded_.size() > kKeptDatasets) loaded_.pop_front();
    } else {
        errors_[result.key] = result.error;
    }
    emit finished(result.key);
}

void DatasetCache::request(const RunConfig& config) {
    const QString key = keyOf(config);
    if (find(config) || errors_.count(key) || loading_key_ == key) return;
    if (is_synthetic(config.dataset)) {
        store(load(key, config.dataset, data_options_for(config)));
        return;
    }
    if (!loading_key_.isEmpty()) {
        queued_ = std::make_unique<RunConfig>(config);
        return;
    }
    loading_key_ = key;
    watcher_.setFuture(QtConcurrent::run(&DatasetCache::load, key, config.dataset, data_options_for(config)));
}

}  // namespace trainbench::ui
