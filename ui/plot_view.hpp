#pragma once
#include "speed_plot.hpp"
#include "x_axis.hpp"

namespace trainbench::ui {

// How the plots are looked at: the controls above them (PlotArea), which the app keeps between
// sessions with its other settings (AppSettings).
struct PlotView {
    XAxisKind x_axis = XAxisKind::update;
    double smoothing = 0.6;  // the loss and update-time curves' moving-average weight, [0, 0.99]
    bool log_scale_loss = false;
    ThroughputUnit throughput = ThroughputUnit::automatic;
};

}  // namespace trainbench::ui
