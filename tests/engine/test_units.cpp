#include <gtest/gtest.h>

#include "engine/errors.h"
#include "engine/units.h"

namespace rl {
namespace {

TEST(ParseBytes, PlainNumbersAndUnits) {
    EXPECT_EQ(parse_bytes("1000"), 1000u);
    EXPECT_EQ(parse_bytes("0"), 0u);
    EXPECT_EQ(parse_bytes("512B"), 512u);
    EXPECT_EQ(parse_bytes("64KB"), 64000u);
    EXPECT_EQ(parse_bytes("64KiB"), 65536u);
    EXPECT_EQ(parse_bytes("512MiB"), 512ull << 20);
    EXPECT_EQ(parse_bytes("3GB"), 3000000000ull);
    EXPECT_EQ(parse_bytes("2TiB"), 2ull << 40);
    EXPECT_EQ(parse_bytes("1.5GiB"), 3ull << 29);
    EXPECT_EQ(parse_bytes("0.5KiB"), 512u);
}

TEST(ParseBytes, CaseInsensitiveOptionalBAndSpaces) {
    EXPECT_EQ(parse_bytes("512mib"), 512ull << 20);
    EXPECT_EQ(parse_bytes("512MI"), 512ull << 20);
    EXPECT_EQ(parse_bytes("64k"), 64000u);
    EXPECT_EQ(parse_bytes(" 8 GiB "), 8ull << 30);
    EXPECT_EQ(parse_bytes("1.25 mb"), 1250000u);
}

TEST(ParseBytes, LargestValueAndOverflow) {
    EXPECT_EQ(parse_bytes("18446744073709551615"), UINT64_MAX);
    EXPECT_THROW(parse_bytes("18446744073709551616"), Error);
    EXPECT_THROW(parse_bytes("16777216TiB"), Error);  // 2^24 * 2^40 = 2^64
    EXPECT_EQ(parse_bytes("16777215TiB"), (16777215ull << 40));
}

TEST(ParseBytes, ErrorsNameTheText) {
    for (const char* bad : {"", "  ", "MiB", "12XB", "1.2.3", "-5", "abc", "5 MiBs", "."}) {
        try {
            parse_bytes(bad);
            ADD_FAILURE() << "accepted '" << bad << "'";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("'" + std::string(bad) + "'"), std::string::npos)
                << e.what();
        }
    }
    try {
        parse_bytes("12XB");
        FAIL();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("unknown unit 'XB'"), std::string::npos) << e.what();
    }
}

TEST(FormatBytes, ThreeSignificantDigits) {
    EXPECT_EQ(format_bytes(0), "0 B");
    EXPECT_EQ(format_bytes(512), "512 B");
    EXPECT_EQ(format_bytes(1023), "1023 B");
    EXPECT_EQ(format_bytes(1024), "1.00 KiB");
    EXPECT_EQ(format_bytes(1536ull << 10), "1.50 MiB");
    EXPECT_EQ(format_bytes(12ull << 30), "12.0 GiB");
    EXPECT_EQ(format_bytes(300ull << 20), "300 MiB");
    EXPECT_EQ(format_bytes((1ull << 30) - 1), "1.00 GiB");  // rounds up into the next unit
    EXPECT_EQ(format_bytes(UINT64_MAX), "16.0 EiB");
}

TEST(FormatBytes, ParsesBack) {
    for (uint64_t b : {1ull << 10, 3ull << 20, 5ull << 30})
        EXPECT_EQ(parse_bytes(format_bytes(b)), b) << format_bytes(b);
}

}  // namespace
}  // namespace rl
