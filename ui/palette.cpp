#include "ui/palette.h"

#include <QValueAxis>
#include <algorithm>
#include <optional>

#include "engine/params.h"
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

QString full_spec(const QString& spec) {
    try {
        const Spec given = parse_spec(spec.toStdString());
        const Strategy& strategy = find_strategy(given.name);
        Spec full{given.name, {}};
        for (const ParamSpec& p : strategy.schema()) {
            const auto it = std::find_if(given.args.begin(), given.args.end(),
                                         [&](const auto& kv) { return kv.first == p.key; });
            if (it != given.args.end())
                full.args.push_back(*it);
            else if (!p.default_value.empty())
                full.args.emplace_back(p.key, p.default_value);
        }
        for (const auto& kv : given.args)
            if (!has_arg(full, kv.first)) full.args.push_back(kv);
        return QString::fromStdString(format_spec(full));
    } catch (const std::exception&) {
        return spec;
    }
}

QString size_arg(uint64_t bytes) {
    return bytes_text(bytes).remove(QLatin1Char(' '));
}

namespace {

std::optional<uint64_t> size_arg_bytes(uint64_t bytes) {
    try {
        return parse_bytes(size_arg(bytes).toStdString());
    } catch (const std::exception&) {  // past the largest size parse_bytes reads
        return std::nullopt;
    }
}

}  // namespace

uint64_t round_budget(uint64_t bytes) {
    return size_arg_bytes(bytes).value_or(bytes);
}

bool size_arg_is_exact(uint64_t bytes) {
    return size_arg_bytes(bytes) == bytes;
}

QString readable_budget(const QString& spec) {
    const qsizetype colon = spec.indexOf(QLatin1Char(':'));
    if (colon < 0) return spec;
    QStringList args = spec.mid(colon + 1).split(QLatin1Char(','));
    bool changed = false;
    for (QString& arg : args) {
        const qsizetype eq = arg.indexOf(QLatin1Char('='));
        if (eq < 0 || arg.left(eq).trimmed() != QLatin1String("budget")) continue;
        bool digits = false;
        const qulonglong bytes = arg.mid(eq + 1).trimmed().toULongLong(&digits);
        if (!digits || bytes < 1024) continue;
        arg = QStringLiteral("budget") +
              (size_arg_is_exact(bytes) ? QStringLiteral("=") : QStringLiteral("≈")) +
              size_arg(bytes);
        changed = true;
    }
    return changed ? spec.left(colon + 1) + args.join(QLatin1Char(',')) : spec;
}

std::vector<QString> instance_labels(const std::vector<QString>& names,
                                     const std::vector<QString>& specs) {
    std::vector<QString> out;
    out.reserve(specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
        const QString& name = i < names.size() ? names[i] : QString();
        const bool shared = std::count(names.begin(), names.end(), name) > 1;
        out.push_back(readable_budget(shared ? full_spec(specs[i]) : specs[i]));
    }
    return out;
}

void set_axis(QValueAxis* axis, const AxisFit& fit) {
    axis->setLabelFormat(QString::fromStdString(label_format(fit.step)));
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

void set_axis(QValueAxis* axis, const AxisRange& range) {
    axis->setLabelFormat(QString::fromStdString(label_format(range.step)));
    const double old_step = axis->tickInterval();
    axis->setTickAnchor(range.min);
    if (axis->tickType() != QValueAxis::TicksDynamic || !(old_step > 0) || range.step >= old_step) {
        axis->setTickInterval(range.step);
        axis->setRange(range.min, range.max);
    } else {
        axis->setRange(range.min, range.max);
        axis->setTickInterval(range.step);
    }
    axis->setTickType(QValueAxis::TicksDynamic);
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
