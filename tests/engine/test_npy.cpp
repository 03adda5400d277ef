#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "engine/errors.h"
#include "engine/npy.h"

namespace rl {
namespace {

namespace fs = std::filesystem;

class Npy : public ::testing::Test {
  protected:
    void SetUp() override {
        dir_ =
            fs::temp_directory_path() /
            ("rematlab-npy-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
             "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(dir_);
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }
    std::string path(const std::string& name) const { return (dir_ / name).string(); }

    void write_raw(const std::string& p, const std::string& header_dict, size_t data_bytes) {
        std::string h = header_dict;
        while ((10 + h.size() + 1) % 64) h += ' ';
        h += '\n';
        std::ofstream out(p, std::ios::binary);
        out.write("\x93NUMPY\x01\x00", 8);
        const char len[2] = {static_cast<char>(h.size() & 0xff), static_cast<char>(h.size() >> 8)};
        out.write(len, 2);
        out << h;
        out << std::string(data_bytes, '\0');
    }

    std::string error_reading(const std::string& p) {
        Shape s;
        try {
            read_npy_f32(p, s);
        } catch (const Error& e) {
            return e.what();
        }
        return "";
    }

    fs::path dir_;
};

TEST_F(Npy, RoundTripsShapesAndValues) {
    for (const Shape& shape : {Shape{3, 4}, Shape{7}, Shape{2, 3, 5}, Shape{}}) {
        std::vector<float> data(static_cast<size_t>(shape.numel()));
        for (size_t i = 0; i < data.size(); ++i) data[i] = 0.25f * static_cast<float>(i) - 1.0f;
        const std::string p = path("a.npy");
        write_npy(p, data.data(), shape);
        Shape back;
        const std::vector<float> got = read_npy_f32(p, back);
        EXPECT_EQ(back, shape) << format_dims(shape);
        EXPECT_EQ(got, data);
    }
}

TEST_F(Npy, HeaderIsNumpyFormat10AlignedTo64) {
    const float v[6] = {1, 2, 3, 4, 5, 6};
    const std::string p = path("h.npy");
    write_npy(p, v, Shape{2, 3});
    std::ifstream in(p, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    ASSERT_GT(bytes.size(), 10u);
    EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
    const size_t hlen = static_cast<unsigned char>(bytes[8]) |
                        (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    EXPECT_EQ((10 + hlen) % 64, 0u);
    const std::string dict = bytes.substr(10, hlen);
    EXPECT_NE(dict.find("'descr': '<f4'"), std::string::npos) << dict;
    EXPECT_NE(dict.find("'fortran_order': False"), std::string::npos) << dict;
    EXPECT_NE(dict.find("'shape': (2, 3)"), std::string::npos) << dict;
    EXPECT_EQ(bytes.size(), 10 + hlen + 24);
}

TEST_F(Npy, OneDimensionalShapeHasTrailingComma) {
    const float v[2] = {1, 2};
    write_npy(path("v.npy"), v, Shape{2});
    std::ifstream in(path("v.npy"), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    EXPECT_NE(bytes.find("'shape': (2,)"), std::string::npos);
}

TEST_F(Npy, WriteLeavesNoTemporaryFiles) {
    const float v[1] = {1};
    write_npy(path("x.npy"), v, Shape{1});
    write_npy(path("x.npy"), v, Shape{1});  // overwrite in place
    int files = 0;
    for (const auto& e : fs::directory_iterator(dir_)) files += e.is_regular_file();
    EXPECT_EQ(files, 1);
}

TEST_F(Npy, WriteToMissingDirectoryNamesThePath) {
    const float v[1] = {1};
    const std::string p = path("no/such/dir/x.npy");
    try {
        write_npy(p, v, Shape{1});
        FAIL();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
}

TEST_F(Npy, BadFilesAreErrorsNamingPathAndProblem) {
    EXPECT_NE(error_reading(path("missing.npy")).find("cannot open"), std::string::npos);

    { std::ofstream(path("text.npy")) << "hello, not numpy"; }
    std::string e = error_reading(path("text.npy"));
    EXPECT_NE(e.find(path("text.npy")), std::string::npos) << e;
    EXPECT_NE(e.find("not a .npy file"), std::string::npos) << e;

    write_raw(path("f8.npy"), "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", 16);
    e = error_reading(path("f8.npy"));
    EXPECT_NE(e.find("'<f8'"), std::string::npos) << e;
    EXPECT_NE(e.find("float32"), std::string::npos) << e;

    write_raw(path("fortran.npy"), "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
              16);
    EXPECT_NE(error_reading(path("fortran.npy")).find("Fortran order"), std::string::npos);

    write_raw(path("short.npy"), "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 4), }", 60);
    e = error_reading(path("short.npy"));
    EXPECT_NE(e.find("needs 64"), std::string::npos) << e;
    EXPECT_NE(e.find("truncated"), std::string::npos) << e;

    write_raw(path("long.npy"), "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 8);
    EXPECT_NE(error_reading(path("long.npy")).find("trailing"), std::string::npos);

    write_raw(path("noshape.npy"), "{'descr': '<f4', 'fortran_order': False, }", 4);
    EXPECT_NE(error_reading(path("noshape.npy")).find("corrupt"), std::string::npos);
}

// A header whose shape claims more data than any file holds: refused from the sizes, without
// overflowing numel * 4 (2^62 elements: 2^64 bytes) or allocating what the header claims.
TEST_F(Npy, HugeShapesAreRefusedNotAllocated) {
    for (const char* shape : {"(4611686018427387904,)", "(2147483648, 2147483648)", "(1000000000,)",
                              "(3, 1537228672809129301)"}) {
        SCOPED_TRACE(shape);
        write_raw(path("huge.npy"),
                  std::string("{'descr': '<f4', 'fortran_order': False, 'shape': ") + shape + ", }",
                  0);
        const std::string e = error_reading(path("huge.npy"));
        EXPECT_NE(e.find(path("huge.npy")), std::string::npos) << e;
        EXPECT_NE(e.find("holds 0 data bytes"), std::string::npos) << e;
    }
    write_raw(path("huger.npy"),
              "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387905,), }", 0);
    EXPECT_NE(error_reading(path("huger.npy")).find("overflows 2^62"), std::string::npos);
}

}  // namespace
}  // namespace rl
