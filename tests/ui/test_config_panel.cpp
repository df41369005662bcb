// The settings panel: derived batching text, validation next to the control, Run gating,
// presets and restoring the last settings.
#include <QAction>
#include <QCheckBox>
#include <QLabel>
#include <QLineEdit>
#include <QSlider>
#include <QSpinBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QtTest>

#include "config_panel.hpp"
#include "trainbench/config_fields.hpp"
#include "trainbench/config_json.hpp"
#include "app_settings.hpp"
#include "main_window.hpp"
#include "plot_area.hpp"
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
        auto* batch = panel->findChild<QSpinBox*>("batch_size");
        auto* step = panel->findChild<QSpinBox*>("step_size");
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

        auto* step_slider = panel->findChild<QSlider*>("step_size_slider");
        step_slider->setValue(8);
        QCOMPARE(step->value(), 8);
        QCOMPARE(panel->config().step_size, 8);
        QVERIFY(derived->text().contains(QStringLiteral("micro-batch 8 × step_size 8")));

        auto* batch_slider = panel->findChild<QSlider*>("batch_size_slider");
        batch_slider->setValue(8);  // 2^8
        QCOMPARE(batch->value(), 256);
        QCOMPARE(panel->config().batch_size, 256);
    }

    // The live plan says what checkpointing frees before anything runs, and says so plainly when
    // it changes nothing (a ReLU MLP of 3 hidden layers), so that the checkbox promises no memory.
    void memoryPlanSaysWhatCheckpointingFrees() {
        MainWindow window;
        window.resize(1400, 900);
        auto* panel = window.configPanel();
        RunConfig config = testing::small_config(0);
        config.hidden = {64, 64, 64};
        config.gradient_checkpointing = true;
        panel->setConfig(config);
        auto* memory = panel->findChild<QLabel*>("memoryPlanLabel");
        QTRY_VERIFY_WITH_TIMEOUT(panel->plan().has_value(), 10000);
        QVERIFY2(memory->text().contains(QStringLiteral("nothing on this model")), qPrintable(memory->text()));
        if (const QString folder = qEnvironmentVariable("TRAINBENCH_SCREENSHOT_DIR"); !folder.isEmpty()) {
            window.show();
            QVERIFY(QTest::qWaitForWindowExposed(&window));
            QVERIFY(window.grab().save(QDir(folder).filePath(QStringLiteral("checkpointing-changes-nothing.png"))));
        }

        config.hidden = {64, 64, 64, 64};
        panel->setConfig(config);
        QTRY_VERIFY_WITH_TIMEOUT(memory->text().contains(QStringLiteral("less), for a second forward pass")), 10000);
        config.gradient_checkpointing = false;
        panel->setConfig(config);
        QTRY_VERIFY_WITH_TIMEOUT(!memory->text().contains(QStringLiteral("checkpointing")), 10000);
    }

    void stepSizeLargerThanBatchDisablesRun() {
        MainWindow window;
        auto* panel = window.configPanel();
        panel->setConfig(testing::small_config(0));
        auto* batch = panel->findChild<QSpinBox*>("batch_size");
        auto* step = panel->findChild<QSpinBox*>("step_size");
        auto* error = panel->findChild<QLabel*>("error_step_size");
        QVERIFY(error);
        QVERIFY(panel->isValid());
        QVERIFY(window.runAction()->isEnabled());

        batch->setValue(4);
        step->setValue(8);
        QVERIFY(!panel->isValid());
        QVERIFY(!error->isHidden());
        QVERIFY2(error->text().contains(QStringLiteral("step_size (8) is larger than batch_size (4)")), qPrintable(error->text()));
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
        auto* hidden = panel->findChild<QLineEdit*>("hidden");
        hidden->setText(QStringLiteral("128,abc"));
        emit hidden->textEdited(hidden->text());
        QVERIFY(!panel->isValid());
        QVERIFY(!panel->findChild<QLabel*>("error_hidden")->isHidden());
        hidden->setText(QStringLiteral("64, 32"));
        emit hidden->textEdited(hidden->text());
        QVERIFY(panel->isValid());
        QCOMPARE(panel->config().hidden, (std::vector<int64_t>{64, 32}));

        auto* budget = panel->findChild<QLineEdit*>("memory_limit_bytes");
        budget->setText(QStringLiteral("lots"));
        emit budget->textEdited(budget->text());
        QVERIFY(!panel->isValid());
        QVERIFY(!panel->findChild<QLabel*>("error_memory_limit_bytes")->isHidden());
        budget->setText(QStringLiteral("512MiB"));
        emit budget->textEdited(budget->text());
        QVERIFY(panel->isValid());
        QCOMPARE(panel->config().memory_limit_bytes, int64_t{512} * 1024 * 1024);
    }

    void choosingAnOptimizerSetsItsDefaultLearningRate() {
        MainWindow window;
        auto* panel = window.configPanel();
        auto* optimizer = panel->findChild<QComboBox*>("optimizer.kind");
        optimizer->setCurrentIndex(optimizer->findData(QStringLiteral("rmsprop")));
        QCOMPARE(panel->config().optimizer.kind, OptimizerKind::rmsprop);
        QCOMPARE(panel->config().optimizer.resolved_lr(), 1e-2);
        QCOMPARE(panel->findChild<QDoubleSpinBox*>("optimizer.lr")->value(), 1e-2);
        auto* lr = panel->findChild<QDoubleSpinBox*>("optimizer.lr");
        lr->setValue(0.0005);
        QCOMPARE(*panel->config().optimizer.lr, 0.0005);
    }

    void configRoundTripsThroughThePanel() {
        MainWindow window;
        RunConfig config = testing::small_config(123, 4);
        config.precision = Precision::bf16;
        config.optimizer.kind = OptimizerKind::sgd;
        config.optimizer.lr = 0.05;
        config.optimizer.momentum = 0.9;
        config.optimizer.nesterov = true;
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
        QVERIFY(back.optimizer.nesterov);
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
        auto* device = window.configPanel()->findChild<QComboBox*>("device");
        QVERIFY(device->findData(QStringLiteral("cpu")) >= 0);
        bool has_usable_cuda = false;
        for (const auto& info : available_devices()) has_usable_cuda = has_usable_cuda || info.id.rfind("cuda", 0) == 0;
        if (has_usable_cuda) QSKIP("a CUDA device is available; the disabled entry only exists without one");
        const int index = device->findData(QStringLiteral("cuda"));
        QVERIFY(index >= 0);
        QVERIFY(!device->itemData(index, Qt::ToolTipRole).toString().isEmpty());
    }

    // Picking GPT shows the GPT's fields, loads its defaults, and the live plan follows n_layer.
    void gptFamilyShowsItsFieldsAndPlan() {
        MainWindow window;
        auto* panel = window.configPanel();
        panel->setConfig(testing::small_config(0));
        auto* model = panel->findChild<QComboBox*>("model");
        auto* n_layer = panel->findChild<QSpinBox*>("n_layer");
        auto* hidden = panel->findChild<QLineEdit*>("hidden");
        QVERIFY(model && n_layer && hidden);
        QVERIFY(!n_layer->isVisibleTo(panel));
        QVERIFY(hidden->isVisibleTo(panel));

        model->setCurrentIndex(model->findData(QStringLiteral("gpt")));
        QCOMPARE(panel->config().model, ModelFamily::gpt);
        QCOMPARE(panel->config().dataset, std::string("kjv"));               // the family's defaults
        QCOMPARE(panel->config().optimizer.kind, OptimizerKind::adamw);
        QCOMPARE(panel->config().threads, testing::small_config(0).threads);  // the machine's settings stay
        QVERIFY(n_layer->isVisibleTo(panel));
        QVERIFY(!hidden->isVisibleTo(panel));

        RunConfig gpt = panel->config();
        gpt.dataset = "text:" TRAINBENCH_FIXTURES_DIR "/text/bible_plain.txt";
        gpt.n_layer = 2;
        gpt.n_embd = 32;
        gpt.n_head = 4;
        gpt.block_size = 32;
        gpt.batch_size = 16;
        gpt.step_size = 2;
        panel->setConfig(gpt);
        auto* size = panel->findChild<QLabel*>("modelSizeLabel");
        auto* memory = panel->findChild<QLabel*>("memoryPlanLabel");
        auto* derived = panel->findChild<QLabel*>("derivedBatchLabel");
        QTRY_VERIFY_WITH_TIMEOUT(panel->plan().has_value(), 10000);  // the text loads on a worker
        QVERIFY2(derived->text().contains(QStringLiteral("512 tokens per update")), qPrintable(derived->text()));
        QVERIFY2(size->text().contains(QStringLiteral("GPT L2")), qPrintable(size->text()));
        QVERIFY2(size->text().contains(QStringLiteral("per token")), qPrintable(size->text()));
        QVERIFY2(memory->text().contains(QStringLiteral("activations")), qPrintable(memory->text()));
        QVERIFY2(memory->text().contains(QStringLiteral("Memory traffic per update")), qPrintable(memory->text()));
        // What the CPU products setting chose on this CPU, as the plan names it.
        QVERIFY2(memory->text().contains(QStringLiteral("Matrix products: ") + QString::fromStdString(panel->plan()->products)),
                 qPrintable(memory->text()));
        QVERIFY(!panel->plan()->products.empty());
        const int64_t two_layers = panel->plan()->parameter_count;
        const QString two_layer_memory = memory->text();

        n_layer->setValue(4);
        QVERIFY(panel->plan().has_value());
        QCOMPARE(panel->config().n_layer, 4);
        QVERIFY(panel->plan()->parameter_count > two_layers);
        QVERIFY2(size->text().contains(QStringLiteral("GPT L4")), qPrintable(size->text()));
        QVERIFY(memory->text() != two_layer_memory);
        // Each block adds 12 C^2 + 13 C parameters (attention, MLP, two LayerNorms).
        QCOMPARE(panel->plan()->parameter_count - two_layers, int64_t{2 * (12 * 32 * 32 + 13 * 32)});
    }

    // LoRA's fields on the GPT and the convolution channels on the CNN are rows of the form, and
    // the plan follows them: a frozen base shows as the trainable count.
    void loraAndConvolutionChannelsAreRowsOfTheForm() {
        MainWindow window;
        auto* panel = window.configPanel();
        RunConfig gpt = default_config(ModelFamily::gpt);
        gpt.dataset = "text:" TRAINBENCH_FIXTURES_DIR "/text/bible_plain.txt";
        gpt.n_layer = 2, gpt.n_embd = 32, gpt.n_head = 4, gpt.block_size = 32, gpt.batch_size = 16;
        panel->setConfig(gpt);
        auto* rank = panel->findChild<QSpinBox*>("lora_rank");
        auto* targets = panel->findChild<QLineEdit*>("lora_targets");
        auto* channels = panel->findChild<QLineEdit*>("channels");
        QVERIFY(rank && targets && channels);
        QVERIFY(rank->isVisibleTo(panel) && targets->isVisibleTo(panel));
        QVERIFY(!channels->isVisibleTo(panel));
        QTRY_VERIFY_WITH_TIMEOUT(panel->plan().has_value(), 10000);
        const int64_t all = panel->plan()->parameter_count;
        QCOMPARE(panel->plan()->trainable_parameter_count, all);

        rank->setValue(4);
        targets->clear();
        QTest::keyClicks(targets, QStringLiteral("c_fc"));  // typed, as a user edits it
        QCOMPARE(panel->config().lora_rank, int64_t{4});
        QCOMPARE(panel->config().lora_targets, std::string("c_fc"));
        // Rank-4 adapters on each block's c_fc (32 -> 128): A 4 x 32 and B 128 x 4 (the plan
        // follows the edit once the panel replans).
        QTRY_COMPARE_WITH_TIMEOUT(panel->plan() ? panel->plan()->trainable_parameter_count : int64_t{-1},
                                  int64_t{2 * (4 * 32 + 128 * 4)}, 10000);
        QCOMPARE(panel->plan()->parameter_count, all + 2 * (4 * 32 + 128 * 4));
        auto* size = panel->findChild<QLabel*>("modelSizeLabel");
        QVERIFY2(size->text().contains(QStringLiteral("1,280 trainable")), qPrintable(size->text()));
        QTest::keyClicks(targets, QStringLiteral(",qkv"));
        QVERIFY(!panel->findChild<QLabel*>("error_lora_targets")->isHidden());

        auto* model = panel->findChild<QComboBox*>("model");
        model->setCurrentIndex(model->findData(QStringLiteral("cnn")));
        QVERIFY(channels->isVisibleTo(panel));
        QVERIFY(!rank->isVisibleTo(panel));
        channels->clear();
        QTest::keyClicks(channels, QStringLiteral("8, 16"));
        QCOMPARE(panel->config().channels, (std::vector<int64_t>{8, 16}));
    }

    // The engine's objections land on the row of the field they name.
    void engineErrorsLandOnTheirField() {
        MainWindow window;
        auto* panel = window.configPanel();
        RunConfig gpt = default_config(ModelFamily::gpt);
        gpt.dataset = "text:" TRAINBENCH_FIXTURES_DIR "/text/bible_plain.txt";
        gpt.n_layer = 1;
        gpt.n_embd = 32;
        gpt.n_head = 4;
        gpt.block_size = 32;
        panel->setConfig(gpt);
        QTRY_VERIFY_WITH_TIMEOUT(panel->plan().has_value(), 10000);
        QVERIFY(window.runAction()->isEnabled());

        panel->findChild<QSpinBox*>("n_head")->setValue(3);
        QVERIFY(!panel->isValid());
        auto* error = panel->findChild<QLabel*>("error_n_head");
        QVERIFY(error && !error->isHidden());
        QVERIFY2(error->text().contains(QStringLiteral("do not divide")), qPrintable(error->text()));
        QVERIFY(!window.runAction()->isEnabled());
        panel->findChild<QSpinBox*>("n_head")->setValue(4);
        QVERIFY(panel->isValid());
        QVERIFY(error->isHidden());

        // A budget the plan does not fit is refused before any run, on the budget's row.
        auto* budget = panel->findChild<QLineEdit*>("memory_limit_bytes");
        budget->setText(QStringLiteral("64KiB"));
        emit budget->textEdited(budget->text());
        QVERIFY(!panel->isValid());
        auto* budget_error = panel->findChild<QLabel*>("error_memory_limit_bytes");
        QVERIFY2(!budget_error->isHidden() && budget_error->text().contains(QStringLiteral("needs")),
                 qPrintable(budget_error->text()));
        budget->setText(QStringLiteral("1GiB"));
        emit budget->textEdited(budget->text());
        QVERIFY(panel->isValid());
        QVERIFY2(panel->findChild<QLabel*>("memoryPlanLabel")->text().contains(QStringLiteral("fits the 1 GiB budget")),
                 qPrintable(panel->findChild<QLabel*>("memoryPlanLabel")->text()));
    }

    // Every field of the engine's table that the app shows has a control named by its key.
    void everyTableFieldHasAControl() {
        MainWindow window;
        for (const ConfigField& field : config_fields()) {
            if (!field.in_app) continue;
            QVERIFY2(window.configPanel()->findChild<QWidget*>(QString::fromStdString(field.key)),
                     field.key.c_str());
            QVERIFY2(window.configPanel()->findChild<QLabel*>(QString::fromStdString("error_" + field.key)),
                     field.key.c_str());
        }
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
            QCOMPARE(window.configPanel()->config().model, preset.config.model);
            for (const RunConfig& variant : preset.variants) {
                // A variant changes some knob and keeps the model.
                QVERIFY2(config_to_json(variant) != config_to_json(preset.config), qPrintable(preset.name));
                QCOMPARE(variant.model, preset.config.model);
                QCOMPARE(variant.n_layer, preset.config.n_layer);
            }
        }
        // The GPT presets the issue asks for, comparisons with two runs each.
        int gpt_comparisons = 0;
        for (const auto& preset : presets)
            if (preset.config.model == ModelFamily::gpt && preset.variants.size() == 1) ++gpt_comparisons;
        QCOMPARE(gpt_comparisons, 3);
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

    // The plots' controls (x-axis, smoothing, log-scale loss, throughput) as they were left.
    void plotViewIsRestored() {
        {
            MainWindow window;
            auto* x_axis = window.findChild<QComboBox*>(QStringLiteral("xAxisCombo"));
            auto* throughput = window.findChild<QComboBox*>(QStringLiteral("throughputCombo"));
            auto* smoothing = window.findChild<QSlider*>(QStringLiteral("smoothingSlider"));
            auto* log_y = window.findChild<QCheckBox*>(QStringLiteral("logYCheck"));
            QVERIFY(x_axis && throughput && smoothing && log_y);
            QCOMPARE(x_axis->currentText(), QStringLiteral("update"));  // the defaults, first
            QCOMPARE(throughput->currentText(), QStringLiteral("auto"));
            x_axis->setCurrentIndex(x_axis->findText(QStringLiteral("wall time")));
            throughput->setCurrentIndex(throughput->findText(QStringLiteral("MFU %")));
            smoothing->setValue(85);
            log_y->setChecked(true);
            window.close();
        }
        MainWindow reopened;
        QCOMPARE(reopened.findChild<QComboBox*>(QStringLiteral("xAxisCombo"))->currentText(), QStringLiteral("wall time"));
        QCOMPARE(reopened.findChild<QComboBox*>(QStringLiteral("throughputCombo"))->currentText(), QStringLiteral("MFU %"));
        QCOMPARE(reopened.findChild<QSlider*>(QStringLiteral("smoothingSlider"))->value(), 85);
        QVERIFY(reopened.findChild<QCheckBox*>(QStringLiteral("logYCheck"))->isChecked());
        const PlotView view = reopened.findChild<PlotArea*>()->view();
        QCOMPARE(view.x_axis, XAxisKind::wall_time);
        QCOMPARE(view.throughput, ThroughputUnit::mfu);
        // Settings written by hand or by another version fall back to the defaults.
        AppSettings settings;
        settings.raw().setValue(QStringLiteral("view/x_axis"), 17);
        settings.raw().setValue(QStringLiteral("view/smoothing"), QStringLiteral("lots"));
        settings.raw().sync();
        QCOMPARE(settings.lastView().x_axis, XAxisKind::update);
        QCOMPARE(settings.lastView().smoothing, 0.6);
    }
};

QTEST_MAIN(ConfigPanelTest)
#include "test_config_panel.moc"
