#pragma once
// Parameter schemas, shared by network presets and strategies: the GUI builds its forms from them
// and the CLI parses "name:key=value,…" specs against them.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rl {

enum class ParamType { Int, Bytes, Float, Choice, String };

struct ParamSpec {
    std::string key;
    ParamType type = ParamType::Int;
    std::string default_value;  // "" = optional with no default
    std::string help;
    std::vector<std::string> choices;  // Choice only
    int64_t min = 0;                   // Int/Bytes lower bound
    int64_t max = INT64_MAX;           // Int/Bytes upper bound
};
using ParamSchema = std::vector<ParamSpec>;

// "name" or "name:key=value,key=value". Values may not contain ','; lists use '|'.
struct Spec {
    std::string name;
    std::vector<std::pair<std::string, std::string>> args;
};
// Throws rl::Error for a malformed spec (a missing '=', an empty key, a duplicate key).
Spec parse_spec(std::string_view text);
std::string format_spec(const Spec& s);
// Whether `s` gives a value for `key`.
bool has_arg(const Spec& s, std::string_view key);

// Values checked against a schema: unknown keys and bad values are errors naming the key, the
// value, what is accepted, and `context` (the preset or strategy name).
class ParamValues {
  public:
    static ParamValues resolve(const ParamSchema& schema, const Spec& spec);
    bool has(std::string_view key) const;
    int64_t get_int(std::string_view key) const;
    uint64_t get_bytes(std::string_view key) const;
    double get_float(std::string_view key) const;
    std::string get_string(std::string_view key) const;
    const std::map<std::string, std::string, std::less<>>& all() const { return values_; }

  private:
    std::map<std::string, std::string, std::less<>> values_;
};

// One line per parameter: "  depth=8   int   number of layers"
std::string describe_schema(const ParamSchema& schema);

}  // namespace rl
