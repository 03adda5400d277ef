#pragma once
// Small helpers for tests that check rl::Error messages.
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

}  // namespace rl::testing
