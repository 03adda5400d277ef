#include "engine/units.h"

#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "engine/errors.h"

namespace rl {

namespace {

std::string lower(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (char c : s) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

[[noreturn]] void bad_size(std::string_view text, const std::string& why, bool example = true) {
    throw Error("invalid size '" + std::string(text) + "': " + why +
                (example ? " (write e.g. 512MiB, 1.5GiB, 64KB or a plain number of bytes)" : ""));
}

// The multiplier of a unit suffix ("", "b", "kib", "kb", "k", ...), or 0 if unknown.
uint64_t unit_multiplier(const std::string& unit) {
    if (unit.empty() || unit == "b") return 1;
    static constexpr std::array<char, 4> kPrefixes = {'k', 'm', 'g', 't'};
    for (size_t i = 0; i < kPrefixes.size(); ++i) {
        if (unit[0] != kPrefixes[i]) continue;
        const std::string rest = unit.substr(1);
        uint64_t binary = uint64_t{1} << (10 * (i + 1));
        uint64_t decimal = 1;
        for (size_t j = 0; j <= i; ++j) decimal *= 1000;
        if (rest == "ib" || rest == "i") return binary;
        if (rest == "b" || rest.empty()) return decimal;
        return 0;
    }
    return 0;
}

}  // namespace

uint64_t parse_bytes(std::string_view text) {
    size_t pos = 0;
    while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
    size_t end = text.size();
    while (end > pos && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
    const std::string_view body = text.substr(pos, end - pos);
    if (body.empty()) bad_size(text, "it is empty");

    // Integer part, exact.
    size_t i = 0;
    uint64_t whole = 0;
    bool any_digit = false;
    for (; i < body.size() && std::isdigit(static_cast<unsigned char>(body[i])); ++i) {
        const auto d = static_cast<uint64_t>(body[i] - '0');
        if (whole > (UINT64_MAX - d) / 10) bad_size(text, "it is too large");
        whole = whole * 10 + d;
        any_digit = true;
    }
    // Fraction digits, kept as text and applied after the unit is known.
    std::string fraction;
    if (i < body.size() && body[i] == '.') {
        ++i;
        for (; i < body.size() && std::isdigit(static_cast<unsigned char>(body[i])); ++i) {
            fraction += body[i];
            any_digit = true;
        }
    }
    if (!any_digit) bad_size(text, "it does not start with a number");
    size_t u = i;
    while (u < body.size() && std::isspace(static_cast<unsigned char>(body[u]))) ++u;
    const std::string unit = lower(body.substr(u));
    const uint64_t mult = unit_multiplier(unit);
    if (mult == 0)
        bad_size(text,
                 "unknown unit '" + std::string(body.substr(u)) +
                     "'; use B, KiB, MiB, GiB, TiB (x1024) or KB, MB, GB, TB (x1000)",
                 false);

    if (whole > UINT64_MAX / mult) bad_size(text, "it is too large");
    uint64_t total = whole * mult;
    if (!fraction.empty()) {
        // The fraction times the multiplier is below `mult`, so long double (64-bit mantissa on
        // x86) holds it exactly enough; round to the nearest byte.
        long double f = 0;
        long double scale = 1;
        for (char c : fraction) {
            scale /= 10;
            f += static_cast<long double>(c - '0') * scale;
        }
        const auto extra = static_cast<uint64_t>(std::llround(f * static_cast<long double>(mult)));
        if (total > UINT64_MAX - extra) bad_size(text, "it is too large");
        total += extra;
    }
    return total;
}

std::string format_bytes(uint64_t bytes) {
    if (bytes < 1024) return std::to_string(bytes) + " B";
    static constexpr std::array<const char*, 6> kUnits = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = static_cast<double>(bytes);
    size_t unit = 0;
    v /= 1024.0;
    while (v >= 1024.0 && unit + 1 < kUnits.size()) {
        v /= 1024.0;
        ++unit;
    }
    // Three significant digits; a value that rounds up to 1024 moves to the next unit.
    auto render = [](double x) {
        char buf[32];
        if (x < 9.995)
            std::snprintf(buf, sizeof buf, "%.2f", x);
        else if (x < 99.95)
            std::snprintf(buf, sizeof buf, "%.1f", x);
        else
            std::snprintf(buf, sizeof buf, "%.0f", x);
        return std::string(buf);
    };
    std::string num = render(v);
    if (num == "1024" && unit + 1 < kUnits.size()) {
        num = render(v / 1024.0);
        ++unit;
    }
    return num + " " + kUnits[unit];
}

}  // namespace rl
