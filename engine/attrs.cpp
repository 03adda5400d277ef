#include "engine/attrs.h"

#include "engine/errors.h"

namespace rl {

void Attrs::set(std::string key, AttrValue v) {
    for (auto& [k, val] : items_)
        if (k == key) {
            val = std::move(v);
            return;
        }
    items_.emplace_back(std::move(key), std::move(v));
}

const AttrValue* Attrs::find(std::string_view key) const {
    for (const auto& [k, v] : items_)
        if (k == key) return &v;
    return nullptr;
}

namespace {
[[noreturn]] void bad(std::string_view key, const char* expected) {
    throw Error("attribute '" + std::string(key) + "' must be " + expected);
}
}  // namespace

int64_t Attrs::get_int(std::string_view key) const {
    const AttrValue* v = find(key);
    if (!v) throw Error("attribute '" + std::string(key) + "' is required");
    if (auto* i = std::get_if<int64_t>(v)) return *i;
    bad(key, "an integer");
}

int64_t Attrs::get_int(std::string_view key, int64_t fallback) const {
    return has(key) ? get_int(key) : fallback;
}

double Attrs::get_float(std::string_view key, double fallback) const {
    const AttrValue* v = find(key);
    if (!v) return fallback;
    if (auto* d = std::get_if<double>(v)) return *d;
    if (auto* i = std::get_if<int64_t>(v)) return static_cast<double>(*i);
    bad(key, "a number");
}

std::string Attrs::get_string(std::string_view key, std::string_view fallback) const {
    const AttrValue* v = find(key);
    if (!v) return std::string(fallback);
    if (auto* s = std::get_if<std::string>(v)) return *s;
    bad(key, "a string");
}

std::vector<int64_t> Attrs::get_ints(std::string_view key) const {
    const AttrValue* v = find(key);
    if (!v) throw Error("attribute '" + std::string(key) + "' is required");
    if (auto* l = std::get_if<std::vector<int64_t>>(v)) return *l;
    bad(key, "a list of integers");
}

}  // namespace rl
