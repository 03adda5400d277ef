#include "engine/json_text.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace rl {

namespace {

using Json = nlohmann::json;

// Where the value nlohmann failed on begins, in json_line_column's terms (characters read up to
// and including its first one), for failures whose exception carries no position: a SAX pass
// that accepts every event and records the position and token the parser reports with its error.
size_t failure_offset(const std::string& text) {
    struct Locator : Json::json_sax_t {
        size_t offset = 0;
        bool null() override { return true; }
        bool boolean(bool) override { return true; }
        bool number_integer(number_integer_t) override { return true; }
        bool number_unsigned(number_unsigned_t) override { return true; }
        bool number_float(number_float_t, const string_t&) override { return true; }
        bool string(string_t&) override { return true; }
        bool binary(binary_t&) override { return true; }
        bool start_object(std::size_t) override { return true; }
        bool key(string_t&) override { return true; }
        bool end_object() override { return true; }
        bool start_array(std::size_t) override { return true; }
        bool end_array() override { return true; }
        bool parse_error(std::size_t position, const std::string& token,
                         const Json::exception&) override {
            offset = position >= token.size() ? position - token.size() + 1 : position;
            return false;
        }
    } locator;
    (void)Json::sax_parse(text, &locator);
    return locator.offset;
}

}  // namespace

std::pair<size_t, size_t> json_line_column(const std::string& text, size_t chars_read) {
    size_t line = 1, col = 0;
    for (size_t i = 0; i < chars_read && i < text.size(); ++i) {
        if (text[i] == '\n') {
            ++line;
            col = 0;
        } else {
            ++col;
        }
    }
    return {line, std::max<size_t>(col, 1)};
}

std::string json_parse_failure(const std::string& text, const std::string& origin,
                               const std::exception& e) {
    const auto* parse = dynamic_cast<const Json::parse_error*>(&e);
    const auto [line, col] = json_line_column(text, parse ? parse->byte : failure_offset(text));
    std::string message = origin + ":" + std::to_string(line) + ":" + std::to_string(col) +
                          ": malformed JSON: " + json_error_detail(e.what());
    if (const auto* range = dynamic_cast<const Json::out_of_range*>(&e); range && range->id == 406)
        message += " (numbers must fit a double; write a smaller value)";
    return message;
}

std::string json_error_detail(const std::string& what) {
    const size_t col = what.find("column ");
    if (col != std::string::npos) {
        const size_t colon = what.find(": ", col);
        if (colon != std::string::npos) return what.substr(colon + 2);
    }
    const size_t bracket = what.find("] ");
    return bracket == std::string::npos ? what : what.substr(bracket + 2);
}

}  // namespace rl
