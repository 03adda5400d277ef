#pragma once
// Small helpers for tests that check rl::Error messages, and a file's bytes.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "engine/errors.h"

namespace rl::testing {

// The message of the rl::Error that `fn` throws, or "" when it throws none.
std::string error_of(auto&& fn) {
    try {
        fn();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

inline bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

// The whole file as bytes ("" when it cannot be read).
inline std::string read_bytes(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

}  // namespace rl::testing
