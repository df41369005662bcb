// --model cnn through the CLI, as a user runs it: wrong input gets one line naming the fix
// (a data set without images, the GPU, more blocks than the image can halve), and a short run
// on Fashion-MNIST trains (the loss falls, the plan names the model and its checkpointing
// segments cut the activations). The run skips, saying why, without Debian's
// dataset-fashion-mnist.
#include <QFile>
#include <QtTest>

#include "cli/cli_process.hpp"

class CliCnnTest : public QObject {
    Q_OBJECT
private slots:
    void wrong_input_gets_one_line() {
        struct Case {
            QStringList arguments;
            QString expected;
        };
        const QList<Case> cases = {
            {{"train", "--model", "cnn", "--dataset", "spirals"}, "--model cnn reads images; use --dataset fashion-mnist"},
            {{"train", "--model", "cnn", "--device", "cuda"}, "the CUDA engine has no convolution kernels yet: train the CNN with --device cpu"},
            {{"train", "--model", "cnn", "--channels", "8,8,8,8,8", "--max-steps", "1"},
             "--channels has 5 entries, but 4 blocks already halve a 28x28 image below 2x2 pixels; use at most 4 entries"},
            {{"train", "--model", "cnn", "--channels", "0"}, "--channels"},
        };
        for (const Case& c : cases) {
            if (c.arguments.contains("--max-steps") && !QFile::exists("/usr/share/datasets/fashion-mnist"))
                continue;  // the image size comes from the data set
            const CliRun run = run_cli(c.arguments);
            QVERIFY2(run.exit_code != 0, CLI_DIAGNOSTICS(run));
            QVERIFY2(run.err.contains(c.expected), qPrintable(run.err + " lacks " + c.expected));
            QCOMPARE(run.err.trimmed().count('\n'), 0);
        }
    }

    void short_run_trains_on_fashion_mnist() {
        if (!QFile::exists("/usr/share/datasets/fashion-mnist"))
            QSKIP("needs Debian's dataset-fashion-mnist (./scripts/setup.sh installs it)");
        const CliRun run = run_cli({"train", "--model", "cnn", "--channels", "8,16", "--hidden", "32", "--max-steps", "60",
                                    "--eval-samples", "500", "--threads", "2", "--gradient-checkpointing"},
                                   300000);
        QVERIFY2(run.exit_code == 0, CLI_DIAGNOSTICS(run));
        QVERIFY2(run.out.contains("CNN 1x28x28 c8-c16 32-10"), qPrintable(run.out));
        const qsizetype at = run.out.indexOf("accuracy ");
        QVERIFY2(at >= 0, qPrintable(run.out));
        const double accuracy = run.out.mid(at + 9, 6).remove('%').toDouble();
        qInfo("accuracy after 60 updates of 64 images: %.2f%%", accuracy);
        QVERIFY2(accuracy > 40.0, qPrintable(run.out));  // chance is 10%; 63% here
    }
};

QTEST_APPLESS_MAIN(CliCnnTest)
#include "test_cli_cnn.moc"
