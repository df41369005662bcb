#pragma once
#include <QString>
#include <vector>

class QCustomPlot;

namespace trainbench::ui {

// Writes one plot as PNG (2x pixel density for crisp slides), PDF or SVG (both vector), chosen
// by the file's extension. Throws Error when the format is unknown or the file cannot be written.
void save_plot(QCustomPlot& plot, const QString& path);

// Saves several plots next to each other: "curves.png" becomes curves-loss.png,
// curves-memory.png, ...; returns the paths written.
std::vector<QString> save_plots(const std::vector<std::pair<QString, QCustomPlot*>>& plots, const QString& path);

}  // namespace trainbench::ui
