#pragma once
// Node attributes: a small ordered list of key/value pairs (ints, floats, strings, int lists).
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace rl {

using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>>;

class Attrs {
  public:
    Attrs() = default;
    Attrs(std::initializer_list<std::pair<std::string, AttrValue>> items) : items_(items) {}

    void set(std::string key, AttrValue v);
    bool has(std::string_view key) const { return find(key) != nullptr; }
    const AttrValue* find(std::string_view key) const;

    // Typed getters; throw rl::Error naming the key when it is missing or of another type.
    int64_t get_int(std::string_view key) const;
    int64_t get_int(std::string_view key, int64_t fallback) const;
    double get_float(std::string_view key, double fallback) const;
    std::string get_string(std::string_view key, std::string_view fallback) const;
    std::vector<int64_t> get_ints(std::string_view key) const;

    const std::vector<std::pair<std::string, AttrValue>>& items() const { return items_; }
    bool operator==(const Attrs&) const = default;

  private:
    std::vector<std::pair<std::string, AttrValue>> items_;
};

}  // namespace rl
