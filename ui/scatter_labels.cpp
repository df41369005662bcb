#include "scatter_labels.hpp"

#include <algorithm>
#include <numeric>

namespace trainbench::ui {

std::vector<LabelPlacement> place_scatter_labels(const std::vector<QPointF>& points, const std::vector<QSizeF>& sizes,
                                                 const QRectF& area, double marker_radius) {
    const std::size_t n = points.size();
    std::vector<QRectF> markers;
    for (const QPointF& p : points)
        markers.emplace_back(p.x() - marker_radius - 1, p.y() - marker_radius - 1, 2 * marker_radius + 2,
                             2 * marker_radius + 2);
    // Left to right, so that a cluster's labels fan out in a stable order.
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return points[a].x() != points[b].x() ? points[a].x() < points[b].x() : points[a].y() < points[b].y();
    });
    std::vector<LabelPlacement> placed(n);
    std::vector<QRectF> taken;
    const double gap = marker_radius + 4;
    for (std::size_t i : order) {
        const QPointF p = points[i];
        const double w = sizes[i].width(), h = sizes[i].height();
        // Top-left corners relative to the point: beside it first (right, left, above, below),
        // then stepped away vertically on either side, with a leader line.
        std::vector<std::pair<QPointF, bool>> candidates = {
            {{gap, -h / 2}, false},          {{gap, -h - 2}, false},      {{gap, 2}, false},
            {{-gap - w, -h / 2}, false},     {{-gap - w, -h - 2}, false}, {{-gap - w, 2}, false},
            {{-w / 2, -gap - h}, false},     {{-w / 2, gap}, false}};
        for (int step = 1; step <= 12; ++step)
            for (double side : {gap, -gap - w})
                for (double direction : {-1.0, 1.0})
                    candidates.push_back({{side, -h / 2 + direction * step * (h + 3)}, true});
        auto fits = [&](const QRectF& box) {
            if (!area.contains(box)) return false;
            for (const QRectF& other : taken)
                if (other.intersects(box)) return false;
            for (const QRectF& marker : markers)
                if (marker.intersects(box)) return false;
            return true;
        };
        LabelPlacement choice{QRectF(p + candidates.front().first, sizes[i]), false};
        bool found = false;
        for (const auto& [offset, leader] : candidates) {
            const QRectF box(p + offset, sizes[i]);
            if (fits(box)) {
                choice = {box, leader};
                found = true;
                break;
            }
        }
        if (!found) {  // no room anywhere: beside the point, kept inside the area
            QRectF box = choice.box;
            box.moveLeft(std::clamp(box.left(), area.left(), std::max(area.left(), area.right() - w)));
            box.moveTop(std::clamp(box.top(), area.top(), std::max(area.top(), area.bottom() - h)));
            choice.box = box;
        }
        taken.push_back(choice.box);
        placed[i] = choice;
    }
    return placed;
}

}  // namespace trainbench::ui
