// Element types: sizes, names, and byte counts that follow them.
#include <gtest/gtest.h>

#include "engine/errors.h"
#include "engine/shape.h"

namespace rl {
namespace {

TEST(DTypes, SizesAndNamesRoundTrip) {
    struct Row {
        DType t;
        uint64_t size;
        const char* name;
    };
    for (const Row& r :
         {Row{DType::F32, 4, "f32"}, Row{DType::I32, 4, "i32"}, Row{DType::BF16, 2, "bf16"},
          Row{DType::F16, 2, "f16"}, Row{DType::U8, 1, "u8"}}) {
        EXPECT_EQ(dtype_size(r.t), r.size) << r.name;
        EXPECT_EQ(dtype_name(r.t), r.name);
        DType back = DType::I32;
        ASSERT_TRUE(dtype_from_name(r.name, back)) << r.name;
        EXPECT_EQ(back, r.t);
        EXPECT_EQ(checked_bytes(r.t, Shape{3, 5}, "x"), 15 * r.size) << r.name;
    }
    DType t{};
    EXPECT_TRUE(dtype_from_name("bfloat16", t));
    EXPECT_EQ(t, DType::BF16);
    EXPECT_FALSE(dtype_from_name("fp8", t));
    EXPECT_TRUE(is_floating(DType::BF16));
    EXPECT_TRUE(is_floating(DType::F16));
    EXPECT_FALSE(is_floating(DType::U8));
    EXPECT_FALSE(is_floating(DType::I32));
}

TEST(DTypes, ByteLimitFollowsTheElementSize) {
    // 2^61 elements: 2^62 bytes in bf16 (allowed), 2^63 in f32 (refused); 2^62 u8 bytes pass.
    const Shape s{int64_t{1} << 31, int64_t{1} << 30};
    EXPECT_EQ(checked_bytes(DType::BF16, s, "x"), uint64_t{1} << 62);
    EXPECT_THROW(checked_bytes(DType::F32, s, "x"), Error);
    EXPECT_EQ(checked_bytes(DType::U8, Shape{int64_t{1} << 31, int64_t{1} << 31}, "x"),
              uint64_t{1} << 62);
}

}  // namespace
}  // namespace rl
