#include "engine/params.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

#include "engine/errors.h"
#include "engine/units.h"

namespace rl {

namespace {

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

std::string_view type_name(ParamType t) {
    switch (t) {
        case ParamType::Int:
            return "int";
        case ParamType::Bytes:
            return "bytes";
        case ParamType::Float:
            return "float";
        case ParamType::Choice:
            return "choice";
        case ParamType::String:
            return "string";
    }
    return "?";
}

std::string join(const std::vector<std::string>& items, std::string_view sep) {
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += sep;
        out += items[i];
    }
    return out;
}

bool parse_int(std::string_view text, int64_t& out) {
    if (!text.empty() && text.front() == '+') text.remove_prefix(1);
    const char* end = text.data() + text.size();
    auto [p, ec] = std::from_chars(text.data(), end, out);
    return ec == std::errc() && p == end && !text.empty();
}

bool parse_float(std::string_view text, double& out) {
    if (!text.empty() && text.front() == '+') text.remove_prefix(1);
    const char* end = text.data() + text.size();
    auto [p, ec] = std::from_chars(text.data(), end, out);
    return ec == std::errc() && p == end && !text.empty() && std::isfinite(out);
}

// "an integer from 1 to 64", "an integer >= 1", "an integer".
std::string int_range(const ParamSpec& p, std::string_view noun) {
    std::string s(noun);
    const bool has_min = p.min != INT64_MIN && !(p.type == ParamType::Bytes && p.min <= 0);
    const bool has_max = p.max != INT64_MAX;
    if (has_min && has_max)
        s += " from " + std::to_string(p.min) + " to " + std::to_string(p.max);
    else if (has_min)
        s += " >= " + std::to_string(p.min);
    else if (has_max)
        s += " <= " + std::to_string(p.max);
    return s;
}

std::string accepted(const ParamSpec& p) {
    switch (p.type) {
        case ParamType::Int:
            return int_range(p, "an integer");
        case ParamType::Bytes:
            return int_range(p, "a size in bytes") + " (e.g. 512MiB, 1.5GiB, 64KB, 1000)";
        case ParamType::Float:
            return "a finite number (e.g. 0.5, 1e-3)";
        case ParamType::Choice:
            return "one of " + join(p.choices, ", ");
        case ParamType::String:
            return "any text without ','";
    }
    return "";
}

void check_value(const ParamSpec& p, const std::string& value, std::string_view context) {
    auto fail = [&](const std::string& why) {
        throw Error(std::string(context) + ": bad value for '" + p.key + "': '" + value + "' " +
                    why + "; " + p.key + " accepts " + accepted(p));
    };
    switch (p.type) {
        case ParamType::Int: {
            int64_t v = 0;
            if (!parse_int(value, v)) fail("is not an integer");
            if (v < p.min || v > p.max) fail("is out of range");
            break;
        }
        case ParamType::Bytes: {
            uint64_t v = 0;
            try {
                v = parse_bytes(value);
            } catch (const Error& e) {
                fail("is not a size (" + std::string(e.what()) + ")");
            }
            const bool below = p.min > 0 && v < static_cast<uint64_t>(p.min);
            const bool above = p.max >= 0 && v > static_cast<uint64_t>(p.max);
            if (below || above) fail("is out of range");
            break;
        }
        case ParamType::Float: {
            double v = 0;
            if (!parse_float(value, v)) fail("is not a number");
            break;
        }
        case ParamType::Choice:
            if (std::find(p.choices.begin(), p.choices.end(), value) == p.choices.end())
                fail("is not a valid choice");
            break;
        case ParamType::String:
            break;
    }
}

const std::string& lookup(const std::map<std::string, std::string, std::less<>>& values,
                          std::string_view key) {
    auto it = values.find(key);
    if (it == values.end())
        throw Error("parameter '" + std::string(key) +
                    "' has no value; give it one (key=value) — it has no default");
    return it->second;
}

}  // namespace

