// DynamicLossScaler follows torch.cuda.amp.GradScaler: back off and skip on inf, grow after
// growth_interval consecutive clean updates.
#include <QtTest/QtTest>

#include <cmath>

#include "precision/loss_scaler.hpp"
#include "trainbench/error.hpp"

using namespace trainbench;

class TestLossScaler : public QObject {
    Q_OBJECT

private slots:
    void starts_at_gradscaler_defaults() {
        DynamicLossScaler scaler;
        QCOMPARE(scaler.scale(), 65536.0);
        QCOMPARE(scaler.clean_streak(), int64_t{0});
    }

    void overflow_halves_and_skips() {
        DynamicLossScaler scaler;
        QVERIFY(scaler.update(true));
        QCOMPARE(scaler.scale(), 32768.0);
        QVERIFY(scaler.update(true));
        QCOMPARE(scaler.scale(), 16384.0);
        QVERIFY(!scaler.update(false));
        QCOMPARE(scaler.scale(), 16384.0);
    }

    void grows_after_growth_interval_clean_updates() {
        DynamicLossScaler scaler(1024.0, 2.0, 0.5, 3);
        QVERIFY(!scaler.update(false));
        QVERIFY(!scaler.update(false));
        QCOMPARE(scaler.scale(), 1024.0);
        QCOMPARE(scaler.clean_streak(), int64_t{2});
        QVERIFY(!scaler.update(false));
        QCOMPARE(scaler.scale(), 2048.0);
        QCOMPARE(scaler.clean_streak(), int64_t{0});
        for (int i = 0; i < 3; ++i) QVERIFY(!scaler.update(false));
        QCOMPARE(scaler.scale(), 4096.0);
    }

    void overflow_resets_the_clean_streak() {
        DynamicLossScaler scaler(1024.0, 2.0, 0.5, 3);
        scaler.update(false);
        scaler.update(false);
        QVERIFY(scaler.update(true));
        QCOMPARE(scaler.scale(), 512.0);
        QCOMPARE(scaler.clean_streak(), int64_t{0});
        // Two more clean updates are not enough: the streak starts over after the overflow.
        scaler.update(false);
        scaler.update(false);
        QCOMPARE(scaler.scale(), 512.0);
        scaler.update(false);
        QCOMPARE(scaler.scale(), 1024.0);
    }

    void default_interval_is_2000_updates() {
        DynamicLossScaler scaler;
        for (int i = 0; i < 1999; ++i) QVERIFY(!scaler.update(false));
        QCOMPARE(scaler.scale(), 65536.0);
        QCOMPARE(scaler.clean_streak(), int64_t{1999});
        QVERIFY(!scaler.update(false));
        QCOMPARE(scaler.scale(), 131072.0);
        QCOMPARE(scaler.clean_streak(), int64_t{0});
    }

    void growth_that_would_overflow_float_keeps_the_scale() {
        DynamicLossScaler scaler(std::ldexp(1.0, 127), 2.0, 0.5, 1);
        scaler.update(false);
        QCOMPARE(scaler.scale(), std::ldexp(1.0, 127));
        QCOMPARE(scaler.clean_streak(), int64_t{0});
    }

    void restore_continues_a_checkpointed_streak() {
        DynamicLossScaler scaler(65536.0, 2.0, 0.5, 4);
        scaler.restore(256.0, 3);
        QCOMPARE(scaler.scale(), 256.0);
        QCOMPARE(scaler.clean_streak(), int64_t{3});
        scaler.update(false);
        QCOMPARE(scaler.scale(), 512.0);
        QVERIFY_THROWS_EXCEPTION(Error, scaler.restore(256.0, 4));
        QVERIFY_THROWS_EXCEPTION(Error, scaler.restore(0.0, 0));
    }

    void rejects_settings_gradscaler_rejects() {
        QVERIFY_THROWS_EXCEPTION(Error, DynamicLossScaler(0.0));
        QVERIFY_THROWS_EXCEPTION(Error, DynamicLossScaler(65536.0, 1.0));
        QVERIFY_THROWS_EXCEPTION(Error, DynamicLossScaler(65536.0, 2.0, 1.0));
        QVERIFY_THROWS_EXCEPTION(Error, DynamicLossScaler(65536.0, 2.0, 0.5, 0));
    }
};

QTEST_APPLESS_MAIN(TestLossScaler)
#include "test_loss_scaler.moc"
