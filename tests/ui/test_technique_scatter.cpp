// The "Measure techniques" scatter of time per update against peak memory: its point labels
// never overlap one another or a point, even where techniques measure the same (data
// preloading, the empty cache, the optimizer and both mixed precisions sit on top of each other
// for a small model), and each stays inside the plot.
//
// With TRAINBENCH_SCREENSHOT_DIR set, the dialog with such a cluster is saved there as
// technique-scatter.png to be looked at.
#include <QDir>
#include <QtTest>
#include <qcustomplot.h>

#include "scatter_labels.hpp"
#include "technique_comparison_dialog.hpp"
#include "ui_test_support.hpp"

using namespace trainbench;
using namespace trainbench::ui;

namespace {

bool overlaps_any(const std::vector<QRectF>& boxes) {
    for (std::size_t a = 0; a < boxes.size(); ++a)
        for (std::size_t b = a + 1; b < boxes.size(); ++b)
            if (boxes[a].intersects(boxes[b])) return true;
    return false;
}

ComparisonRow row(Technique technique, double ms, double mib) {
    ComparisonRow r;
    r.technique = technique;
    r.change = to_string(technique);
    r.ok = true;
    r.updates = 100;
    r.samples_per_update = 64;
    r.median_update_ms = ms;
    r.samples_per_second = 64 / (ms / 1000.0);
    r.peak_memory_bytes = static_cast<int64_t>(mib * 1024 * 1024);
    r.final_loss = 0.5;
    return r;
}

}  // namespace

class TechniqueScatterTest : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { testing::isolate_settings(); }

    // Eight labels on five points within a few pixels of each other, and three far apart.
    void clusteredLabelsDoNotOverlap() {
        const QRectF area(0, 0, 600, 300);
        std::vector<QPointF> points = {{300, 150}, {302, 151}, {299, 149}, {304, 153}, {301, 148},
                                       {60, 40},   {590, 290}, {20, 280}};
        std::vector<QSizeF> sizes(points.size(), QSizeF(120, 14));
        const std::vector<LabelPlacement> placed = place_scatter_labels(points, sizes, area, 5.0);
        QCOMPARE(placed.size(), points.size());
        std::vector<QRectF> boxes;
        for (const LabelPlacement& p : placed) boxes.push_back(p.box);
        QVERIFY(!overlaps_any(boxes));
        for (std::size_t i = 0; i < placed.size(); ++i) {
            QVERIFY2(area.contains(placed[i].box), qPrintable(QString("label %1 leaves the plot").arg(i)));
            for (const QPointF& point : points)
                QVERIFY(!placed[i].box.intersects(QRectF(point.x() - 6, point.y() - 6, 12, 12)));
        }
        // A lone point's label sits beside it, with no leader line.
        QVERIFY(!placed[5].leader);
        QVERIFY(placed[5].box.left() > points[5].x());
        // In the cluster, some labels had to move away: they get a leader line.
        int leaders = 0;
        for (std::size_t i = 0; i < 5; ++i) leaders += placed[i].leader ? 1 : 0;
        QVERIFY(leaders > 0);
    }

    // The dialog's own labels, after layout, for a small model's typical cluster.
    void dialogLabelsDoNotOverlap() {
        RunConfig base = testing::small_config(0);
        TechniqueComparisonDialog dialog(base, nullptr, QString());
        dialog.showRows({row(Technique::baseline, 0.50, 0.40), row(Technique::batch_size, 0.80, 0.62),
                         row(Technique::gradient_accumulation, 0.71, 0.36), row(Technique::gradient_checkpointing, 0.55, 0.39),
                         row(Technique::mixed_precision, 0.51, 0.41), row(Technique::mixed_precision_fp16, 0.52, 0.41),
                         row(Technique::empty_cache, 0.50, 0.40), row(Technique::optimizer_choice, 0.49, 0.38),
                         row(Technique::data_preloading, 0.51, 0.40), row(Technique::fused_kernels, 0.60, 0.40)});
        dialog.show();
        QVERIFY(QTest::qWaitForWindowExposed(&dialog));
        auto* plot = dialog.findChild<QCustomPlot*>(QStringLiteral("comparisonScatter"));
        QVERIFY(plot);
        plot->replot();
        std::vector<QRectF> boxes;
        for (int i = 0; i < plot->itemCount(); ++i)
            if (auto* text = qobject_cast<QCPItemText*>(plot->item(i)))
                boxes.emplace_back(text->topLeft->pixelPosition(), text->bottomRight->pixelPosition());
        QCOMPARE(boxes.size(), std::size_t(10));
        QVERIFY(!overlaps_any(boxes));
        for (const QRectF& box : boxes) QVERIFY(QRectF(plot->axisRect()->rect()).contains(box));
        const QString folder = qEnvironmentVariable("TRAINBENCH_SCREENSHOT_DIR");
        if (!folder.isEmpty()) QVERIFY(dialog.grab().save(QDir(folder).filePath(QStringLiteral("technique-scatter.png"))));
    }
};

QTEST_MAIN(TechniqueScatterTest)
#include "test_technique_scatter.moc"
