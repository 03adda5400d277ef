#pragma once
// nlohmann-json's failures as our messages, with the position: "origin:line:column: malformed
// JSON: what". Shared by the loaders of JSON files (network files, the desktop app's sessions),
// so that no library exception and no library message prefix reaches the user.
#include <cstddef>
#include <exception>
#include <string>
#include <utility>

namespace rl {

// Line and column (both from 1; columns count bytes) after nlohmann read `chars_read`
// characters of `text`: the last character read is the one it stopped at. Agrees with the
// position in nlohmann's own parse_error messages.
std::pair<size_t, size_t> json_line_column(const std::string& text, size_t chars_read);

// `e`, thrown by nlohmann while parsing `text`, as "origin:line:column: malformed JSON: what".
// A parse_error carries its position; the failures that carry none (a number such as 1E9999 that
// overflows a double is out_of_range.406) are found again by a second pass over `text`, which
// reports where the offending value begins.
std::string json_parse_failure(const std::string& text, const std::string& origin,
                               const std::exception& e);

// nlohmann's message without its "[json.exception.…] parse error at line L, column C: " prefix.
std::string json_error_detail(const std::string& what);

}  // namespace rl
