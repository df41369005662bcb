#include "run_palette.hpp"

#include <array>

namespace trainbench::ui {

QColor run_palette_color(int index) {
    static constexpr std::array<QRgb, kRunPaletteSize> kColors = {
        0x4e79a7, 0xf28e2b, 0xe15759, 0x76b7b2, 0x59a14f,
        0xedc948, 0xb07aa1, 0xff9da7, 0x9c755f, 0x79706e};
    const int wrapped = ((index % kRunPaletteSize) + kRunPaletteSize) % kRunPaletteSize;
    return QColor::fromRgb(kColors[wrapped]);
}

}  // namespace trainbench::ui
