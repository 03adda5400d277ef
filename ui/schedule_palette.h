#pragma once
// The colours of the schedule views, shared by the graph view, the schedule matrix and their
// legends, so "recomputed" is one orange everywhere. Colour-blind safe pairs (Okabe–Ito hues).
#include <QColor>

#include "analysis/explain.h"

namespace rl::ui::schedule_palette {

inline QColor kept() {
    return QColor(0x8c, 0xc8, 0x8a);
}  // green: saved for the backward
inline QColor recomputed() {
    return QColor(0xf0, 0x9a, 0x3e);
}  // orange: computed again
inline QColor freed() {
    return QColor(0xd5, 0xdd, 0xe8);
}  // grey-blue: freed in the forward
inline QColor computed() {
    return QColor(0x56, 0x8c, 0xd0);
}  // blue: first computation
inline QColor backward() {
    return QColor(0x9a, 0x6c, 0xc0);
}  // purple: the node's backward
inline QColor free_mark() {
    return QColor(0xd6, 0x3b, 0x3b);
}  // red: a Free in this stage
inline QColor input() {
    return QColor(0xff, 0xff, 0xff);
}
inline QColor current() {
    return QColor(0xe0, 0x3a, 0x1e);
}  // teach mode's instruction
inline QColor selected() {
    return QColor(0x1f, 0x6f, 0xe0);
}  // the selected node

inline QColor fate_color(NodeFate f) {
    switch (f) {
        case NodeFate::Kept:
            return kept();
        case NodeFate::Recomputed:
            return recomputed();
        case NodeFate::FreedEarly:
            return freed();
        case NodeFate::NotRun:
            return input();
    }
    return input();
}

}  // namespace rl::ui::schedule_palette
