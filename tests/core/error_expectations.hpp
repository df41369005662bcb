#pragma once
// What the data-loading tests expect of a refusal: an Error, of one line, naming the problem;
// and the files they write to provoke one.
#include <QFile>
#include <QString>
#include <QtTest>

#include <functional>

#include "trainbench/error.hpp"

namespace {

// Runs `action`, which must throw Error; returns its message ("" when nothing was thrown).
QString error_of(const std::function<void()>& action) {
    try {
        action();
    } catch (const trainbench::Error& error) {
        return QString::fromStdString(error.what());
    }
    return {};
}

#define EXPECT_ERROR_CONTAINS(action, fragment)                                             \
    do {                                                                                     \
        const QString message_ = error_of([&] { action; });                                  \
        QVERIFY2(!message_.isEmpty(), "expected an Error, none was thrown");                \
        QVERIFY2(message_.contains(fragment),                                                \
                 qPrintable(QStringLiteral("message '%1' lacks '%2'").arg(message_, fragment))); \
        QVERIFY2(!message_.contains('\n'), "error message must be one line");               \
    } while (0)

void write_file(const QString& path, const QByteArray& bytes) {
    QFile file(path);
    QVERIFY(file.open(QIODevice::WriteOnly));
    QCOMPARE(file.write(bytes), bytes.size());
}

}  // namespace
