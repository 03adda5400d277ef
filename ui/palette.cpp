#include "ui/palette.h"

#include "engine/units.h"
#include "strategies/strategy.h"

namespace rl::ui {

QColor strategy_color(const QString& name) {
    // Tableau 10, reordered so the first few strategies contrast most.
    static const QColor colors[] = {{0x4e, 0x79, 0xa7}, {0xe1, 0x57, 0x59}, {0x59, 0xa1, 0x4f},
                                    {0xf2, 0x8e, 0x2b}, {0xb0, 0x7a, 0xa1}, {0x76, 0xb7, 0xb2},
                                    {0xed, 0xc9, 0x48}, {0xff, 0x9d, 0xa7}, {0x9c, 0x75, 0x5f},
                                    {0xba, 0xb0, 0xac}};
    const auto all = strategies();
    for (size_t i = 0; i < all.size(); ++i)
        if (QString::fromUtf8(all[i]->name().data(),
                              static_cast<qsizetype>(all[i]->name().size())) == name)
            return colors[i % std::size(colors)];
    return colors[static_cast<size_t>(qHash(name)) % std::size(colors)];
}

QString bytes_text(uint64_t bytes) {
    return QString::fromStdString(format_bytes(bytes));
}

QString ms_text(double ms) {
    if (ms >= 1000) return QString::number(ms, 'f', 0);
    if (ms >= 100) return QString::number(ms, 'f', 1);
    return QString::number(ms, 'f', 2);
}

}  // namespace rl::ui
