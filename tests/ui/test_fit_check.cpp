// "Will it fit?" in the settings panel: the current settings planned for a device the machine
// does not have (a CUDA GPU of any size, here on a machine without one), saying nothing was run,
// with the CUDA context counted, and the what-if table of the knobs in a dialog whose rows are the
// planner's and whose least-memory row is marked once.
//
// With TRAINBENCH_SCREENSHOT_DIR set, the widget and the dialog are saved there as
// fit-check.png and what-if.png to be looked at.
#include <QApplication>
#include <QComboBox>
#include <QDialog>
#include <QDir>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTimer>
#include <QtTest>

#include "fit_check.hpp"
#include "trainbench/memory_fit.hpp"
#include "trainbench/trainer.hpp"

using namespace trainbench;
using namespace trainbench::ui;

class FitCheckTest : public QObject {
    Q_OBJECT

    QTemporaryDir scratch_;
    RunConfig config_;
    std::shared_ptr<const Dataset> data_;

    void save(QWidget& widget, const QString& name) {
        const QString folder = qEnvironmentVariable("TRAINBENCH_SCREENSHOT_DIR");
        if (!folder.isEmpty()) QVERIFY(widget.grab().save(QDir(folder).filePath(name)));
    }

private slots:
    void initTestCase() {
        QVERIFY(scratch_.isValid());
        QFile text(scratch_.filePath("text.txt"));
        QVERIFY(text.open(QIODevice::WriteOnly));
        for (int i = 0; i < 200; ++i) text.write("In the beginning was the word, and the word was with the text.\n");
        text.close();
        config_ = default_config(ModelFamily::gpt);
        config_.dataset = "text:" + text.fileName().toStdString();
        config_.n_layer = 2;
        config_.n_head = 2;
        config_.n_embd = 32;
        config_.block_size = 16;
        config_.batch_size = 8;
        config_.step_size = 1;
        config_.eval_samples = 16;
        data_ = std::make_shared<const Dataset>(load_dataset(config_.dataset, data_options_for(config_)));
    }

    void plans_for_a_gpu_this_machine_lacks() {
        FitCheck check;
        check.resize(900, 80);
        check.setRun(config_, data_);
        QVERIFY2(check.verdict().contains("this machine's"), qPrintable(check.verdict()));
        auto* target = check.findChild<QComboBox*>("fitTarget");
        auto* memory = check.findChild<QDoubleSpinBox*>("fitMemoryGiB");
        QVERIFY(target && memory);
        target->setCurrentIndex(target->findData("cuda"));
        memory->setValue(24.0);
        const RunConfig planned = check.plannedConfig();
        QCOMPARE(planned.device, std::string("cuda"));
        const RunPlan plan = plan_run(planned, *data_);
        const int64_t needed = plan.planned_total() + kMeasuredCudaContextBytes;
        QVERIFY2(check.verdict().startsWith("Planned, nothing run: needs " + QString::fromStdString(format_bytes(needed))),
                 qPrintable(check.verdict()));
        QVERIFY2(check.verdict().contains("CUDA context"), qPrintable(check.verdict()));
        QVERIFY2(check.verdict().contains(": fits,"), qPrintable(check.verdict()));
        save(check, "fit-check.png");
        // A quarter GiB holds less than the context alone.
        memory->setValue(0.25);
        QVERIFY2(check.verdict().contains("does not fit, short by"), qPrintable(check.verdict()));
        // The configured device again.
        target->setCurrentIndex(target->findData("configured"));
        QVERIFY(!memory->isEnabled());
        QCOMPARE(check.plannedConfig().device, config_.device);
    }

    void what_if_dialog_lists_the_planners_rows() {
        FitCheck check;
        check.setRun(config_, data_);
        auto* target = check.findChild<QComboBox*>("fitTarget");
        target->setCurrentIndex(target->findData("cpu"));
        check.findChild<QDoubleSpinBox*>("fitMemoryGiB")->setValue(1.0);
        const std::vector<WhatIfRow> expected =
            what_if_table(check.plannedConfig(), *data_, device_budget(check.plannedConfig(), int64_t{1} << 30));
        int rows = -1, stars = 0;
        QString first_needed;
        QTimer::singleShot(0, this, [&] {
            auto* dialog = qobject_cast<QDialog*>(QApplication::activeModalWidget());
            if (!dialog) return;
            auto* table = dialog->findChild<QTableWidget*>("whatIfTable");
            if (table) {
                rows = table->rowCount();
                for (int r = 0; r < rows; ++r) stars += table->item(r, 0)->text().endsWith(QStringLiteral("★")) ? 1 : 0;
                first_needed = table->item(0, 3)->text();
            }
            save(*dialog, "what-if.png");
            dialog->reject();
        });
        check.showWhatIf();
        QCOMPARE(rows, int(expected.size()));
        QCOMPARE(stars, 1);
        QCOMPARE(first_needed, QString::fromStdString(format_bytes(expected.front().needed)));
    }
};

QTEST_MAIN(FitCheckTest)
#include "test_fit_check.moc"
