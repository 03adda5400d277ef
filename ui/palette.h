#pragma once
// Colours and formats shared by the table, the charts and the exports, so a strategy has the same
// colour everywhere.
#include <QColor>
#include <QString>
#include <cstdint>

namespace rl::ui {

// A stable colour per strategy name (registry order picks from a qualitative palette).
QColor strategy_color(const QString& name);
QString bytes_text(uint64_t bytes);  // "43.0 MiB"
QString ms_text(double ms);          // "12.34"

}  // namespace rl::ui
