#include "ui/palette.h"

#include <QValueAxis>
#include <algorithm>

#include "engine/units.h"
#include "strategies/strategy.h"
#include "ui/qt_text.h"

namespace rl::ui {

QColor strategy_color(const QString& name) {
    // Tableau 10, reordered so the first few strategies contrast most.
    static const QColor colors[] = {{0x4e, 0x79, 0xa7}, {0xe1, 0x57, 0x59}, {0x59, 0xa1, 0x4f},
                                    {0xf2, 0x8e, 0x2b}, {0xb0, 0x7a, 0xa1}, {0x76, 0xb7, 0xb2},
                                    {0xed, 0xc9, 0x48}, {0xff, 0x9d, 0xa7}, {0x9c, 0x75, 0x5f},
                                    {0xba, 0xb0, 0xac}};
    const auto all = strategies();
    for (size_t i = 0; i < all.size(); ++i)
        if (to_qstring(all[i]->name()) == name) return colors[i % std::size(colors)];
    return colors[static_cast<size_t>(qHash(name)) % std::size(colors)];
}

QColor instance_color(const QString& name, int instance) {
    const QColor c = strategy_color(name);
    if (instance <= 0) return c;
    // Alternate darker / lighter, further each round: 1 darker, 2 lighter, 3 darker still, …
    const int round = (instance + 1) / 2;
    float h = 0, s = 0, l = 0, a = 0;
    c.getHslF(&h, &s, &l, &a);
    const float shift = 0.17f * static_cast<float>(round);
    l = instance % 2 ? std::max(0.12f, l - shift) : std::min(0.85f, l + shift);
    return QColor::fromHslF(h, s, l, a);
}

std::vector<int> instance_numbers(const std::vector<QString>& names) {
    std::vector<int> out;
    out.reserve(names.size());
    for (size_t i = 0; i < names.size(); ++i)
        out.push_back(static_cast<int>(
            std::count(names.begin(), names.begin() + static_cast<long>(i), names[i])));
    return out;
}

void set_axis(QValueAxis* axis, const AxisFit& fit) {
    const double old_step = axis->tickInterval();
    axis->setTickAnchor(0);
    if (axis->tickType() != QValueAxis::TicksDynamic || !(old_step > 0)) {
        axis->setTickType(QValueAxis::TicksFixed);
        axis->setRange(0, fit.max);
        axis->setTickInterval(fit.step);
        axis->setTickType(QValueAxis::TicksDynamic);
        return;
    }
    if (fit.step >= old_step) {
        axis->setTickInterval(fit.step);
        axis->setRange(0, fit.max);
    } else {
        axis->setRange(0, fit.max);
        axis->setTickInterval(fit.step);
    }
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
