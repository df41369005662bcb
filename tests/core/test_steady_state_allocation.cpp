// "No heap allocation in the steady-state training step": this executable interposes the C
// allocator and counts calls made while updates run, after the first few (which fill the
// arena's cache). The observer and the loop itself must not allocate either.
#include <QTemporaryDir>
#include <QtTest>

#include <atomic>
#include <cstdlib>

#include "core/allocation_counter.hpp"
#include "trainbench/trainer.hpp"

using namespace trainbench;

namespace {

// Trains `config` (40 updates) and counts the allocations of updates 5 to 35, after the first
// ones have filled the arena's cache. Inside oneDNN's executions (the products with
// --cpu-products onednn) its own bookkeeping is allowed, and bounded: at most 7 blocks per
// product (a node per argument in its argument map, the map's buckets and its thread loop's
// closure), each freed before the product returns (allocation_counter.hpp says why).
void expect_no_allocation_in_updates_5_to_35(const RunConfig& config, std::shared_ptr<const Dataset> data) {
    long during = 0, inside_onednn = 0, freed_inside_onednn = 0;
    int64_t products = 0;
    Observer observer;
    observer.on_update = [&](const StepMetrics& m) {
        if (m.update == 5) {
            allocations = 0;
            allocations_inside_onednn = 0;
            frees_inside_onednn = 0;
            products = onednn_executions();
            counting = true;
        }
        if (m.update == 35) {
            counting = false;
            during = allocations.load();
            inside_onednn = allocations_inside_onednn.load();
            freed_inside_onednn = frees_inside_onednn.load();
            products = onednn_executions() - products;
        }
    };
    const RunResult result = train(config, observer, nullptr, std::move(data));
    QVERIFY2(result.reason == StopReason::max_steps, result.message.c_str());
    qInfo("products: %s; %lld oneDNN products, which allocated %ld blocks and freed %ld inside them",
          to_string(config.cpu_products).c_str(), static_cast<long long>(products), inside_onednn, freed_inside_onednn);
    QVERIFY2(during == 0, qPrintable(QString("%1 allocations during 30 updates").arg(during)));
    QVERIFY2(inside_onednn <= 7 * products, "oneDNN allocated more than its per-execution bookkeeping");
    QCOMPARE(freed_inside_onednn, inside_onednn);
    if (config.cpu_products == CpuProducts::eigen) QCOMPARE(products, int64_t{0});
}

}  // namespace

class TestSteadyStateAllocation : public QObject {
    Q_OBJECT
private slots:
    void updates_do_not_allocate_data() {
        QTest::addColumn<QString>("precision");
        QTest::addColumn<bool>("checkpointing");
        QTest::addColumn<int>("prefetch");
        QTest::addColumn<QString>("products");
        for (const char* products : {"eigen", "onednn"}) {
            const std::string p(products);
            QTest::newRow(("fp32-" + p).c_str()) << "fp32" << false << 0 << products;
            QTest::newRow(("bf16-checkpointing-" + p).c_str()) << "bf16" << true << 0 << products;
            QTest::newRow(("fp16-prefetch-" + p).c_str()) << "fp16" << false << 2 << products;
        }
    }
    void updates_do_not_allocate() {
        SKIP_WITHOUT_ALLOCATION_COUNTER();
        QFETCH(QString, precision);
        QFETCH(bool, checkpointing);
        QFETCH(int, prefetch);
        QFETCH(QString, products);
        DataOptions options;
        options.synthetic_samples = 20000;
        const auto data = std::make_shared<const Dataset>(load_dataset("spirals", options));
        RunConfig config;
        config.hidden = {256, 256, 256, 256};
        config.batch_size = 256;  // products large enough for Eigen's blocked, threaded kernels
        config.step_size = 4;
        config.max_steps = 40;
        config.threads = 2;
        config.precision = parse_precision(precision.toStdString());
        config.gradient_checkpointing = checkpointing;
        config.prefetch = prefetch;
        config.cpu_products = parse_cpu_products(products.toStdString());
        expect_no_allocation_in_updates_5_to_35(config, data);
    }

    // A GPT on a text: token windows through the loader, attention, LayerNorm, embedding and
    // the --eval-every evaluations inside the counted updates.
    void gpt_updates_do_not_allocate_data() {
        QTest::addColumn<bool>("checkpointing");
        QTest::addColumn<int>("prefetch");
        QTest::addColumn<QString>("precision");
        QTest::addColumn<QString>("products");
        for (const char* products : {"eigen", "onednn"}) {
            const std::string p(products);
            QTest::newRow(("fp32-" + p).c_str()) << false << 0 << "fp32" << products;
            QTest::newRow(("bf16-" + p).c_str()) << false << 0 << "bf16" << products;
            QTest::newRow(("checkpointing-prefetch-" + p).c_str()) << true << 2 << "fp32" << products;
        }
    }
    void gpt_updates_do_not_allocate() {
        SKIP_WITHOUT_ALLOCATION_COUNTER();
        QFETCH(bool, checkpointing);
        QFETCH(int, prefetch);
        QFETCH(QString, precision);
        QFETCH(QString, products);
        QTemporaryDir folder;
        QVERIFY(folder.isValid());
        QFile text(folder.filePath("text.txt"));
        QVERIFY(text.open(QIODevice::WriteOnly));
        for (int i = 0; i < 1000; ++i) text.write("And God said, Let there be light: and there was light.\n");
        text.close();
        RunConfig config = default_config(ModelFamily::gpt);
        config.dataset = "text:" + text.fileName().toStdString();
        config.n_layer = 2;
        config.n_embd = 64;
        config.block_size = 32;
        config.batch_size = 16;
        config.step_size = 2;
        config.max_steps = 40;
        config.threads = 2;
        config.eval_every = 10;
        config.eval_samples = 16;
        config.gradient_checkpointing = checkpointing;
        config.prefetch = prefetch;
        config.precision = parse_precision(precision.toStdString());
        config.cpu_products = parse_cpu_products(products.toStdString());
        expect_no_allocation_in_updates_5_to_35(config, nullptr);
    }
};

QTEST_APPLESS_MAIN(TestSteadyStateAllocation)
#include "test_steady_state_allocation.moc"
