#include "data/synthetic_sets.hpp"

#include <cmath>
#include <numbers>

#include "data/portable_random.hpp"
#include "trainbench/error.hpp"

namespace trainbench::data {
namespace {

constexpr double pi = std::numbers::pi;

struct Point {
    double x;
    double y;
};

// Three arms that wind once around the origin, interleaved, so no straight line separates
// them; they start away from the centre, where arms would otherwise overlap, which keeps the
// set cleanly learnable by a small MLP.
Point spiral_point(int64_t arm, PortableRandom& random) {
    const double radius = random.uniform(0.15, 1.0);
    const double angle = arm * (2.0 * pi / 3.0) + radius * 2.0 * pi;
    return {radius * std::cos(angle) + random.normal(0.0, 0.02),
            radius * std::sin(angle) + random.normal(0.0, 0.02)};
}

// Two interleaved half circles (as scikit-learn's make_moons).
Point moon_point(int64_t moon, PortableRandom& random) {
    const double t = random.uniform(0.0, pi);
    const Point clean = moon == 0 ? Point{std::cos(t), std::sin(t)}
                                  : Point{1.0 - std::cos(t), 0.5 - std::sin(t)};
    return {clean.x + random.normal(0.0, 0.1), clean.y + random.normal(0.0, 0.1)};
}

// Four gaussian blobs at the corners of a square; they overlap a little, so a few points sit
// on the wrong side of any boundary.
Point blob_point(int64_t blob, PortableRandom& random) {
    static constexpr Point centres[4] = {{-2.0, -2.0}, {2.0, -2.0}, {-2.0, 2.0}, {2.0, 2.0}};
    return {random.normal(centres[blob].x, 0.9), random.normal(centres[blob].y, 0.9)};
}

LabeledTable make_point_classes(int64_t samples, int64_t classes, PortableRandom& random,
                                Point (*draw)(int64_t, PortableRandom&)) {
    LabeledTable table;
    table.task = Task::classification;
    table.num_classes = classes;
    table.rows.count = samples;
    table.rows.features = 2;
    table.rows.values_f32.resize(static_cast<size_t>(samples) * 2);
    table.rows.labels.resize(static_cast<size_t>(samples));
    for (int64_t i = 0; i < samples; ++i) {
        const int64_t label = i % classes;
        const Point point = draw(label, random);
        table.rows.values_f32[2 * i] = static_cast<float>(point.x);
        table.rows.values_f32[2 * i + 1] = static_cast<float>(point.y);
        table.rows.labels[i] = static_cast<int32_t>(label);
    }
    return table;
}

LabeledTable make_sine(int64_t samples, PortableRandom& random) {
    LabeledTable table;
    table.task = Task::regression;
    table.rows.count = samples;
    table.rows.features = 1;
    table.rows.values_f32.resize(static_cast<size_t>(samples));
    table.rows.targets.resize(static_cast<size_t>(samples));
    for (int64_t i = 0; i < samples; ++i) {
        const double x = random.uniform(-pi, pi);
        table.rows.values_f32[i] = static_cast<float>(x);
        table.rows.targets[i] = static_cast<float>(std::sin(x) + random.normal(0.0, 0.05));
    }
    return table;
}

}  // namespace

bool is_synthetic_set(const std::string& name) {
    return name == "spirals" || name == "moons" || name == "blobs" || name == "sine";
}

LabeledTable make_synthetic_set(const std::string& name, int64_t samples, uint64_t seed) {
    if (samples < 2) {
        throw Error("synthetic_samples is " + std::to_string(samples) + " for data set '" +
                    name + "'; generate at least 2 rows (e.g. 4000)");
    }
    PortableRandom random(seed);
    if (name == "spirals") return make_point_classes(samples, 3, random, spiral_point);
    if (name == "moons") return make_point_classes(samples, 2, random, moon_point);
    if (name == "blobs") return make_point_classes(samples, 4, random, blob_point);
    if (name == "sine") return make_sine(samples, random);
    throw Error("unknown synthetic data set '" + name + "'; use spirals, moons, blobs or sine");
}

}  // namespace trainbench::data
