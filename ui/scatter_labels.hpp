#pragma once
#include <QPointF>
#include <QRectF>
#include <QSizeF>
#include <vector>

namespace trainbench::ui {

// Where the labels of a scatter plot's points go, in pixels: each beside its point where there
// is room, otherwise further up or down with a leader line back to it, so that no label covers
// another label or any point's marker and every label stays inside `area` where it can.
struct LabelPlacement {
    QRectF box;
    bool leader = false;  // moved away from its point: draw a line to it
};

// points[i] is labelled by a box of sizes[i]; markers are discs of `marker_radius` pixels.
std::vector<LabelPlacement> place_scatter_labels(const std::vector<QPointF>& points, const std::vector<QSizeF>& sizes,
                                                 const QRectF& area, double marker_radius);

}  // namespace trainbench::ui
