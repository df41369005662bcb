// The settings panel: derived batching text, validation next to the control, Run gating,
// presets and restoring the last settings.
#include <QAction>
#include <QLabel>
#include <QLineEdit>
#include <QSlider>
#include <QSpinBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QtTest>

#include "config_panel.hpp"
#include "main_window.hpp"
#include "presets.hpp"
#include "run_controller.hpp"
#include "ui_test_support.hpp"

using namespace trainbench;
using namespace trainbench::ui;

class ConfigPanelTest : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { testing::isolate_settings(); }

    void derivedTextFollowsBatchAndStepSize() {
        MainWindow window;
        auto* panel = window.configPanel();
        panel->setConfig(testing::small_config(0));
        auto* batch = panel->findChild<QSpinBox*>("batchSizeSpin");
        auto* step = panel->findChild<QSpinBox*>("stepSizeSpin");
        auto* derived = panel->findChild<QLabel*>("derivedBatchLabel");
        QVERIFY(batch && step && derived);

        batch->setValue(64);
        step->setValue(2);
        QVERIFY2(derived->text().contains(QStringLiteral("global batch 64 = micro-batch 32 × step_size 2")),
                 qPrintable(derived->text()));
        // 2000 synthetic samples, 10% held out: 1800 training samples / 64 = 28.1 -> 29 updates.
        QVERIFY2(derived->text().contains(QStringLiteral("29 updates/epoch")), qPrintable(derived->text()));

        step->setValue(3);
        QVERIFY2(derived->text().contains(QStringLiteral("micro-batch 22 × step_size 3")), qPrintable(derived->text()));
        QVERIFY2(derived->text().contains(QStringLiteral("22 and 21")), qPrintable(derived->text()));

        auto* step_slider = panel->findChild<QSlider*>("stepSizeSlider");
        step_slider->setValue(8);
        QCOMPARE(step->value(), 8);
        QCOMPARE(panel->config().step_size, 8);
        QVERIFY(derived->text().contains(QStringLiteral("micro-batch 8 × step_size 8")));

        auto* batch_slider = panel->findChild<QSlider*>("batchSizeSlider");
        batch_slider->setValue(8);  // 2^8
        QCOMPARE(batch->value(), 256);
        QCOMPARE(panel->config().batch_size, 256);
    }

    void stepSizeLargerThanBatchDisablesRun() {
        MainWindow window;
        auto* panel = window.configPanel();
        panel->setConfig(testing::small_config(0));
        auto* batch = panel->findChild<QSpinBox*>("batchSizeSpin");
        auto* step = panel->findChild<QSpinBox*>("stepSizeSpin");
        auto* error = panel->findChild<QLabel*>("error_step_size");
        QVERIFY(error);
        QVERIFY(panel->isValid());
        QVERIFY(window.runAction()->isEnabled());

        batch->setValue(4);
        step->setValue(8);
        QVERIFY(!panel->isValid());
        QVERIFY(!error->isHidden());
        QVERIFY2(error->text().contains(QStringLiteral("step_size 8 is larger than the batch size 4")), qPrintable(error->text()));
        QVERIFY(!window.runAction()->isEnabled());
        window.startRun();  // even a direct call must not start an invalid run
        QVERIFY(!window.runController().isRunning());

        step->setValue(4);
        QVERIFY(panel->isValid());
        QVERIFY(error->isHidden());
        QVERIFY(window.runAction()->isEnabled());
    }

    void badHiddenLayersAndBudgetAreExplainedInPlace() {
        MainWindow window;
        auto* panel = window.configPanel();
        auto* hidden = panel->findChild<QLineEdit*>("hiddenEdit");
        hidden->setText(QStringLiteral("128,abc"));
        QVERIFY(!panel->isValid());
        QVERIFY(!panel->findChild<QLabel*>("error_hidden")->isHidden());
        hidden->setText(QStringLiteral("64, 32"));
        QVERIFY(panel->isValid());
        QCOMPARE(panel->config().hidden, (std::vector<int64_t>{64, 32}));

        auto* budget = panel->findChild<QLineEdit*>("memoryBudgetEdit");
        budget->setText(QStringLiteral("lots"));
        QVERIFY(!panel->isValid());
        QVERIFY(!panel->findChild<QLabel*>("error_memory_limit")->isHidden());
        budget->setText(QStringLiteral("512MiB"));
        QVERIFY(panel->isValid());
        QCOMPARE(panel->config().memory_limit_bytes, int64_t{512} * 1024 * 1024);
    }

    void choosingAnOptimizerSetsItsDefaultLearningRate() {
        MainWindow window;
        auto* panel = window.configPanel();
        auto* optimizer = panel->findChild<QComboBox*>("optimizerCombo");
        optimizer->setCurrentIndex(optimizer->findData(QStringLiteral("rmsprop")));
        QCOMPARE(panel->config().optimizer.kind, OptimizerKind::rmsprop);
        QCOMPARE(*panel->config().optimizer.lr, 1e-2);
        auto* lr = panel->findChild<QDoubleSpinBox*>("learningRateSpin");
        lr->setValue(0.0005);
        QCOMPARE(*panel->config().optimizer.lr, 0.0005);
    }

    void configRoundTripsThroughThePanel() {
        MainWindow window;
        RunConfig config = testing::small_config(123, 4);
        config.precision = Precision::bf16;
        config.optimizer.kind = OptimizerKind::sgd;
        config.optimizer.lr = 0.05;
        config.optimizer.momentum = 0.9;  // no control: must pass through untouched
        config.schedule.kind = ScheduleKind::cosine;
        config.schedule.warmup_steps = 10;
        config.gradient_checkpointing = true;
        config.empty_cache_steps = 5;
        config.prefetch = 2;
        config.clip_grad_norm = 1.5;
        window.configPanel()->setConfig(config);
        const RunConfig back = window.configPanel()->config();
        QCOMPARE(back.step_size, 4);
        QCOMPARE(back.max_steps, 123);
        QCOMPARE(back.precision, Precision::bf16);
        QCOMPARE(back.optimizer.kind, OptimizerKind::sgd);
        QCOMPARE(*back.optimizer.lr, 0.05);
        QCOMPARE(back.optimizer.momentum, 0.9);
        QCOMPARE(back.schedule.kind, ScheduleKind::cosine);
        QCOMPARE(back.schedule.warmup_steps, 10);
        QVERIFY(back.gradient_checkpointing);
        QCOMPARE(back.empty_cache_steps, 5);
        QCOMPARE(back.prefetch, 2);
        QCOMPARE(back.clip_grad_norm, 1.5);
        QCOMPARE(back.hidden, config.hidden);
    }

    void cudaEntryIsExplainedWhenUnavailable() {
        MainWindow window;
        auto* device = window.configPanel()->findChild<QComboBox*>("deviceCombo");
        QVERIFY(device->findData(QStringLiteral("cpu")) >= 0);
        bool has_usable_cuda = false;
        for (const auto& info : available_devices()) has_usable_cuda = has_usable_cuda || info.id.rfind("cuda", 0) == 0;
        if (has_usable_cuda) QSKIP("a CUDA device is available; the disabled entry only exists without one");
        const int index = device->findData(QStringLiteral("cuda"));
        QVERIFY(index >= 0);
        QVERIFY(!device->itemData(index, Qt::ToolTipRole).toString().isEmpty());
    }

    void presetsParseAndApply() {
        MainWindow window;  // initialises the resources
        const auto presets = load_presets();
        QVERIFY(presets.size() >= 5);
        for (const auto& preset : presets) {
            QVERIFY(!preset.name.isEmpty());
            window.configPanel()->setConfig(preset.config);
            QVERIFY2(window.configPanel()->isValid() || window.configPanel()->validationError().contains("dataset"),
                     qPrintable(preset.name + ": " + window.configPanel()->validationError()));
            QCOMPARE(window.configPanel()->config().batch_size, preset.config.batch_size);
        }
    }

    void lastSettingsAreRestored() {
        {
            MainWindow window;
            window.configPanel()->setConfig(testing::small_config(77, 4));
            window.close();
        }
        MainWindow reopened;
        QCOMPARE(reopened.configPanel()->config().step_size, 4);
        QCOMPARE(reopened.configPanel()->config().max_steps, 77);
    }
};

QTEST_MAIN(ConfigPanelTest)
#include "test_config_panel.moc"
