#pragma once
// Colours and formats shared by the table, the charts and the exports, so a strategy has the same
// colour everywhere.
#include <QColor>
#include <QString>
#include <cstdint>
#include <vector>

#include "ui/chart_math.h"

QT_BEGIN_NAMESPACE
class QValueAxis;
QT_END_NAMESPACE

namespace rl::ui {

// A stable colour per strategy name (registry order picks from a qualitative palette).
QColor strategy_color(const QString& name);
// The colour of the `instance`-th instance of a strategy shown at once (periodic:k=2 is 0,
// periodic:k=4 is 1): the strategy's colour, then darker and lighter shades of it.
QColor instance_color(const QString& name, int instance);
// For each spec in order, how many earlier specs have the same strategy name.
std::vector<int> instance_numbers(const std::vector<QString>& names);
// The spec with every parameter its strategy's schema defaults spelled out, in schema order
// ("periodic" -> "periodic:k=4"); other arguments (a budget) follow. An unknown strategy or a
// malformed spec is returned as it is.
QString full_spec(const QString& spec);
// A size as a spec's budget writes it: bytes_text without the space ("21.3MiB").
QString size_arg(uint64_t bytes);
// The budget that size_arg's text parses back to (it prints exactly as it parses: the slider
// snaps to it); `bytes` itself where the text does not parse.
uint64_t round_budget(uint64_t bytes);
// Whether size_arg's text parses back to `bytes` itself.
bool size_arg_is_exact(uint64_t bytes);
// The spec with a budget given in raw bytes written as a size: "sqrt-n:budget=702713936" reads
// "sqrt-n:budget≈670MiB" ('≈' where the size is rounded, '=' where it is exact). The budget
// slider's top is plain backprop's exact peak, which no rounded size parses back to, so its
// spec carries bytes. A label, not a spec: the run keeps the exact one.
QString readable_budget(const QString& spec);
// What to call each strategy instance shown at once: its spec, or its full spec when the same
// strategy appears more than once (so "periodic:k=2" and "periodic" read "periodic:k=2" and
// "periodic:k=4", not as if the second were the only periodic), its budget readable_budget's.
// `names[i]` is specs[i]'s strategy.
std::vector<QString> instance_labels(const std::vector<QString>& names,
                                     const std::vector<QString>& specs);
// Sets a value axis to [0, fit.max] with ticks every fit.step from 0, in the order that never
// lays out more ticks than the old or the new setting has (a small step on a wide range would
// create thousands of tick items for a moment).
void set_axis(QValueAxis* axis, const AxisFit& fit);
// The same for an axis that need not start at 0 (fit_range): ticks from range.min.
void set_axis(QValueAxis* axis, const AxisRange& range);
QString bytes_text(uint64_t bytes);  // "43.0 MiB"
QString ms_text(double ms);          // "12.34"

}  // namespace rl::ui
