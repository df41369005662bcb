#pragma once
#include <QColor>

namespace trainbench::ui {

// Ten colours that stay distinguishable on a white plot and for common colour-vision
// deficiencies (Tableau 10); runs take them in order so overlaid curves never share one.
inline constexpr int kRunPaletteSize = 10;
QColor run_palette_color(int index);

}  // namespace trainbench::ui