Spec parse_spec(std::string_view text) {
    Spec s;
    const std::string_view whole = trim(text);
    const size_t colon = whole.find(':');
    s.name = std::string(trim(whole.substr(0, colon)));
    if (s.name.empty())
        throw Error("malformed spec '" + std::string(text) +
                    "': it has no name (write name or name:key=value,key=value)");
    if (colon == std::string_view::npos) return s;
    std::string_view rest = whole.substr(colon + 1);
    if (trim(rest).empty()) return s;  // "name:" is the bare name
    std::set<std::string, std::less<>> seen;
    while (true) {
        const size_t comma = rest.find(',');
        const std::string_view item = trim(rest.substr(0, comma));
        const size_t eq = item.find('=');
        if (eq == std::string_view::npos)
            throw Error("malformed spec '" + std::string(text) + "': " +
                        (item.empty() ? std::string("an empty item between commas")
                                      : "'" + std::string(item) + "' has no '='") +
                        " (write name:key=value,key=value; lists inside a value use '|')");
        const std::string key(trim(item.substr(0, eq)));
        if (key.empty())
            throw Error("malformed spec '" + std::string(text) + "': '" + std::string(item) +
                        "' has an empty key (write key=value)");
        if (!seen.insert(key).second)
            throw Error("malformed spec '" + std::string(text) + "': key '" + key +
                        "' is given twice");
        s.args.emplace_back(key, std::string(trim(item.substr(eq + 1))));
        if (comma == std::string_view::npos) break;
        rest = rest.substr(comma + 1);
    }
    return s;
}

bool has_arg(const Spec& s, std::string_view key) {
    return std::any_of(s.args.begin(), s.args.end(), [&](const auto& a) { return a.first == key; });
}

std::string format_spec(const Spec& s) {
    std::string out = s.name;
    for (size_t i = 0; i < s.args.size(); ++i) {
        out += i ? "," : ":";
        out += s.args[i].first + "=" + s.args[i].second;
    }
    return out;
}

ParamValues ParamValues::resolve(const ParamSchema& schema, const Spec& spec) {
    const std::string& context = spec.name;
    ParamValues out;
    for (const auto& [key, value] : spec.args) {
        auto it = std::find_if(schema.begin(), schema.end(),
                               [&key = key](const ParamSpec& p) { return p.key == key; });
        if (it == schema.end()) {
            std::vector<std::string> keys;
            for (const auto& p : schema) keys.push_back(p.key);
            throw Error(context + ": unknown parameter '" + key + "'; " +
                        (keys.empty() ? std::string("it takes no parameters")
                                      : "valid parameters: " + join(keys, ", ")));
        }
        check_value(*it, value, context);
        out.values_[key] = value;
    }
    for (const auto& p : schema) {
        if (out.values_.count(p.key) || p.default_value.empty()) continue;
        check_value(p, p.default_value, context + " (default)");
        out.values_[p.key] = p.default_value;
    }
    return out;
}

bool ParamValues::has(std::string_view key) const {
    return values_.find(key) != values_.end();
}

int64_t ParamValues::get_int(std::string_view key) const {
    const std::string& v = lookup(values_, key);
    int64_t out = 0;
    if (!parse_int(v, out))
        throw Error("parameter '" + std::string(key) + "': '" + v + "' is not an integer");
    return out;
}

uint64_t ParamValues::get_bytes(std::string_view key) const {
    return parse_bytes(lookup(values_, key));
}

double ParamValues::get_float(std::string_view key) const {
    const std::string& v = lookup(values_, key);
    double out = 0;
    if (!parse_float(v, out))
        throw Error("parameter '" + std::string(key) + "': '" + v + "' is not a number");
    return out;
}

std::string ParamValues::get_string(std::string_view key) const {
    return lookup(values_, key);
}

std::string describe_schema(const ParamSchema& schema) {
    // Short choice lists stand in the type column; long ones get a line of their own, so one
    // parameter with many choices does not push every help text off the screen.
    constexpr size_t kMaxInlineChoices = 24;
    size_t w_key = 0, w_type = 0;
    std::vector<std::pair<std::string, std::string>> cols;
    for (const auto& p : schema) {
        std::string left = p.key + "=" + (p.default_value.empty() ? "?" : p.default_value);
        std::string type = std::string(type_name(p.type));
        if (p.type == ParamType::Choice) {
            const std::string choices = join(p.choices, "|");
            if (choices.size() <= kMaxInlineChoices) type = choices;
        }
        w_key = std::max(w_key, left.size());
        w_type = std::max(w_type, type.size());
        cols.emplace_back(std::move(left), std::move(type));
    }
    std::string out;
    for (size_t i = 0; i < schema.size(); ++i) {
        const auto& [left, type] = cols[i];
        std::string line = "  " + left + std::string(w_key - left.size() + 3, ' ') + type;
        if (!schema[i].help.empty())
            line += std::string(w_type - type.size() + 3, ' ') + schema[i].help;
        out += line + "\n";
        const std::string choices = join(schema[i].choices, "|");
        if (schema[i].type == ParamType::Choice && choices.size() > kMaxInlineChoices)
            out += std::string(w_key + 5, ' ') + "one of: " + choices + "\n";
    }
    return out;
}

}  // namespace rl
