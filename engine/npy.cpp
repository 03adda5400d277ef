#include "engine/npy.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "engine/atomic_file.h"
#include "engine/errors.h"

namespace rl {

namespace {

static_assert(std::endian::native == std::endian::little,
              ".npy I/O assumes a little-endian host (as are all targets RematLab builds for)");

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

std::string header_dict(const Shape& shape, const char* descr) {
    std::string dims;
    for (size_t i = 0; i < shape.dims.size(); ++i) {
        if (i) dims += ", ";
        dims += std::to_string(shape.dims[i]);
    }
    if (shape.dims.size() == 1) dims += ",";
    return std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" + dims +
           "), }";
}

[[noreturn]] void fail(const std::string& path, const std::string& why) {
    throw Error("'" + path + "': " + why);
}

// Parses the value of `key` in a numpy header dict: the text between "'key':" and the next
// top-level ',' or '}'. Returns false when the key is missing.
bool dict_value(const std::string& dict, const std::string& key, std::string& out) {
    const std::string needle = "'" + key + "'";
    size_t p = dict.find(needle);
    if (p == std::string::npos) return false;
    p = dict.find(':', p + needle.size());
    if (p == std::string::npos) return false;
    ++p;
    while (p < dict.size() && dict[p] == ' ') ++p;
    size_t end = p;
    if (p < dict.size() && dict[p] == '(') {
        end = dict.find(')', p);
        if (end == std::string::npos) return false;
        ++end;
    } else {
        while (end < dict.size() && dict[end] != ',' && dict[end] != '}') ++end;
    }
    out = dict.substr(p, end - p);
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return true;
}

}  // namespace

namespace {

// Both dtypes are 4 bytes wide: `descr` names which ('<f4' or '<i4').
void write_npy_raw(const std::string& path, const void* data, const Shape& shape,
                   const char* descr) {
    const int64_t numel = checked_numel(shape, "write_npy('" + path + "')");
    std::string header = header_dict(shape, descr);
    // Magic (6) + version (2) + length (2) + dict + padding + '\n' is a multiple of 64.
    const size_t unpadded = kMagicLen + 2 + 2 + header.size() + 1;
    header += std::string((64 - unpadded % 64) % 64, ' ');
    header += '\n';
    if (header.size() > 65535) fail(path, "the shape is too long for a .npy 1.0 header");

    const auto len = static_cast<uint16_t>(header.size());
    const char prefix[] = {1, 0, static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
    write_file_atomically(
        path, {std::string_view(kMagic, kMagicLen), std::string_view(prefix, sizeof prefix), header,
               std::string_view(static_cast<const char*>(data), static_cast<size_t>(numel) * 4)});
}

}  // namespace

void write_npy(const std::string& path, const float* data, const Shape& shape) {
    write_npy_raw(path, data, shape, "<f4");
}

void write_npy(const std::string& path, const int32_t* data, const Shape& shape) {
    write_npy_raw(path, data, shape, "<i4");
}

std::vector<float> read_npy_f32(const std::string& path, Shape& shape_out) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail(path, std::string("cannot open: ") + std::strerror(errno));
    char magic[kMagicLen + 2] = {};
    in.read(magic, sizeof magic);
    if (!in || std::memcmp(magic, kMagic, kMagicLen) != 0)
        fail(path, "not a .npy file (the NumPy magic header is missing)");
    const auto major = static_cast<unsigned char>(magic[6]);
    size_t header_len = 0;
    if (major == 1) {
        unsigned char b[2];
        in.read(reinterpret_cast<char*>(b), 2);
        header_len = b[0] | (size_t{b[1]} << 8);
    } else if (major == 2 || major == 3) {
        unsigned char b[4];
        in.read(reinterpret_cast<char*>(b), 4);
        header_len = b[0] | (size_t{b[1]} << 8) | (size_t{b[2]} << 16) | (size_t{b[3]} << 24);
    } else {
        fail(path, ".npy format version " + std::to_string(major) +
                       " is not supported (versions 1 to 3 are)");
    }
    if (!in || header_len > (size_t{1} << 20)) fail(path, "truncated or corrupt .npy header");
    std::string dict(header_len, '\0');
    in.read(dict.data(), static_cast<std::streamsize>(header_len));
    if (!in) fail(path, "truncated .npy header");

    std::string descr, fortran, shape_text;
    if (!dict_value(dict, "descr", descr) || !dict_value(dict, "fortran_order", fortran) ||
        !dict_value(dict, "shape", shape_text))
        fail(path, "corrupt .npy header (it needs descr, fortran_order and shape): " + dict);
    if (descr == "'>f4'")
        fail(path, "the data is big-endian float32 ('>f4'); save it little-endian ('<f4')");
    if (descr != "'<f4'" && descr != "'=f4'")
        fail(path, "the dtype is " + descr +
                       ", expected float32 ('<f4'); convert it with array.astype(np.float32)");
    if (fortran != "False")
        fail(path, "the array is in Fortran order; save a C-ordered array (np.ascontiguousarray)");

    Shape shape;
    if (shape_text.size() < 2 || shape_text.front() != '(' || shape_text.back() != ')')
        fail(path, "corrupt shape in the .npy header: " + shape_text);
    const std::string inner = shape_text.substr(1, shape_text.size() - 2);
    size_t p = 0;
    while (p < inner.size()) {
        while (p < inner.size() && (inner[p] == ' ' || inner[p] == ',')) ++p;
        if (p >= inner.size()) break;
        size_t q = p;
        int64_t d = 0;
        while (q < inner.size() && inner[q] >= '0' && inner[q] <= '9') {
            if (d > (INT64_MAX - 9) / 10) fail(path, "a dimension in the shape is too large");
            d = d * 10 + (inner[q] - '0');
            ++q;
        }
        if (q == p) fail(path, "corrupt shape in the .npy header: " + shape_text);
        shape.dims.push_back(d);
        p = q;
    }
    const int64_t numel = checked_numel(shape, "'" + path + "'");

    const auto data_start = in.tellg();
    in.seekg(0, std::ios::end);
    const auto file_end = in.tellg();
    in.seekg(data_start);
    const std::streamoff available = file_end - data_start;
    // Compared before multiplying: numel * 4 overflows for shapes near checked_numel's limit.
    if (data_start < 0 || available < 0 || numel > available / 4)
        fail(path, "the file holds " + std::to_string(std::max<std::streamoff>(available, 0)) +
                       " data bytes but shape " + format_dims(shape) + " needs " +
                       (numel <= INT64_MAX / 4 ? std::to_string(numel * 4)
                                               : std::to_string(numel) + " x 4") +
                       " (truncated?)");
    const auto expected = static_cast<std::streamoff>(numel) * 4;
    if (available != expected)
        fail(path, "the file holds " + std::to_string(available) + " data bytes but shape " +
                       format_dims(shape) + " needs " + std::to_string(expected) +
                       (available < expected ? " (truncated?)" : " (trailing data?)"));
    std::vector<float> values(static_cast<size_t>(numel));
    in.read(reinterpret_cast<char*>(values.data()), expected);
    if (!in) fail(path, "reading the data failed");
    shape_out = std::move(shape);
    return values;
}

}  // namespace rl
