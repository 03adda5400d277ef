#pragma once
// The one conversion from the engine's text (UTF-8 in std::string, std::string_view, string
// literals) to Qt's: node, strategy and preset names, error messages, schema help.
#include <QString>
#include <string_view>

namespace rl::ui {

inline QString to_qstring(std::string_view text) {
    return QString::fromUtf8(text.data(), static_cast<qsizetype>(text.size()));
}

}  // namespace rl::ui
