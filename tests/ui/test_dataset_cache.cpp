// The app's data-set cache keys a text by everything that changes its tokens: a GPT that starts
// from saved weights reads its text with their vocabulary, so the same text with and without
// --init-weights (or with another weights file) is two data sets, never one reused for both.
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include "dataset_cache.hpp"
#include "trainbench/weights.hpp"

using namespace trainbench;
using namespace trainbench::ui;

class DatasetCacheTest : public QObject {
    Q_OBJECT

    static std::shared_ptr<const Dataset> loaded(DatasetCache& cache, const RunConfig& config) {
        QSignalSpy finished(&cache, &DatasetCache::finished);
        cache.request(config);
        if (!cache.find(config) && cache.errorFor(config).isEmpty()) finished.wait(20000);
        return cache.find(config);
    }

private slots:
    void initial_weights_bring_their_vocabulary() {
        QTemporaryDir scratch;
        const QString text = scratch.filePath("text.txt");
        QFile file(text);
        QVERIFY(file.open(QIODevice::WriteOnly));
        for (int i = 0; i < 100; ++i) file.write("abc abc cab\n");
        file.close();
        // A model whose vocabulary is "\n abcz" (z: a symbol this text lacks).
        ModelWeights weights;
        weights.tensors = {{"w", {1}, {0.f}}};
        weights.metadata[kVocabularyKey] = vocabulary_metadata({'\n', ' ', 'a', 'b', 'c', 'z'});
        const std::string weights_path = scratch.filePath("model.safetensors").toStdString();
        save_weights(weights_path, weights);

        RunConfig plain = default_config(ModelFamily::gpt);
        plain.dataset = "text:" + text.toStdString();
        plain.block_size = 8;
        RunConfig fine_tune = plain;
        fine_tune.init_weights = weights_path;

        DatasetCache cache;
        const auto own = loaded(cache, plain);
        QVERIFY2(own, qPrintable(cache.errorFor(plain)));
        QCOMPARE(own->num_classes, int64_t(5));
        QVERIFY(!cache.find(fine_tune));  // not the set tokenized with the text's own vocabulary
        const auto adopted = loaded(cache, fine_tune);
        QVERIFY2(adopted, qPrintable(cache.errorFor(fine_tune)));
        QCOMPARE(adopted->num_classes, int64_t(6));
        QCOMPARE(adopted->vocabulary, (std::vector<uint8_t>{'\n', ' ', 'a', 'b', 'c', 'z'}));
        QCOMPARE(cache.find(plain), own);
    }
};

QTEST_MAIN(DatasetCacheTest)
#include "test_dataset_cache.moc"
