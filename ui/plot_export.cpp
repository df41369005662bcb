#include "plot_export.hpp"

#include <QFileInfo>
#include <QSvgGenerator>
#include <qcustomplot.h>

#include "trainbench/error.hpp"

namespace trainbench::ui {
namespace {

constexpr int kDefaultWidth = 1200;
constexpr int kDefaultHeight = 600;

void save_svg(QCustomPlot& plot, const QString& path, int width, int height) {
    QSvgGenerator generator;
    generator.setFileName(path);
    generator.setSize(QSize(width, height));
    generator.setViewBox(QRect(0, 0, width, height));
    generator.setTitle(plot.objectName());
    generator.setDescription(QStringLiteral("TrainBench plot"));
    QCPPainter painter;
    if (!painter.begin(&generator)) throw Error("cannot write " + path.toStdString());
    plot.toPainter(&painter, width, height);
    painter.end();
}

}  // namespace

void save_plot(QCustomPlot& plot, const QString& path) {
    const QString suffix = QFileInfo(path).suffix().toLower();
    const int width = plot.width() > 100 ? plot.width() : kDefaultWidth;
    const int height = plot.height() > 100 ? plot.height() : kDefaultHeight;
    bool ok = true;
    if (suffix == QStringLiteral("png"))
        ok = plot.savePng(path, width, height, 2.0);
    else if (suffix == QStringLiteral("pdf"))
        ok = plot.savePdf(path, width, height);
    else if (suffix == QStringLiteral("svg"))
        save_svg(plot, path, width, height);
    else
        throw Error("unknown plot format '." + suffix.toStdString() + "'; use .png, .pdf or .svg");
    if (!ok || QFileInfo(path).size() == 0)
        throw Error("cannot write " + path.toStdString() + "; choose a folder you can write to");
}

std::vector<QString> save_plots(const std::vector<std::pair<QString, QCustomPlot*>>& plots, const QString& path) {
    const QFileInfo info(path);
    std::vector<QString> written;
    for (const auto& [name, plot] : plots) {
        const QString target =
            info.dir().filePath(QStringLiteral("%1-%2.%3").arg(info.completeBaseName(), name, info.suffix()));
        save_plot(*plot, target);
        written.push_back(target);
    }
    return written;
}

}  // namespace trainbench::ui
