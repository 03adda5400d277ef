// ONNX import (see onnx_import.h): protobuf parsing with limits, graph checks, constant folding,
// pattern fusion, and the mapping of each ONNX op onto RematLab's ops.
#include "engine/networks/onnx_import.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "engine/errors.h"
#include "engine/huge_pages.h"
#include "engine/networks/slice_narrowing.h"

#if REMATLAB_HAVE_ONNX
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <onnx/onnx_pb.h>  // defines ONNX_API, then includes onnx-ml.pb.h (ONNX_ML=1)

#include <climits>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>
#endif

namespace rl {

namespace {

// Sorted; what the error for an unsupported op lists.
const char* const kSupportedOps[] = {
    "Add",
    "AveragePool",
    "BatchNormalization",
    "Cast",
    "Clip",
    "Concat",
    "Constant",
    "ConstantOfShape",
    "Conv",
    "Div",
    "Dropout",
    "Einsum",
    "Equal",
    "Erf",
    "Exp",
    "Expand",
    "Flatten",
    "Gather",
    "Gelu",
    "Gemm",
    "GlobalAveragePool",
    "HardSigmoid",
    "HardSwish",
    "Identity",
    "LayerNormalization",
    "MatMul",
    "MaxPool",
    "Mod",
    "Mul",
    "Not",
    "Pad",
    "Pow",
    "Range",
    "Reciprocal",
    "ReduceL2",
    "ReduceMean",
    "Relu",
    "Reshape",
    "Resize",
    "ScatterND",
    "Shape",
    "Sigmoid",
    "Slice",
    "Softmax",
    "Split",
    "Sqrt",
    "Squeeze",
    "Sub",
    "Tanh",
    "Transpose",
    "Unsqueeze",
    "Upsample",
    "Where",
};

}  // namespace

std::string onnx_supported_ops() {
    std::string out;
    for (const char* op : kSupportedOps) {
        if (!out.empty()) out += ", ";
        out += op;
    }
    return out;
}

#if !REMATLAB_HAVE_ONNX

bool onnx_import_available() {
    return false;
}

Graph network_from_onnx(const std::string&, const std::string& origin, const OnnxImportOptions&) {
    throw Error(origin +
                ": this RematLab was built without ONNX support (configure with "
                "-DREMATLAB_ONNX=ON after installing libonnx-dev libprotobuf-dev "
                "protobuf-compiler)");
}

Graph load_onnx_file(const std::string& path, const OnnxImportOptions& opt) {
    return network_from_onnx("", path, opt);
}

#else

bool onnx_import_available() {
    return true;
}

namespace {

constexpr int64_t kNumelLimit = int64_t{1} << 62;

// A tensor known at import time: an initializer, a Constant, or the result of folding. Made
// through make_shared and never changed once in an Entry: a parameter made from one shares its
// floats (param_from) instead of copying them.
struct Const : std::enable_shared_from_this<Const> {
    bool is_float = true;
    Dims dims;  // may hold 0 (an empty tensor, such as Resize's unused roi)
    std::vector<float> f;
    std::vector<int64_t> i;
    std::string initializer;  // the initializer it is (or the 2-D transpose of); "" if computed
    bool transposed = false;  // the 2-D transpose of `initializer`

    size_t size() const { return is_float ? f.size() : i.size(); }
    double at(size_t k) const { return is_float ? f[k] : static_cast<double>(i[k]); }
    bool scalar_like() const { return size() == 1; }
    // Appends v as this constant's element type (int64 truncates toward zero).
    void push(double v) {
        if (is_float)
            f.push_back(static_cast<float>(v));
        else
            i.push_back(static_cast<int64_t>(v));
    }
    // Appends element k of src, whose element type is this constant's.
    void push_element(const Const& src, size_t k) {
        if (is_float)
            f.push_back(src.f[k]);
        else
            i.push_back(src.i[k]);
    }
};
using ConstPtr = std::shared_ptr<const Const>;

// What an ONNX tensor name stands for: a value of our graph, or a constant.
struct Entry {
    ValueId value = kNoId;
    ConstPtr c;
};

std::string dims_text(const Dims& d) {
    return format_dims(Shape(d));
}

std::string attr_type_name(int t) {
    return onnx::AttributeProto::AttributeType_IsValid(t)
               ? onnx::AttributeProto::AttributeType_Name(
                     static_cast<onnx::AttributeProto::AttributeType>(t))
               : "type " + std::to_string(t);
}

std::string dtype_text(int t) {
    return onnx::TensorProto::DataType_IsValid(t)
               ? onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(t))
               : "data type " + std::to_string(t);
}

class Importer {
  public:
    // `model` is the importer's to change: each initializer's values leave it once read.
    Importer(onnx::ModelProto& model, std::string origin, const OnnxImportOptions& opt)
        : model_(model), gp_(model.graph()), origin_(std::move(origin)), opt_(opt) {}

    Graph run() {
        check_model();
        read_opset();
        // Named after the file: exporters' graph names are often generic ("torch_jit").
        std::string name = std::filesystem::path(origin_).stem().string();
        if (name.empty() || origin_.front() == '<') name = gp_.name().empty() ? "onnx" : gp_.name();
        g_ = Graph(name, 1);
        read_initializers();
        read_inputs();
        index_nodes();
        // Constants first (a topological order folds whole constant subgraphs in one pass), so
        // that the patterns below see the constants that follow their first node in the file.
        for (int idx : order_) {
            if (op_of(idx) == "Shape" || !foldable(op_of(idx)) || !all_inputs_known_const(idx) ||
                table_gather(idx) || slices_parameter(idx))
                continue;
            define(idx, 0, Entry{kNoId, fold(idx)});
            done_[static_cast<size_t>(idx)] = true;
        }
        for (int idx : order_) {
            if (done_[static_cast<size_t>(idx)]) continue;
            import_node(idx);
        }
        add_loss();
        try {
            g_.finalize();
        } catch (const Error& e) {
            fail(e.what());
        }
        return std::move(g_);
    }

  private:
    // --- messages ----------------------------------------------------------------------------

    [[noreturn]] void fail(const std::string& why) const { throw Error(origin_ + ": " + why); }

    std::string label(int idx) const {
        const auto& n = gp_.node(idx);
        return "node " + std::to_string(idx) + " '" + n.name() + "' (" + n.op_type() + ")";
    }

    [[noreturn]] void fail_node(int idx, const std::string& why) const {
        fail(label(idx) + ": " + why);
    }

    // --- attributes ----------------------------------------------------------------------------

    static const onnx::AttributeProto* find_attr(const onnx::NodeProto& n, std::string_view key) {
        for (const auto& a : n.attribute())
            if (a.name() == key) return &a;
        return nullptr;
    }

    // The attribute's type; files from before ONNX IR 2 may leave it unset.
    static int attr_type(const onnx::AttributeProto& a) {
        if (a.type() != onnx::AttributeProto::UNDEFINED) return a.type();
        if (a.has_i()) return onnx::AttributeProto::INT;
        if (a.has_f()) return onnx::AttributeProto::FLOAT;
        if (a.has_s()) return onnx::AttributeProto::STRING;
        if (a.has_t()) return onnx::AttributeProto::TENSOR;
        if (a.ints_size()) return onnx::AttributeProto::INTS;
        if (a.floats_size()) return onnx::AttributeProto::FLOATS;
        return onnx::AttributeProto::UNDEFINED;
    }

    const onnx::AttributeProto* typed_attr(int idx, std::string_view key, int want) const {
        const auto* a = find_attr(gp_.node(idx), key);
        if (!a) return nullptr;
        if (attr_type(*a) != want)
            fail_node(idx, "attribute '" + std::string(key) + "' is " +
                               attr_type_name(attr_type(*a)) + ", expected " +
                               attr_type_name(want));
        return a;
    }

    int64_t attr_int(int idx, std::string_view key, int64_t fallback) const {
        const auto* a = typed_attr(idx, key, onnx::AttributeProto::INT);
        return a ? a->i() : fallback;
    }

    double attr_float(int idx, std::string_view key, double fallback) const {
        const auto* a = typed_attr(idx, key, onnx::AttributeProto::FLOAT);
        return a ? static_cast<double>(a->f()) : fallback;
    }

    std::string attr_string(int idx, std::string_view key, std::string_view fallback) const {
        const auto* a = typed_attr(idx, key, onnx::AttributeProto::STRING);
        return a ? a->s() : std::string(fallback);
    }

    std::optional<std::vector<int64_t> > attr_ints(int idx, std::string_view key) const {
        const auto* a = typed_attr(idx, key, onnx::AttributeProto::INTS);
        if (!a) return std::nullopt;
        return std::vector<int64_t>(a->ints().begin(), a->ints().end());
    }

    std::vector<float> attr_floats(int idx, std::string_view key) const {
        const auto* a = typed_attr(idx, key, onnx::AttributeProto::FLOATS);
        if (!a) return {};
        return std::vector<float>(a->floats().begin(), a->floats().end());
    }

    // --- the model and its tensors ---------------------------------------------------------------

    void check_model() const {
        if (model_.ir_version() <= 0 || !model_.has_graph())
            fail(
                "not an ONNX model (it has no IR version or no graph); export the network with "
                "torch.onnx.export, tf2onnx or jax2onnx");
        if (gp_.node_size() == 0) fail("the ONNX graph has no nodes");
        if (gp_.output_size() == 0) fail("the ONNX graph has no outputs");
    }

    void read_opset() {
        opset_ = 0;
        for (const auto& o : model_.opset_import())
            if (o.domain().empty() || o.domain() == "ai.onnx") opset_ = o.version();
        if (opset_ <= 0) opset_ = 1;
    }

    int64_t checked_const_numel(const Dims& dims, const std::string& what) const {
        int64_t n = 1;
        for (int64_t d : dims) {
            if (d < 0) fail(what + " has shape " + dims_text(dims) + " with a negative dimension");
            if (d == 0) return 0;
            if (n > kNumelLimit / d)
                fail(what + " has shape " + dims_text(dims) +
                     ", whose element count overflows 2^62");
            n *= d;
        }
        return n;
    }

    void check_tensor_bytes(uint64_t bytes, const std::string& what) const {
        if (bytes > opt_.max_tensor_bytes)
            fail(what + " takes " + std::to_string(bytes) + " bytes, more than the limit of " +
                 std::to_string(opt_.max_tensor_bytes) + " bytes per tensor");
    }

    // Bytes per element of a tensor's raw data; 0 for element types RematLab does not read.
    static uint64_t raw_elem_bytes(int dt) {
        switch (dt) {
            case onnx::TensorProto::DOUBLE:
            case onnx::TensorProto::INT64:
                return 8;
            case onnx::TensorProto::FLOAT:
            case onnx::TensorProto::INT32:
                return 4;
            case onnx::TensorProto::INT16:
                return 2;
            case onnx::TensorProto::INT8:
            case onnx::TensorProto::UINT8:
            case onnx::TensorProto::BOOL:
                return 1;
            default:
                return 0;
        }
    }

    // The raw bytes of a tensor stored as external data (data_location EXTERNAL): `location`, a
    // path relative to the model's folder, `offset` (default 0) and `length` (default: the rest
    // of the file). What is read is exactly what raw_data would hold inline. Everything is
    // checked before a byte is allocated: the location stays inside the model's folder, the file
    // exists, the range lies within it and holds exactly shape × element size bytes.
    std::string read_external(const onnx::TensorProto& t, const std::string& what, const Dims& dims,
                              uint64_t numel) const {
        std::string location;
        std::optional<uint64_t> offset, length;
        auto number = [&](const std::string& key, const std::string& text) {
            uint64_t v = 0;
            const char* end = text.data() + text.size();
            const auto r = std::from_chars(text.data(), end, v);
            if (text.empty() || r.ec != std::errc() || r.ptr != end)
                fail(what + ": its external data has " + key + " '" + text +
                     "', which is not a non-negative integer (a byte count); export the model "
                     "again");
            return v;
        };
        for (const auto& kv : t.external_data()) {
            if (kv.key() == "location") location = kv.value();
            if (kv.key() == "offset") offset = number("offset", kv.value());
            if (kv.key() == "length") length = number("length", kv.value());
        }
        if (location.empty())
            fail(what +
                 " is stored as external data but names no file (its external_data has no "
                 "'location'); export the model again");
        const std::string named = "its external data file '" + location + "'";
        if (opt_.model_dir.empty())
            fail(what + " keeps its data in " + named +
                 ", but the model was given as bytes with no folder to find that file in; "
                 "open the .onnx file itself, with the data file beside it");
        const std::filesystem::path rel(location);
        if (rel.is_absolute() || rel.has_root_name() || rel.has_root_directory())
            fail(what + ": " + named +
                 " is an absolute path; RematLab reads external data only from the model's "
                 "folder, by a path relative to it (as torch.onnx.export and "
                 "onnx.save_model(save_as_external_data=True) write it): move the file beside "
                 "the model and save the model again");
        const std::filesystem::path norm = rel.lexically_normal();
        if (!norm.empty() && *norm.begin() == "..")
            fail(what + ": " + named +
                 " leads outside the model's folder ('..'), which RematLab refuses; keep the "
                 "data file in the model's folder (or below it) and save the model again");
        const uint64_t elem = raw_elem_bytes(t.data_type());
        if (elem == 0)
            fail(what + " has element type " + dtype_text(t.data_type()) +
                 "; RematLab reads FLOAT, DOUBLE and integer tensors");
        // As read_tensor charges it (float data as float32, integers as int64), saturating.
        const bool is_float =
            t.data_type() == onnx::TensorProto::FLOAT || t.data_type() == onnx::TensorProto::DOUBLE;
        auto times = [](uint64_t a, uint64_t b) { return a > UINT64_MAX / b ? UINT64_MAX : a * b; };
        check_tensor_bytes(times(numel, is_float ? 4 : 8), what);
        const uint64_t want = times(numel, elem);
        const std::filesystem::path file = std::filesystem::path(opt_.model_dir) / norm;
        const std::string where = named + " ('" + file.string() + "')";
        std::error_code ec;
        const auto status = std::filesystem::status(file, ec);
        if (ec || !std::filesystem::exists(status))
            fail(what + " keeps its data in " + where +
                 ", which does not exist; keep the data files torch.onnx.export wrote beside the "
                 ".onnx file");
        if (!std::filesystem::is_regular_file(status))
            fail(what + " keeps its data in " + where + ", which is not a regular file");
        const uint64_t size = std::filesystem::file_size(file, ec);
        if (ec) fail(what + ": cannot read the size of " + where + ": " + ec.message());
        const uint64_t off = offset.value_or(0);
        if (off > size)
            fail(what + ": " + where + " has " + std::to_string(size) +
                 " bytes, but the tensor's data starts at offset " + std::to_string(off) +
                 ", past its end; the data file is truncated or belongs to another export: "
                 "export the model again");
        const uint64_t len = length.value_or(size - off);
        if (len != want)
            fail(what + " has shape " + dims_text(dims) + " of " + dtype_text(t.data_type()) +
                 " (" + std::to_string(want) + " bytes), but its data, in " + where + "," +
                 (length ? " has length "
                         : " is the rest of the file from offset " + std::to_string(off) + ", ") +
                 std::to_string(len) +
                 " bytes; the model and its data file do not belong "
                 "together: export the model again");
        if (len > size - off)
            fail(what + ": " + where + " has " + std::to_string(size) +
                 " bytes, but the tensor's data is bytes " + std::to_string(off) + " to " +
                 std::to_string(off + len) +
                 ", past its end; the data file is truncated or belongs to another export: "
                 "export the model again");
        std::ifstream in(file, std::ios::binary);
        if (!in) fail(what + ": cannot open " + where);
        std::string bytes(len, '\0');
        in.seekg(static_cast<std::streamoff>(off));
        in.read(bytes.data(), static_cast<std::streamsize>(len));
        if (!in || static_cast<uint64_t>(in.gcount()) != len)
            fail(what + ": reading " + std::to_string(len) + " bytes at offset " +
                 std::to_string(off) + " of " + where + " failed");
        return bytes;
    }

    // Reads a TensorProto's data, refusing before copying anything that does not add up. NaN is
    // always refused; infinities only in initializers (a Constant may hold masked_fill's -inf).
    std::shared_ptr<Const> read_tensor(const onnx::TensorProto& t, const std::string& what,
                                       bool allow_inf = false) const {
        auto c = std::make_shared<Const>();
        c->dims.assign(t.dims().begin(), t.dims().end());
        const int64_t n = checked_const_numel(c->dims, what);
        if (t.has_segment()) fail(what + " is segmented, which RematLab does not read");
        const auto un = static_cast<uint64_t>(n);
        std::string external;
        if (t.data_location() == onnx::TensorProto::EXTERNAL)
            external = read_external(t, what, c->dims, un);
        const std::string& raw =
            t.data_location() == onnx::TensorProto::EXTERNAL ? external : t.raw_data();
        auto check_count = [&](uint64_t have, uint64_t elem) {
            if (have != un)
                fail(what + " has shape " + dims_text(c->dims) + " (" + std::to_string(n) +
                     " elements) but holds " + std::to_string(have) +
                     (elem ? " elements of raw data" : " elements"));
        };
        const int dt = t.data_type();
        switch (dt) {
            case onnx::TensorProto::FLOAT:
            case onnx::TensorProto::DOUBLE: {
                const uint64_t elem = dt == onnx::TensorProto::FLOAT ? 4 : 8;
                check_tensor_bytes(un * 4, what);
                c->is_float = true;
                if (!raw.empty()) {
                    if (raw.size() % elem) check_count(raw.size() / elem + 1, elem);
                    check_count(raw.size() / elem, elem);
                    resize_on_huge_pages(c->f, un);
                    if (elem == 4) {
                        std::memcpy(c->f.data(), raw.data(), 4 * un);
                    } else {
                        for (uint64_t k = 0; k < un; ++k) {
                            double d;
                            std::memcpy(&d, raw.data() + 8 * k, 8);
                            c->f[k] = static_cast<float>(d);
                        }
                    }
                } else if (dt == onnx::TensorProto::FLOAT) {
                    check_count(static_cast<uint64_t>(t.float_data_size()), 0);
                    c->f.assign(t.float_data().begin(), t.float_data().end());
                } else {
                    check_count(static_cast<uint64_t>(t.double_data_size()), 0);
                    for (double d : t.double_data()) c->f.push_back(static_cast<float>(d));
                }
                for (float x : c->f)
                    if (!std::isfinite(x) && !(allow_inf && std::isinf(x)))
                        fail(what + " holds a value that is not finite (NaN or infinity)");
                break;
            }
            case onnx::TensorProto::INT64:
            case onnx::TensorProto::INT32:
            case onnx::TensorProto::INT16:
            case onnx::TensorProto::INT8:
            case onnx::TensorProto::UINT8:
            case onnx::TensorProto::BOOL: {
                uint64_t elem = 1;
                if (dt == onnx::TensorProto::INT64) elem = 8;
                if (dt == onnx::TensorProto::INT32) elem = 4;
                if (dt == onnx::TensorProto::INT16) elem = 2;
                check_tensor_bytes(un * 8, what);
                c->is_float = false;
                if (!raw.empty()) {
                    if (raw.size() % elem) check_count(raw.size() / elem + 1, elem);
                    check_count(raw.size() / elem, elem);
                    c->i.resize(un);
                    for (uint64_t k = 0; k < un; ++k) {
                        const char* p = raw.data() + elem * k;
                        int64_t v = 0;
                        if (elem == 8) {
                            std::memcpy(&v, p, 8);
                        } else if (elem == 4) {
                            int32_t x;
                            std::memcpy(&x, p, 4);
                            v = x;
                        } else if (elem == 2) {
                            int16_t x;
                            std::memcpy(&x, p, 2);
                            v = x;
                        } else {
                            v = dt == onnx::TensorProto::INT8 ? static_cast<int8_t>(*p)
                                                              : static_cast<uint8_t>(*p);
                        }
                        c->i[k] = v;
                    }
                } else if (dt == onnx::TensorProto::INT64) {
                    check_count(static_cast<uint64_t>(t.int64_data_size()), 0);
                    c->i.assign(t.int64_data().begin(), t.int64_data().end());
                } else {
                    check_count(static_cast<uint64_t>(t.int32_data_size()), 0);
                    c->i.assign(t.int32_data().begin(), t.int32_data().end());
                }
                break;
            }
            default:
                fail(what + " has element type " + dtype_text(dt) +
                     "; RematLab reads FLOAT, DOUBLE and integer tensors");
        }
        return c;
    }

    void read_initializers() {
        for (int k = 0; k < gp_.initializer_size(); ++k) {
            const auto& t = gp_.initializer(k);
            const std::string what = "initializer " + std::to_string(k) + " '" + t.name() + "'";
            if (t.name().empty()) fail(what + " has no name");
            if (env_.count(t.name()))
                fail(what + ": the name is used twice; tensor names must be unique");
            std::shared_ptr<Const> c = read_tensor(t, what);
            c->initializer = t.name();
            env_[t.name()] = Entry{kNoId, std::move(c)};
            // The model's copy of the bytes goes once they are read (swapped out: clearing a
            // string keeps its memory), so that a file's weights are not held twice: ResNeXt-101's
            // 340 MB of them.
            std::string().swap(*model_.mutable_graph()->mutable_initializer(k)->mutable_raw_data());
        }
        if (gp_.sparse_initializer_size())
            fail("the graph has sparse initializers, which RematLab does not read");
    }

    void read_inputs() {
        for (int k = 0; k < gp_.input_size(); ++k) {
            const auto& in = gp_.input(k);
            if (auto it = env_.find(in.name()); it != env_.end()) {
                // Older exporters list the initializers among the inputs too.
                if (it->second.c && initializer_inputs_.insert(in.name()).second) continue;
                fail("input " + std::to_string(k) + " '" + in.name() +
                     "': the name is used twice; tensor names must be unique");
            }
            const std::string what = "input " + std::to_string(k) + " '" + in.name() + "'";
            if (in.name().empty()) fail(what + " has no name");
            if (!in.type().has_tensor_type()) fail(what + " is not a tensor");
            const auto& tt = in.type().tensor_type();
            const bool indices = tt.elem_type() == onnx::TensorProto::INT64 ||
                                 tt.elem_type() == onnx::TensorProto::INT32;
            if (tt.elem_type() != onnx::TensorProto::FLOAT && !indices)
                fail(what + " has element type " + dtype_text(tt.elem_type()) +
                     "; RematLab feeds FLOAT inputs, and INT64/INT32 inputs as indices into an "
                     "embedding table");
            if (!tt.has_shape())
                fail(what + " has no shape; export the model with a fixed input shape");
            Shape s;
            for (int d = 0; d < tt.shape().dim_size(); ++d) {
                const auto& dim = tt.shape().dim(d);
                if (!dim.has_dim_value())
                    fail(what + ": dimension " + std::to_string(d) +
                         (dim.has_dim_param() ? " is symbolic ('" + dim.dim_param() + "')"
                                              : std::string(" is unknown")) +
                         "; RematLab needs fixed sizes: export the model without dynamic axes "
                         "(e.g. torch.onnx.export without dynamic_axes)");
                if (dim.dim_value() <= 0)
                    fail(what + ": dimension " + std::to_string(d) + " is " +
                         std::to_string(dim.dim_value()) + "; dimensions must be positive");
                s.dims.push_back(dim.dim_value());
            }
            ValueId v = kNoId;
            // An integer input that is only ever cast to float (BERT's attention mask, turned
            // into an additive mask by Cast/Sub/Mul) is a float input holding the same integers.
            const bool as_float = indices && cast_to_float_only(in.name());
            const int64_t rows = indices && !as_float ? index_range(in.name(), what) : 0;
            try {
                v = g_.add_input(in.name(), indices && !as_float ? DType::I32 : DType::F32, s,
                                 rows);
            } catch (const Error& e) {
                fail(e.what());
            }
            check_tensor_bytes(g_.value(v).bytes, what);
            env_[in.name()] = Entry{v, nullptr};
            used_names_.insert(in.name());
        }
    }

    // Whether every use of `name` is a Cast to FLOAT/DOUBLE, possibly after Unsqueeze, Squeeze or
    // Reshape (which keep the integers as they are).
    bool cast_to_float_only(const std::string& name) const {
        bool any = false;
        std::vector<std::string> work{name};
        std::set<std::string> seen;
        while (!work.empty()) {
            const std::string t = work.back();
            work.pop_back();
            if (!seen.insert(t).second) continue;
            for (int idx = 0; idx < gp_.node_size(); ++idx) {
                const auto& n = gp_.node(idx);
                if (n.input_size() == 0 || n.input(0) != t) {
                    for (int k = 1; k < n.input_size(); ++k)
                        if (n.input(k) == t) return false;
                    continue;
                }
                const std::string& op = n.op_type();
                if (op == "Unsqueeze" || op == "Squeeze" || op == "Reshape") {
                    if (n.output_size() > 0) work.push_back(n.output(0));
                    continue;
                }
                const auto* to = find_attr(n, "to");
                if (op != "Cast" || !to ||
                    (to->i() != onnx::TensorProto::FLOAT && to->i() != onnx::TensorProto::DOUBLE))
                    return false;
                any = true;
            }
        }
        return any;
    }

    // The rows of the smallest embedding table an integer input indexes (Gather of a 2-D float
    // initializer along axis 0): its values must lie in [0, rows).
    int64_t index_range(const std::string& name, const std::string& what) const {
        int64_t rows = 0;
        for (int idx = 0; idx < gp_.node_size(); ++idx) {
            const auto& n = gp_.node(idx);
            if (n.op_type() != "Gather" || n.input_size() < 2 || n.input(1) != name) continue;
            auto it = env_.find(n.input(0));
            const auto* axis = find_attr(n, "axis");
            if (it == env_.end() || !it->second.c || !it->second.c->is_float ||
                it->second.c->dims.size() != 2 || (axis && axis->i() != 0))
                continue;
            const int64_t r = it->second.c->dims[0];
            rows = rows == 0 ? r : std::min(rows, r);
        }
        if (rows <= 0)
            fail(what +
                 " holds integers, but no Gather reads it as the indices of an embedding table "
                 "(a 2-D float initializer); RematLab reads integer inputs only as embedding "
                 "indices");
        return rows;
    }

    // Producers, the nodes the output needs, unsupported ops, dangling inputs and cycles; then a
    // topological order of the needed nodes.
    void index_nodes() {
        const int n = gp_.node_size();
        done_.assign(static_cast<size_t>(n), false);
        for (int idx = 0; idx < n; ++idx) {
            for (const auto& out : gp_.node(idx).output()) {
                if (out.empty()) continue;
                if (env_.count(out))
                    fail(label(idx) + ": its output '" + out +
                         "' has the name of a graph input or initializer; tensor names must be "
                         "unique");
                auto [it, fresh] = producer_.emplace(out, idx);
                if (!fresh)
                    fail(label(idx) + ": its output '" + out + "' is also the output of " +
                         label(it->second) + "; tensor names must be unique");
            }
        }
        // Dangling inputs, all at once.
        std::vector<std::string> dangling;
        for (int idx = 0; idx < n; ++idx)
            for (const auto& in : gp_.node(idx).input())
                if (!in.empty() && !env_.count(in) && !producer_.count(in))
                    dangling.push_back(label(idx) + " reads '" + in + "'");
        if (!dangling.empty()) {
            std::string msg = std::to_string(dangling.size()) +
                              " node input(s) name a tensor that no node, graph input or "
                              "initializer defines: ";
            for (size_t k = 0; k < dangling.size() && k < 20; ++k)
                msg += (k ? "; " : "") + dangling[k];
            if (dangling.size() > 20) msg += "; …";
            fail(msg);
        }

        output_ = gp_.output(0).name();
        if (!producer_.count(output_))
            fail("the graph's output '" + output_ +
                 "' is not computed by any node (it is an input, an initializer or undefined)");

        // The nodes the first output depends on; the rest (other outputs) are not imported.
        std::vector<bool> needed(static_cast<size_t>(n), false);
        std::deque<int> work{producer_.at(output_)};
        needed[static_cast<size_t>(work.front())] = true;
        while (!work.empty()) {
            const int idx = work.front();
            work.pop_front();
            for (const auto& in : gp_.node(idx).input()) {
                auto it = producer_.find(in);
                if (it == producer_.end() || needed[static_cast<size_t>(it->second)]) continue;
                needed[static_cast<size_t>(it->second)] = true;
                work.push_back(it->second);
            }
        }

        std::vector<std::string> unsupported;
        for (int idx = 0; idx < n; ++idx) {
            if (!needed[static_cast<size_t>(idx)]) continue;
            const auto& node = gp_.node(idx);
            const bool std_domain = node.domain().empty() || node.domain() == "ai.onnx";
            bool known = false;
            for (const char* op : kSupportedOps) known = known || node.op_type() == op;
            if (!std_domain || !known)
                unsupported.push_back("node " + std::to_string(idx) + " '" + node.name() + "' (" +
                                      (std_domain ? "" : node.domain() + "::") + node.op_type() +
                                      ")");
        }
        if (!unsupported.empty()) {
            std::string msg = std::to_string(unsupported.size()) +
                              (unsupported.size() == 1 ? " node uses an op" : " nodes use ops") +
                              " RematLab cannot import: ";
            for (size_t k = 0; k < unsupported.size(); ++k) msg += (k ? ", " : "") + unsupported[k];
            fail(msg + ". Supported ONNX ops: " + onnx_supported_ops());
        }

        // Kahn's algorithm over the needed nodes, preferring file order.
        std::vector<int> pending(static_cast<size_t>(n), 0);
        std::vector<std::vector<int> > users(static_cast<size_t>(n));
        for (int idx = 0; idx < n; ++idx) {
            if (!needed[static_cast<size_t>(idx)]) continue;
            for (const auto& in : gp_.node(idx).input()) {
                auto it = producer_.find(in);
                if (it == producer_.end()) continue;
                ++pending[static_cast<size_t>(idx)];
                users[static_cast<size_t>(it->second)].push_back(idx);
                consumers_[in].push_back(idx);
            }
        }
        for (int idx = 0; idx < n; ++idx)
            if (needed[static_cast<size_t>(idx)])
                for (const auto& in : gp_.node(idx).input())
                    if (!in.empty() && !producer_.count(in)) consumers_[in].push_back(idx);
        std::set<int> ready;
        for (int idx = 0; idx < n; ++idx)
            if (needed[static_cast<size_t>(idx)] && pending[static_cast<size_t>(idx)] == 0)
                ready.insert(idx);
        while (!ready.empty()) {
            const int idx = *ready.begin();
            ready.erase(ready.begin());
            order_.push_back(idx);
            for (int u : users[static_cast<size_t>(idx)])
                if (--pending[static_cast<size_t>(u)] == 0) ready.insert(u);
        }
        const auto n_needed = std::count(needed.begin(), needed.end(), true);
        if (static_cast<long>(order_.size()) != n_needed) {
            std::string cycle;
            int shown = 0;
            for (int idx = 0; idx < n && shown < 10; ++idx)
                if (needed[static_cast<size_t>(idx)] && pending[static_cast<size_t>(idx)] > 0) {
                    cycle += (shown++ ? ", " : "") + label(idx);
                }
            fail("the graph has a cycle; these nodes wait on each other: " + cycle);
        }
    }

    // --- lookups ---------------------------------------------------------------------------------

    const std::string& in_name(int idx, int k) const { return gp_.node(idx).input(k); }
    int num_inputs(int idx) const { return gp_.node(idx).input_size(); }
    bool has_input(int idx, int k) const { return k < num_inputs(idx) && !in_name(idx, k).empty(); }

    const Entry& entry(int idx, int k) const {
        auto it = env_.find(in_name(idx, k));
        if (it == env_.end())  // cannot happen after index_nodes(); kept as a clear error
            fail_node(idx, "input '" + in_name(idx, k) + "' is not defined");
        return it->second;
    }

    // Whether input k is a constant already known (a later node's output is not known yet).
    bool is_const(int idx, int k) const {
        if (!has_input(idx, k)) return false;
        auto it = env_.find(in_name(idx, k));
        return it != env_.end() && it->second.c;
    }

    ValueId act(int idx, int k) {
        if (!has_input(idx, k)) fail_node(idx, "input " + std::to_string(k) + " is missing");
        const Entry& e = entry(idx, k);
        if (e.c) return materialize(idx, k, *e.c);
        return e.value;
    }

    // A constant read where an op takes a tensor, as a node without inputs: a float initializer
    // becomes a `parameter` node (its value is the parameter, its gradient flows back into it,
    // e.g. Swin V2's logit_scale under Clip → Exp), a folded float tensor a `constant` node (no
    // gradient, e.g. the zeros in Swin V2's qkv bias). One node per ONNX tensor, shared by its
    // readers. ONNX does not say which initializers are trained: an initializer read as a tensor
    // is a parameter, as one read as a weight or an operand is (a PyTorch buffer read this way,
    // Swin V2's relative_coords_table, gets a gradient that PyTorch does not compute).
    ValueId materialize(int idx, int k, const Const& c) {
        const std::string& tensor = in_name(idx, k);
        if (auto it = materialized_.find(tensor); it != materialized_.end()) return it->second;
        const std::string what = "input " + std::to_string(k) + " ('" + tensor + "') ";
        if (!c.is_float)
            fail_node(idx, what +
                               "is a constant of integers, read here as a tensor; RematLab "
                               "imports integer constants as shapes, axes and indices only");
        if (c.f.empty()) fail_node(idx, what + "is an empty constant " + dims_text(c.dims));
        for (float v : c.f)
            if (!std::isfinite(v))
                fail_node(idx, what + "is a constant holding a value that is not finite");
        ValueId v = kNoId;
        if (!c.initializer.empty()) {
            const std::vector<ParamSource> params{param_from(idx, c)};
            v = add(idx, c.initializer, OpKind::Parameter, {}, {{"shape", c.dims}}, params);
        } else {
            std::vector<int64_t> bits(c.f.size());
            for (size_t j = 0; j < c.f.size(); ++j) {
                uint32_t u;
                std::memcpy(&u, &c.f[j], sizeof(u));
                bits[j] = u;
            }
            v = add(idx, tensor, OpKind::Constant, {},
                    {{"constant_shape", c.dims}, {"constant_bits", std::move(bits)}});
        }
        materialized_[tensor] = v;
        return v;
    }

    const Const& cst(int idx, int k, const char* what) const {
        if (!has_input(idx, k))
            fail_node(idx, "input " + std::to_string(k) + " (" + what + ") is missing");
        const Entry& e = entry(idx, k);
        if (!e.c)
            fail_node(idx, "input " + std::to_string(k) + " ('" + in_name(idx, k) + "', " + what +
                               ") must be a constant or an initializer, not a computed tensor");
        return *e.c;
    }

    const Shape& shape_of(ValueId v) const { return g_.value(v).shape; }

    void define(int idx, int out, Entry e) {
        const auto& node = gp_.node(idx);
        if (out < node.output_size() && !node.output(out).empty())
            env_[node.output(out)] = std::move(e);
    }

    // Outputs after the first must be unused (BatchNormalization's running statistics, MaxPool's
    // indices, Dropout's mask, LayerNormalization's mean).
    void require_single_output(int idx, const char* what) const {
        const auto& node = gp_.node(idx);
        for (int k = 1; k < node.output_size(); ++k)
            if (!node.output(k).empty() && consumers_.count(node.output(k)))
                fail_node(idx, "its output " + std::to_string(k) + " ('" + node.output(k) + "', " +
                                   what + ") is used, but RematLab computes only output 0");
    }

    // The node that alone reads `tensor` (once), or -1.
    int sole_consumer(const std::string& tensor) const {
        if (tensor == output_) return -1;
        auto it = consumers_.find(tensor);
        if (it == consumers_.end() || it->second.size() != 1) return -1;
        const int c = it->second.front();
        return done_[static_cast<size_t>(c)] ? -1 : c;
    }

    const std::string& out_name(int idx) const { return gp_.node(idx).output(0); }
    const std::string& op_of(int idx) const { return gp_.node(idx).op_type(); }

    // The constant operand of a binary node whose other operand is `tensor`, or null.
    const Const* other_const(int idx, const std::string& tensor) const {
        if (num_inputs(idx) != 2) return nullptr;
        for (int k = 0; k < 2; ++k)
            if (in_name(idx, k) == tensor && is_const(idx, 1 - k)) return &cst(idx, 1 - k, "");
        return nullptr;
    }

    // --- building --------------------------------------------------------------------------------

    std::string unique_name(std::string base) {
        if (base.empty()) base = "node";
        std::string name = base;
        for (int k = 2; used_names_.count(name) || g_.find_value(name); ++k)
            name = base + "_" + std::to_string(k);
        used_names_.insert(name);
        return name;
    }

    // "/block0/fc/Gemm" → "/block0/fc"; the importer names fused nodes after their module.
    static std::string module_of(const std::string& name) {
        const size_t slash = name.rfind('/');
        return slash == std::string::npos || slash == 0 ? name : name.substr(0, slash);
    }

    static std::vector<std::string> tags_for(const std::string& onnx_name, OpKind op) {
        std::vector<std::string> tags;
        if (op == OpKind::Linear || op == OpKind::MatMul || op == OpKind::Conv2d)
            tags.emplace_back("dot");
        // The top-level module ("/block0/fc/Gemm" → "block0"): what per-block policies group.
        if (onnx_name.size() > 1 && onnx_name[0] == '/') {
            const size_t end = onnx_name.find('/', 1);
            if (end != std::string::npos && end > 1) tags.push_back(onnx_name.substr(1, end - 1));
        }
        return tags;
    }

    ValueId add(int idx, const std::string& base, OpKind op, const std::vector<ValueId>& inputs,
                Attrs attrs, const std::vector<ParamSource>& params = {}) {
        const std::string name = unique_name(base);
        NodeId node = kNoId;
        try {
            node = g_.add_node(name, op, inputs, std::move(attrs),
                               tags_for(gp_.node(idx).name(), op), params);
        } catch (const Error& e) {
            fail_node(idx, e.what());
        }
        const Value& out = g_.output_of(node);
        check_tensor_bytes(out.bytes,
                           "the output of " + label(idx) + " " + format_type(out.dtype, out.shape));
        return g_.node(node).output;
    }

    std::string node_base(int idx) const {
        const auto& n = gp_.node(idx);
        return n.name().empty() ? n.output(0) : n.name();
    }

    // A parameter from a constant: the initializer's name and values, and the initializer's layout
    // (`values_transposed`: `values` is the 2-D transpose of c's). An initializer that is already a
    // parameter of an earlier node is tied to it (one parameter read by both, e.g. a language
    // model's output head and its token embedding), provided both read it in the same layout (an
    // nn.Linear head reads its [out, in] weight as the embedding reads [rows, dim]).
    // The constant's own floats, shared with it rather than copied (a model's weights were held
    // twice until the import returned, and the copy was a quarter of ResNeXt-101's import,
    // docs/benchmarks.md); a copy only where c is not held by a shared pointer.
    ParamSource param_from(int idx, const Const& c) {
        if (const std::shared_ptr<const Const> held = c.weak_from_this().lock())
            return param_from(idx, c, std::shared_ptr<const std::vector<float> >(held, &held->f));
        return param_from(idx, c, std::vector<float>(c.f));
    }
    ParamSource param_from(int idx, const Const& c, std::vector<float> values,
                           bool values_transposed = false) {
        return param_from(idx, c, std::make_shared<const std::vector<float> >(std::move(values)),
                          values_transposed);
    }
    ParamSource param_from(int idx, const Const& c,
                           std::shared_ptr<const std::vector<float> > shared,
                           bool values_transposed = false) {
        const std::vector<float>& values = *shared;
        if (!c.is_float) fail_node(idx, "a weight must hold floating-point values");
        if (!c.initializer.empty()) {
            auto [it, fresh] = param_owner_.emplace(c.initializer, idx);
            if (!fresh) {
                const auto& first = param_values_.at(c.initializer);
                if (*first != values)
                    fail_node(idx, "initializer '" + c.initializer + "' is also a weight of " +
                                       label(it->second) +
                                       ", read there in another layout (transposed); tied "
                                       "weights must be read in one layout");
                return ParamSource{c.initializer, nullptr, true};
            }
        }
        ParamSource src{c.initializer, shared};
        if (!c.initializer.empty()) {
            param_values_[c.initializer] = shared;
            // The initializer itself: c's dims, swapped back when c is its transpose.
            StoredLayout st{c.dims, values_transposed != c.transposed};
            if (c.transposed && st.dims.size() == 2) std::swap(st.dims[0], st.dims[1]);
            src.stored = std::move(st);
        }
        return src;
    }

    static std::vector<float> transpose2d(const std::vector<float>& v, int64_t rows, int64_t cols) {
        std::vector<float> t(v.size());
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < cols; ++c)
                t[static_cast<size_t>(c * rows + r)] = v[static_cast<size_t>(r * cols + c)];
        return t;
    }

    // --- constant folding ------------------------------------------------------------------------

    static bool foldable(const std::string& op) {
        static const std::set<std::string> ops = {
            "Constant", "Identity", "Cast", "Unsqueeze", "Squeeze", "Concat", "Gather", "Reshape",
            "Transpose", "Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Shape",
            // masks and index tensors built from buffers (a causal tril, arange positions)
            "Expand", "ConstantOfShape", "Equal", "Where", "Slice",
            // Swin's shifted-window mask, built in its forward from aranges and slice writes
            "Range", "Mod", "Not", "ScatterND"};
        return ops.count(op) > 0;
    }

    // A Slice of a float initializer that a gradient flows through (Swin V2's qkv bias with its
    // key part zeroed: Concat(Slice(qkv.bias), zeros, Slice(qkv.bias)), added to the qkv
    // projection) is imported as ops on the parameter, not folded: folded, the parameter would
    // silently get no gradient. One that no gradient reaches (a causal-mask buffer sliced and
    // compared, GPT-2's bias[:, :, :T, :T] == 0) is still folded into a constant.
    bool slices_parameter(int idx) {
        if (op_of(idx) != "Slice" || !is_const(idx, 0)) return false;
        const Const& c = *entry(idx, 0).c;
        return c.is_float && !c.initializer.empty() && carries_gradient(out_name(idx));
    }

    // Whether a gradient would reach `tensor` from the graph's output: some path to the output
    // goes only through inputs that carry one (not a Slice's starts, a Where's condition, an
    // Equal's operands, a Reshape's shape, ...). One sweep over the nodes in reverse topological
    // order, on first use (no recursion: a long chain must not exhaust the stack).
    bool carries_gradient(const std::string& tensor) {
        if (!gradient_swept_) {
            gradient_swept_ = true;
            carries_gradient_.insert(output_);
            for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
                const auto& node = gp_.node(*it);
                bool out = false;
                for (const auto& o : node.output()) out = out || carries_gradient_.count(o);
                if (!out) continue;
                for (int k = 0; k < node.input_size(); ++k)
                    if (!node.input(k).empty() && differentiable_input(*it, k))
                        carries_gradient_.insert(node.input(k));
            }
        }
        return carries_gradient_.count(tensor) > 0;
    }

    bool differentiable_input(int idx, int k) const {
        static const std::set<std::string> none = {"Equal",           "Not",   "Shape",
                                                   "ConstantOfShape", "Range", "Mod"};
        static const std::set<std::string> data_only = {
            "Slice",      "Reshape",  "Expand", "Gather",   "Unsqueeze",
            "Squeeze",    "Pad",      "Resize", "Upsample", "Split",
            "ReduceMean", "ReduceL2", "Clip",   "Dropout",  "ScatterND"};
        const std::string& op = op_of(idx);
        if (none.count(op)) return false;
        if (op == "Cast") {
            const int64_t to = attr_int(idx, "to", onnx::TensorProto::FLOAT);
            return to == onnx::TensorProto::FLOAT || to == onnx::TensorProto::DOUBLE;
        }
        if (op == "Where") return k > 0;
        if (data_only.count(op)) return k == 0 || (op == "ScatterND" && k == 2);
        return true;
    }

    bool all_inputs_known_const(int idx) const {
        for (int k = 0; k < num_inputs(idx); ++k)
            if (has_input(idx, k) && !is_const(idx, k)) return false;
        return true;
    }

    bool all_inputs_const(int idx) const {
        for (int k = 0; k < num_inputs(idx); ++k)
            if (has_input(idx, k) && !entry(idx, k).c) return false;
        return true;
    }

    int64_t axis_in(int idx, int64_t axis, int64_t rank, bool allow_end = false) const {
        const int64_t hi = allow_end ? rank : rank - 1;
        const int64_t a = axis < 0 ? axis + rank : axis;
        if (a < 0 || a > hi)
            fail_node(idx, "axis " + std::to_string(axis) + " is out of range for rank " +
                               std::to_string(rank));
        return a;
    }

    // The axes of Unsqueeze/Squeeze/ReduceMean: an attribute (older opsets) or input 1.
    std::optional<std::vector<int64_t> > axes_of(int idx) const {
        if (auto a = attr_ints(idx, "axes")) return a;
        if (has_input(idx, 1)) {
            const Const& c = cst(idx, 1, "axes");
            if (c.is_float) fail_node(idx, "axes must be integers");
            return c.i;
        }
        return std::nullopt;
    }

    ConstPtr fold(int idx) {
        const std::string& op = op_of(idx);
        auto out = std::make_shared<Const>();
        if (op == "Constant") {
            const auto& node = gp_.node(idx);
            if (const auto* t = typed_attr(idx, "value", onnx::AttributeProto::TENSOR)) {
                return read_tensor(t->t(), label(idx) + " value", true);
            }
            if (const auto* a = find_attr(node, "value_float")) {
                (void)typed_attr(idx, "value_float", onnx::AttributeProto::FLOAT);
                out->f = {a->f()};
            } else if (find_attr(node, "value_floats")) {
                out->f = attr_floats(idx, "value_floats");
                out->dims = {static_cast<int64_t>(out->f.size())};
            } else if (find_attr(node, "value_int")) {
                out->is_float = false;
                out->i = {attr_int(idx, "value_int", 0)};
            } else if (find_attr(node, "value_ints")) {
                out->is_float = false;
                out->i = *attr_ints(idx, "value_ints");
                out->dims = {static_cast<int64_t>(out->i.size())};
            } else {
                fail_node(idx,
                          "a Constant needs a 'value' tensor (or value_float(s)/value_int(s))");
            }
            return out;
        }
        if (op == "ConstantOfShape") return fold_constant_of_shape(idx);
        if (op == "Expand" || op == "Equal" || op == "Where") return fold_broadcast(idx);
        if (op == "Slice") return fold_slice(idx);
        if (op == "Range") return fold_range(idx);
        if (op == "ScatterND") return fold_scatter_nd(idx);
        const Const& a = cst(idx, 0, "data");
        if (op == "Not") {
            if (a.is_float) fail_node(idx, "Not needs a boolean input");
            *out = a;
            out->initializer.clear();
            for (int64_t& v : out->i) v = v == 0;
            return out;
        }
        if (op == "Identity") return entry(idx, 0).c;
        if (op == "Shape") {
            out->is_float = false;
            out->i = a.dims;
            out->dims = {static_cast<int64_t>(a.dims.size())};
            return out;
        }
        if (op == "Cast") {
            const int64_t to = attr_int(idx, "to", 0);
            *out = a;
            out->initializer.clear();
            const bool to_float = to == onnx::TensorProto::FLOAT || to == onnx::TensorProto::DOUBLE;
            if (to_float && !a.is_float) {
                out->is_float = true;
                for (int64_t v : a.i) out->f.push_back(static_cast<float>(v));
                out->i.clear();
            } else if (!to_float && a.is_float) {
                out->is_float = false;
                for (float v : a.f) {
                    if (!(std::fabs(v) < 9.2e18f)) fail_node(idx, "a value does not fit int64");
                    out->i.push_back(static_cast<int64_t>(v));
                }
                out->f.clear();
            }
            return out;
        }
        if (op == "Unsqueeze" || op == "Squeeze") {
            *out = a;
            out->initializer.clear();
            auto axes = axes_of(idx);
            if (op == "Unsqueeze") {
                if (!axes) fail_node(idx, "Unsqueeze needs axes");
                const auto rank = static_cast<int64_t>(a.dims.size() + axes->size());
                std::vector<int64_t> norm;
                for (int64_t ax : *axes) norm.push_back(axis_in(idx, ax, rank));
                std::sort(norm.begin(), norm.end());
                if (std::adjacent_find(norm.begin(), norm.end()) != norm.end())
                    fail_node(idx, "axes repeat an axis");
                for (int64_t ax : norm)
                    out->dims.insert(out->dims.begin() + static_cast<ptrdiff_t>(ax), 1);
            } else {
                Dims d;
                const auto rank = static_cast<int64_t>(a.dims.size());
                std::vector<bool> drop(a.dims.size(), false);
                if (axes) {
                    for (int64_t ax : *axes) {
                        const int64_t r = axis_in(idx, ax, rank);
                        if (a.dims[static_cast<size_t>(r)] != 1)
                            fail_node(idx, "cannot squeeze axis " + std::to_string(ax) +
                                               " of size " +
                                               std::to_string(a.dims[static_cast<size_t>(r)]));
                        drop[static_cast<size_t>(r)] = true;
                    }
                }
                for (size_t k = 0; k < a.dims.size(); ++k)
                    if (!(axes ? drop[k] : a.dims[k] == 1)) d.push_back(a.dims[k]);
                out->dims = d;
            }
            return out;
        }
        if (op == "Concat") {
            const int64_t rank = static_cast<int64_t>(a.dims.size());
            if (rank < 1) fail_node(idx, "constant Concat of scalars");
            const auto axis = static_cast<size_t>(axis_in(idx, attr_int(idx, "axis", 0), rank));
            out->is_float = a.is_float;
            out->dims = a.dims;
            out->dims[axis] = 0;
            // Blocks: `outer` rows of each input's [axis…] part, taken in input order per row.
            size_t outer = 1;
            for (size_t d = 0; d < axis; ++d) outer *= static_cast<size_t>(a.dims[d]);
            std::vector<size_t> block;
            for (int k = 0; k < num_inputs(idx); ++k) {
                const Const& c = cst(idx, k, "data");
                bool same = c.is_float == a.is_float && c.dims.size() == a.dims.size();
                for (size_t d = 0; same && d < a.dims.size(); ++d)
                    same = d == axis || c.dims[d] == a.dims[d];
                if (!same)
                    fail_node(idx, "constant Concat inputs " + dims_text(a.dims) + " and " +
                                       dims_text(c.dims) +
                                       " differ in element type or off the axis");
                out->dims[axis] += c.dims[axis];
                block.push_back(outer ? c.size() / outer : 0);
            }
            for (size_t o = 0; o < outer; ++o)
                for (int k = 0; k < num_inputs(idx); ++k) {
                    const Const& c = cst(idx, k, "data");
                    const size_t b = block[static_cast<size_t>(k)];
                    if (c.is_float)
                        out->f.insert(out->f.end(), c.f.begin() + static_cast<ptrdiff_t>(o * b),
                                      c.f.begin() + static_cast<ptrdiff_t>((o + 1) * b));
                    else
                        out->i.insert(out->i.end(), c.i.begin() + static_cast<ptrdiff_t>(o * b),
                                      c.i.begin() + static_cast<ptrdiff_t>((o + 1) * b));
                }
            return out;
        }
        if (op == "Gather") {
            const Const& ind = cst(idx, 1, "indices");
            if (ind.is_float) fail_node(idx, "indices must be integers");
            if (a.dims.size() != 1) fail_node(idx, "constant Gather is supported on 1-D data only");
            axis_in(idx, attr_int(idx, "axis", 0), 1);
            out->is_float = a.is_float;
            out->dims = ind.dims;
            const auto n = static_cast<int64_t>(a.size());
            for (int64_t k : ind.i) {
                const int64_t r = k < 0 ? k + n : k;
                if (r < 0 || r >= n)
                    fail_node(idx, "index " + std::to_string(k) + " is out of range for " +
                                       std::to_string(n) + " elements");
                out->push_element(a, static_cast<size_t>(r));
            }
            return out;
        }
        if (op == "Reshape") {
            *out = a;
            out->initializer.clear();
            out->dims = reshape_dims(idx, a.dims, static_cast<int64_t>(a.size()));
            return out;
        }
        if (op == "Transpose" && a.dims.size() != 2 && a.initializer.empty()) {
            const auto rank = static_cast<int64_t>(a.dims.size());
            std::vector<int64_t> perm = attr_ints(idx, "perm").value_or(std::vector<int64_t>{});
            if (perm.empty())
                for (int64_t k = rank - 1; k >= 0; --k) perm.push_back(k);
            std::vector<bool> seen(a.dims.size(), false);
            if (static_cast<int64_t>(perm.size()) != rank)
                fail_node(idx, "perm " + dims_text(perm) + " does not match rank " +
                                   std::to_string(rank));
            for (int64_t p : perm) {
                if (p < 0 || p >= rank || seen[static_cast<size_t>(p)])
                    fail_node(idx, "perm " + dims_text(perm) + " is not a permutation");
                seen[static_cast<size_t>(p)] = true;
            }
            out->is_float = a.is_float;
            for (int64_t p : perm) out->dims.push_back(a.dims[static_cast<size_t>(p)]);
            std::vector<size_t> stride(a.dims.size(), 1);
            for (size_t k = a.dims.size(); k-- > 1;)
                stride[k - 1] = stride[k] * static_cast<size_t>(a.dims[k]);
            const size_t n = a.size();
            for (size_t k = 0; k < n; ++k) {
                size_t rest = k, at = 0;
                for (size_t j = perm.size(); j-- > 0;) {
                    const auto d = static_cast<size_t>(out->dims[j]);
                    at += (rest % d) * stride[static_cast<size_t>(perm[j])];
                    rest /= d;
                }
                out->push_element(a, at);
            }
            return out;
        }
        if (op == "Transpose") {
            if (a.dims.size() != 2) {
                const auto perm = attr_ints(idx, "perm");
                bool identity = true;
                if (perm)
                    for (size_t k = 0; k < perm->size(); ++k)
                        identity = identity && (*perm)[k] == static_cast<int64_t>(k);
                if (!(perm && identity && perm->size() == a.dims.size()) && a.size() > 1)
                    fail_node(idx, "constant Transpose is supported on 2-D tensors only");
                return entry(idx, 0).c;
            }
            const auto perm = attr_ints(idx, "perm").value_or(std::vector<int64_t>{1, 0});
            if (perm == std::vector<int64_t>{0, 1}) return entry(idx, 0).c;
            if (perm != std::vector<int64_t>{1, 0}) fail_node(idx, "perm must be [1, 0] or [0, 1]");
            *out = a;
            out->dims = {a.dims[1], a.dims[0]};
            if (a.is_float)
                out->f = transpose2d(a.f, a.dims[0], a.dims[1]);
            else
                out->i.clear();
            if (!a.is_float)
                for (int64_t c = 0; c < a.dims[1]; ++c)
                    for (int64_t r = 0; r < a.dims[0]; ++r)
                        out->i.push_back(a.i[static_cast<size_t>(r * a.dims[1] + c)]);
            out->transposed = !a.transposed;
            return out;
        }
        if (op == "Sqrt") {
            if (!a.is_float) fail_node(idx, "Sqrt needs floating-point input");
            *out = a;
            out->initializer.clear();
            for (float& x : out->f) x = std::sqrt(x);
            return out;
        }
        // Binary elementwise on constants: same shapes, or one side with a single element.
        const Const& b = cst(idx, 1, "operand");
        out->dims = broadcast_dims(idx, a.dims, b.dims);
        out->is_float = a.is_float || b.is_float;
        const auto n = static_cast<size_t>(checked_fold_numel(idx, out->dims));
        for (size_t k = 0; k < n; ++k) {
            const double x = a.at(broadcast_index(k, out->dims, a.dims)),
                         y = b.at(broadcast_index(k, out->dims, b.dims));
            double r = 0;
            if (op == "Add") r = x + y;
            if (op == "Sub") r = x - y;
            if (op == "Mul") r = x * y;
            if (op == "Pow") r = std::pow(x, y);
            if (op == "Mod") {
                if (y == 0) fail_node(idx, "modulo by zero in a constant");
                // fmod=1: the sign of the dividend (C's fmod); else the divisor's (Python's %).
                r = std::fmod(x, y);
                if (attr_int(idx, "fmod", 0) == 0 && r != 0 && ((r < 0) != (y < 0))) r += y;
            }
            if (op == "Div") {
                if (y == 0) fail_node(idx, "division by zero in a constant");
                r = out->is_float ? x / y : std::floor(x / y);
            }
            if (out->is_float) {
                out->f.push_back(static_cast<float>(r));
            } else {
                if (!(std::fabs(r) < 9.2e18)) fail_node(idx, "a constant overflows int64");
                out->i.push_back(static_cast<int64_t>(r));
            }
        }
        return out;
    }

    // --- folding masks: numpy broadcasting over constants --------------------------------------

    Dims broadcast_dims(int idx, const Dims& a, const Dims& b) const {
        Dims out(std::max(a.size(), b.size()), 1);
        for (size_t k = 0; k < out.size(); ++k) {
            const size_t ka = k + a.size(), kb = k + b.size();
            const int64_t x = ka >= out.size() ? a[ka - out.size()] : 1;
            const int64_t y = kb >= out.size() ? b[kb - out.size()] : 1;
            if (x != y && x != 1 && y != 1)
                fail_node(idx,
                          "shapes " + dims_text(a) + " and " + dims_text(b) + " do not broadcast");
            out[k] = x == 1 ? y : x;
        }
        return out;
    }

    // The element of a constant of shape `in` that output element `k` of shape `out` reads.
    static size_t broadcast_index(size_t k, const Dims& out, const Dims& in) {
        size_t at = 0, stride = 1;
        for (size_t a = out.size(); a-- > 0;) {
            const auto pos = static_cast<int64_t>(k % static_cast<size_t>(out[a]));
            k /= static_cast<size_t>(out[a]);
            const size_t ia = a + in.size();
            if (ia < out.size()) continue;
            const int64_t d = in[ia - out.size()];
            at += static_cast<size_t>(d == 1 ? 0 : pos) * stride;
            stride *= static_cast<size_t>(d);
        }
        return at;
    }

    int64_t checked_fold_numel(int idx, const Dims& d) const {
        const int64_t n = checked_const_numel(d, label(idx) + " folded");
        check_tensor_bytes(static_cast<uint64_t>(n) * 8, label(idx) + " folded");
        return n;
    }

    ConstPtr fold_constant_of_shape(int idx) {
        const Const& shape = cst(idx, 0, "shape");
        if (shape.is_float) fail_node(idx, "the shape must be integers");
        auto out = std::make_shared<Const>();
        out->dims = shape.i;
        const auto n = static_cast<size_t>(checked_fold_numel(idx, out->dims));
        ConstPtr value;
        if (const auto* t = typed_attr(idx, "value", onnx::AttributeProto::TENSOR))
            value = read_tensor(t->t(), label(idx) + " value");
        if (value && value->size() != 1) fail_node(idx, "value must hold one element");
        out->is_float = !value || value->is_float;
        if (out->is_float)
            out->f.assign(n, value ? value->f[0] : 0.0f);
        else
            out->i.assign(n, value->i[0]);
        return out;
    }

    // Expand(x, shape), Equal(a, b), Where(cond, a, b) on constants.
    ConstPtr fold_broadcast(int idx) {
        const std::string& op = op_of(idx);
        auto out = std::make_shared<Const>();
        if (op == "Expand") {
            const Const& x = cst(idx, 0, "input");
            const Const& shape = cst(idx, 1, "shape");
            if (shape.is_float) fail_node(idx, "the shape must be integers");
            out->dims = broadcast_dims(idx, x.dims, shape.i);
            const auto n = static_cast<size_t>(checked_fold_numel(idx, out->dims));
            out->is_float = x.is_float;
            for (size_t k = 0; k < n; ++k) {
                const size_t at = broadcast_index(k, out->dims, x.dims);
                out->push_element(x, at);
            }
            return out;
        }
        if (op == "Equal") {
            const Const& a = cst(idx, 0, "A");
            const Const& b = cst(idx, 1, "B");
            out->dims = broadcast_dims(idx, a.dims, b.dims);
            const auto n = static_cast<size_t>(checked_fold_numel(idx, out->dims));
            out->is_float = false;
            for (size_t k = 0; k < n; ++k)
                out->i.push_back(a.at(broadcast_index(k, out->dims, a.dims)) ==
                                 b.at(broadcast_index(k, out->dims, b.dims)));
            return out;
        }
        const Const& c = cst(idx, 0, "condition");
        const Const& a = cst(idx, 1, "X");
        const Const& b = cst(idx, 2, "Y");
        out->dims = broadcast_dims(idx, broadcast_dims(idx, c.dims, a.dims), b.dims);
        const auto n = static_cast<size_t>(checked_fold_numel(idx, out->dims));
        out->is_float = a.is_float || b.is_float;
        for (size_t k = 0; k < n; ++k) {
            const bool pick_a = c.at(broadcast_index(k, out->dims, c.dims)) != 0;
            const Const& src = pick_a ? a : b;
            out->push(src.at(broadcast_index(k, out->dims, src.dims)));
        }
        return out;
    }

    // Range(start, limit, delta): scalars, as numpy's arange.
    ConstPtr fold_range(int idx) {
        const Const& s = cst(idx, 0, "start");
        const Const& l = cst(idx, 1, "limit");
        const Const& d = cst(idx, 2, "delta");
        if (!s.scalar_like() || !l.scalar_like() || !d.scalar_like())
            fail_node(idx, "start, limit and delta must be scalars");
        const double start = s.at(0), limit = l.at(0), delta = d.at(0);
        if (delta == 0) fail_node(idx, "delta is 0");
        const double count = std::max(0.0, std::ceil((limit - start) / delta));
        if (!(count < 1e15))  // NaN or more elements than any tensor may hold
            fail_node(idx, "Range(" + std::to_string(start) + ", " + std::to_string(limit) + ", " +
                               std::to_string(delta) + ") has too many elements");
        auto out = std::make_shared<Const>();
        out->is_float = s.is_float || l.is_float || d.is_float;
        out->dims = {static_cast<int64_t>(count)};
        (void)checked_fold_numel(idx, out->dims);
        for (int64_t k = 0; k < out->dims[0]; ++k)
            out->push(start + static_cast<double>(k) * delta);
        return out;
    }

    // ScatterND(data, indices [..., k], updates) without reduction: a copy of data with the
    // slices that indices name overwritten by updates, in order (a later write wins, as in the
    // ONNX reference).
    ConstPtr fold_scatter_nd(int idx) {
        const Const& data = cst(idx, 0, "data");
        const Const& ind = cst(idx, 1, "indices");
        const Const& upd = cst(idx, 2, "updates");
        if (ind.is_float) fail_node(idx, "indices must be integers");
        const std::string reduction = attr_string(idx, "reduction", "none");
        if (reduction != "none")
            fail_node(idx, "reduction '" + reduction + "' is not supported on constants");
        if (ind.dims.empty()) fail_node(idx, "indices must have at least one axis");
        const auto k = static_cast<size_t>(ind.dims.back());
        if (k == 0 || k > data.dims.size())
            fail_node(
                idx, "indices " + dims_text(ind.dims) + " do not fit data " + dims_text(data.dims));
        size_t slice = 1;
        for (size_t a = k; a < data.dims.size(); ++a) slice *= static_cast<size_t>(data.dims[a]);
        const size_t writes = ind.size() / k;
        if (upd.size() != writes * slice)
            fail_node(idx, "updates " + dims_text(upd.dims) + " do not match indices " +
                               dims_text(ind.dims) + " into data " + dims_text(data.dims));
        auto out = std::make_shared<Const>(data);
        out->initializer.clear();
        out->transposed = false;
        if (upd.is_float != data.is_float)
            fail_node(idx, "updates and data must have one element type");
        for (size_t w = 0; w < writes; ++w) {
            size_t at = 0;
            for (size_t a = 0; a < k; ++a) {
                const int64_t n = data.dims[a];
                int64_t v = ind.i[w * k + a];
                if (v < 0) v += n;
                if (v < 0 || v >= n)
                    fail_node(idx, "index " + std::to_string(ind.i[w * k + a]) +
                                       " is out of range for axis " + std::to_string(a) +
                                       " of data " + dims_text(data.dims));
                at = at * static_cast<size_t>(n) + static_cast<size_t>(v);
            }
            for (size_t j = 0; j < slice; ++j) {
                if (data.is_float)
                    out->f[at * slice + j] = upd.f[w * slice + j];
                else
                    out->i[at * slice + j] = upd.i[w * slice + j];
            }
        }
        return out;
    }

    // Slice of a constant (a causal mask buffer cut to the sequence length; F.pad's pads reversed
    // by a step of -1), any non-zero step, clamped as ONNX clamps.
    ConstPtr fold_slice(int idx) {
        const Const& x = cst(idx, 0, "data");
        if (opset_ < 10) fail_node(idx, "constant Slice is folded from opset 10 on");
        auto ints = [&](int k, const char* what) {
            const Const& c = cst(idx, k, what);
            if (c.is_float) fail_node(idx, std::string(what) + " must be integers");
            return c.i;
        };
        const auto starts = ints(1, "starts"), ends = ints(2, "ends");
        std::vector<int64_t> axes, steps;
        if (has_input(idx, 3)) axes = ints(3, "axes");
        if (has_input(idx, 4)) steps = ints(4, "steps");
        if (axes.empty())
            for (size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
        if (starts.size() != ends.size() || axes.size() != starts.size() ||
            (!steps.empty() && steps.size() != starts.size()))
            fail_node(idx, "starts, ends, axes and steps must have the same length");
        const auto rank = static_cast<int64_t>(x.dims.size());
        // One [begin, step] pair per axis (separate vectors of equal size draw a false
        // -Wfree-nonheap-object from GCC 12 here).
        std::vector<std::pair<int64_t, int64_t> > begin_step(x.dims.size(), {0, 1});
        Dims out_dims = x.dims;
        for (size_t k = 0; k < axes.size(); ++k) {
            const int64_t a = axis_in(idx, axes[k], rank);
            const int64_t n = x.dims[static_cast<size_t>(a)];
            const int64_t st = steps.empty() ? 1 : steps[k];
            if (st == 0) fail_node(idx, "constant Slice with step 0");
            // Ends clamp to [0, n] going forward and to [-1, n - 1] going backward; starts to
            // [0, n] and [0, n - 1].
            const int64_t lo = st > 0 ? 0 : -1, hi = st > 0 ? n : n - 1;
            auto clamp = [&](int64_t v) {
                if (v < 0) v = v < -n ? (st > 0 ? 0 : -1) : v + n;
                return std::clamp(v, lo, hi);
            };
            const int64_t b = std::clamp(clamp(starts[k]), int64_t{0}, std::max<int64_t>(hi, 0)),
                          e = clamp(ends[k]);
            begin_step[static_cast<size_t>(a)] = {b, st};
            int64_t count = 0;
            if (st > 0 && e > b) count = (e - b + st - 1) / st;
            if (st < 0 && b > e) count = (b - e + (-st) - 1) / (-st);
            out_dims[static_cast<size_t>(a)] = count;
        }
        auto out = std::make_shared<Const>();
        out->dims = out_dims;
        out->is_float = x.is_float;
        const auto n = static_cast<size_t>(checked_fold_numel(idx, out_dims));
        for (size_t k = 0; k < n; ++k) {
            size_t rest = k, at = 0, stride = 1;
            for (size_t a = out_dims.size(); a-- > 0;) {
                const auto pos = static_cast<int64_t>(rest % static_cast<size_t>(out_dims[a]));
                rest /= static_cast<size_t>(out_dims[a]);
                at +=
                    static_cast<size_t>(begin_step[a].first + pos * begin_step[a].second) * stride;
                stride *= static_cast<size_t>(x.dims[a]);
            }
            out->push_element(x, at);
        }
        return out;
    }

    // ONNX Reshape's target: 0 copies the input's dimension (unless allowzero), one -1 is
    // inferred.
    Dims reshape_dims(int idx, const Dims& in, int64_t numel) const {
        const Const& s = cst(idx, 1, "shape");
        if (s.is_float || s.dims.size() != 1)
            fail_node(idx, "the shape must be a 1-D int64 tensor");
        const bool allowzero = attr_int(idx, "allowzero", 0) != 0;
        Dims d = s.i;
        int wildcard = -1;
        int64_t known = 1;
        for (size_t k = 0; k < d.size(); ++k) {
            if (d[k] == 0 && !allowzero) {
                if (k >= in.size())
                    fail_node(idx, "shape " + dims_text(s.i) + " copies axis " + std::to_string(k) +
                                       " that the input " + dims_text(in) + " lacks");
                d[k] = in[k];
            }
            if (d[k] == -1) {
                if (wildcard >= 0) fail_node(idx, "shape " + dims_text(s.i) + " has two -1");
                wildcard = static_cast<int>(k);
                continue;
            }
            if (d[k] <= 0)
                fail_node(idx, "shape " + dims_text(s.i) + " has a dimension that is not positive");
            if (known > kNumelLimit / d[k])
                fail_node(idx, "shape " + dims_text(s.i) + " overflows 2^62 elements");
            known *= d[k];
        }
        if (wildcard >= 0) {
            if (known == 0 || numel % known != 0)
                fail_node(idx, "cannot reshape " + std::to_string(numel) + " elements to " +
                                   dims_text(s.i));
            d[static_cast<size_t>(wildcard)] = numel / known;
        } else if (known != numel) {
            fail_node(idx, "cannot reshape " + dims_text(in) + " (" + std::to_string(numel) +
                               " elements) to " + dims_text(d));
        }
        return d;
    }

    // --- ops -------------------------------------------------------------------------------------

    void import_node(int idx) {
        const std::string& op = op_of(idx);
        if (op == "Shape" && has_input(idx, 0) && !entry(idx, 0).c) {
            // The shapes of our values are static: Shape is a constant.
            const Shape& s = shape_of(entry(idx, 0).value);
            const auto rank = static_cast<int64_t>(s.rank());
            int64_t start = attr_int(idx, "start", 0), end = attr_int(idx, "end", rank);
            start = std::clamp(start < 0 ? start + rank : start, int64_t{0}, rank);
            end = std::clamp(end < 0 ? end + rank : end, int64_t{0}, rank);
            auto c = std::make_shared<Const>();
            c->is_float = false;
            for (int64_t k = start; k < end; ++k) c->i.push_back(s.dims[static_cast<size_t>(k)]);
            c->dims = {static_cast<int64_t>(c->i.size())};
            define(idx, 0, Entry{kNoId, std::move(c)});
            return;
        }
        if (foldable(op) && all_inputs_const(idx) && !table_gather(idx) && !slices_parameter(idx)) {
            define(idx, 0, Entry{kNoId, fold(idx)});
            return;
        }
        if (op == "Gather") return gather(idx);
        if (op == "Expand" && table_gather(idx)) return expand_parameter(idx);
        if (op == "Slice") return slice(idx);
        if (op == "Split") return split(idx);
        if (op == "Where") return where_mask(idx);
        if (op == "Identity") return define(idx, 0, Entry{act(idx, 0), nullptr});
        if (op == "Relu") return unary(idx, OpKind::Relu);
        if (op == "Exp") return unary(idx, OpKind::Exp);
        if (op == "ReduceL2") return l2_normalize(idx);
        if (op == "Tanh") return unary(idx, OpKind::Tanh);
        if (op == "Sigmoid") return unary(idx, OpKind::Sigmoid);
        if (op == "Gelu") {
            const std::string approx = attr_string(idx, "approximate", "none");
            if (approx == "tanh") return unary(idx, OpKind::GeluTanh);
            if (approx != "none")
                fail_node(idx, "approximate='" + approx +
                                   "' is not supported; Gelu's approximate is 'none' or 'tanh'");
            return unary(idx, OpKind::Gelu);
        }
        if (op == "Softmax") return softmax(idx);
        if (op == "Gemm") return gemm(idx);
        if (op == "MatMul") return matmul(idx);
        if (op == "Einsum") return einsum(idx);
        if (op == "Conv") return conv(idx);
        if (op == "MaxPool" || op == "AveragePool") return pool(idx);
        if (op == "GlobalAveragePool") {
            const ValueId x = act(idx, 0);
            if (shape_of(x).rank() != 4)
                fail_node(idx, "input " + format_dims(shape_of(x)) + " must be rank 4 [N,C,H,W]");
            return define(idx, 0,
                          {add(idx, node_base(idx), OpKind::AvgPool2d, {x}, {{"global", 1}}), {}});
        }
        if (op == "BatchNormalization") return batchnorm(idx);
        if (op == "LayerNormalization") return layernorm(idx);
        if (op == "Concat") return concat(idx);
        if (op == "Flatten") {
            const ValueId x = act(idx, 0);
            return define(idx, 0,
                          {add(idx, node_base(idx), OpKind::Flatten, {x},
                               {{"axis", attr_int(idx, "axis", 1)}}),
                           {}});
        }
        if (op == "Reshape") return reshape(idx);
        if (op == "Unsqueeze" || op == "Squeeze") return squeeze(idx);
        if (op == "Cast") return cast(idx);
        if (op == "Transpose") return transpose(idx);
        if (op == "Resize" || op == "Upsample") return resize(idx);
        if (op == "Dropout") return dropout(idx);
        if (op == "Pad") return pad(idx);
        if ((op == "Div" || op == "Mul") && try_gelu(idx)) return;
        if (op == "ReduceMean" && try_layernorm(idx)) return;
        // broadcasting binary ops, activations, ReduceMean.
        if ((op == "Mul" || op == "Pow") && try_gelu_tanh(idx)) return;
        if (op == "Add") return binary_op(idx, OpKind::Add);
        if (op == "Sub") return binary_op(idx, OpKind::Sub);
        if (op == "Mul") return binary_op(idx, OpKind::Mul);
        if (op == "Div") return binary_op(idx, OpKind::Div);
        if (op == "ReduceMean") return reduce_mean(idx);
        if (op == "Reciprocal")
            return define(idx, 0,
                          {add(idx, node_base(idx), OpKind::Div, {act(idx, 0)},
                               {{"scalar", 1.0}, {"reversed", int64_t{1}}}),
                           {}});
        if (op == "Clip") return clip(idx);
        if (op == "HardSigmoid") return hard_sigmoid(idx);
        if (op == "HardSwish") return unary(idx, OpKind::HardSwish);
        fail_node(idx, unsupported_form(op));
    }

    static std::string unsupported_form(const std::string& op) {
        if (op == "Pow" || op == "Sqrt")
            return op +
                   " on computed tensors is imported only inside the LayerNorm pattern "
                   "(ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add over the last axis) and "
                   "the tanh-GELU pattern (x·0.5·(1+tanh(√(2/π)·(x+0.044715·x³))))";
        if (op == "Erf") return "Erf is imported only inside the exact GELU pattern";
        return op + " in this form is not supported";
    }

    void unary(int idx, OpKind kind) {
        define(idx, 0, {add(idx, node_base(idx), kind, {act(idx, 0)}, {}), {}});
    }

    void softmax(int idx) {
        const ValueId x = act(idx, 0);
        const int64_t rank = shape_of(x).rank();
        const int64_t axis = axis_in(idx, attr_int(idx, "axis", opset_ >= 13 ? -1 : 1), rank);
        if (axis != rank - 1)
            fail_node(idx, "softmax over axis " + std::to_string(axis) + " of " +
                               format_dims(shape_of(x)) +
                               " is not supported; RematLab's softmax is over the last axis "
                               "(transpose first)");
        define(idx, 0, {add(idx, node_base(idx), OpKind::Softmax, {x}, {}), {}});
    }

    // A bias [out] (or [1, …, 1, out]) added right after node `idx`'s output, or null. Marks
    // the Add done and returns it through `add_node`.
    const Const* bias_after(int idx, int64_t out, int& add_node) {
        add_node = sole_consumer(out_name(idx));
        if (add_node < 0 || op_of(add_node) != "Add") return nullptr;
        const Const* b = other_const(add_node, out_name(idx));
        if (!b || !b->is_float || static_cast<int64_t>(b->size()) != out) return nullptr;
        for (size_t k = 0; k + 1 < b->dims.size(); ++k)
            if (b->dims[k] != 1) return nullptr;
        if (b->dims.empty() && out != 1) return nullptr;
        return b;
    }

    void linear(int idx, ValueId x, const Const& w, bool w_is_out_in, const Const* bias,
                const std::string& base, int fused_add) {
        const int64_t out = w_is_out_in ? w.dims[0] : w.dims[1];
        const int64_t in = w_is_out_in ? w.dims[1] : w.dims[0];
        std::vector<ParamSource> params;
        params.push_back(w_is_out_in
                             ? param_from(idx, w)
                             : param_from(idx, w, transpose2d(w.f, w.dims[0], w.dims[1]), true));
        if (bias) params.push_back(param_from(idx, *bias));
        Attrs attrs{{"out_features", out}, {"in_features", in}};
        if (!bias) attrs.set("bias", int64_t{0});
        const ValueId y = add(idx, base, OpKind::Linear, {x}, std::move(attrs), params);
        if (fused_add >= 0) {
            done_[static_cast<size_t>(fused_add)] = true;
            define(fused_add, 0, {y, {}});
        } else {
            define(idx, 0, {y, {}});
        }
    }

    void gemm(int idx) {
        const ValueId x = act(idx, 0);
        const Const& w = cst(idx, 1, "B, the weight");
        if (attr_int(idx, "transA", 0) != 0)
            fail_node(idx, "transA=1 is not supported (the input must be [rows, in])");
        const double alpha = attr_float(idx, "alpha", 1), beta = attr_float(idx, "beta", 1);
        if (alpha != 1.0 || (has_input(idx, 2) && beta != 1.0))
            fail_node(idx, "alpha and beta other than 1 are not supported");
        if (shape_of(x).rank() != 2)
            fail_node(idx, "input A " + format_dims(shape_of(x)) + " must be rank 2");
        if (w.dims.size() != 2) fail_node(idx, "B " + dims_text(w.dims) + " must be rank 2");
        const bool trans_b = attr_int(idx, "transB", 0) != 0;
        const int64_t out = trans_b ? w.dims[0] : w.dims[1];
        const Const* bias = nullptr;
        int fused = -1;
        if (has_input(idx, 2)) {
            const Const& c = cst(idx, 2, "C, the bias");
            bool ok = c.is_float && static_cast<int64_t>(c.size()) == out;
            for (size_t k = 0; k + 1 < c.dims.size(); ++k) ok = ok && c.dims[k] == 1;
            if (!ok)
                fail_node(idx, "C " + dims_text(c.dims) + " must be a bias of " +
                                   std::to_string(out) + " values");
            bias = &c;
        } else {
            bias = bias_after(idx, out, fused);
        }
        linear(idx, x, w, trans_b, bias, module_or_name(idx), bias && fused >= 0 ? fused : -1);
    }

    std::string module_or_name(int idx) const {
        const std::string m = module_of(gp_.node(idx).name());
        return m.empty() ? node_base(idx) : m;
    }

    void matmul(int idx) {
        if (is_const(idx, 1)) {
            const ValueId x = act(idx, 0);
            const Const& w = cst(idx, 1, "the weight");
            if (w.dims.size() != 2)
                fail_node(idx, "a constant B " + dims_text(w.dims) + " must be rank 2 [in, out]");
            if (shape_of(x).rank() < 1 || shape_of(x)[-1] != w.dims[0])
                fail_node(idx, "A " + format_dims(shape_of(x)) + " does not match B " +
                                   dims_text(w.dims));
            int fused = -1;
            const Const* bias = bias_after(idx, w.dims[1], fused);
            // Transpose(W) of an initializer W [out, in] (PyTorch's nn.Linear): W itself, the
            // initializer's own values where they are at hand (transposing the fold's transpose
            // back took a sixth of ViT-B/32's import).
            if (w.transposed) {
                const auto it = env_.find(w.initializer);
                if (it != env_.end() && it->second.c && !it->second.c->transposed &&
                    it->second.c->dims == Dims{w.dims[1], w.dims[0]})
                    return linear(idx, x, *it->second.c, true, bias, module_or_name(idx),
                                  bias ? fused : -1);
                Const orig = w;
                orig.dims = {w.dims[1], w.dims[0]};
                orig.f = transpose2d(w.f, w.dims[0], w.dims[1]);
                orig.transposed = false;
                return linear(idx, x, orig, true, bias, module_or_name(idx), bias ? fused : -1);
            }
            return linear(idx, x, w, false, bias, module_or_name(idx), bias ? fused : -1);
        }
        const ValueId a = act(idx, 0), b = act(idx, 1);
        const Shape sa = shape_of(a), sb = shape_of(b);
        if (sa.rank() != sb.rank() || sa.rank() < 2)
            fail_node(idx, "MatMul of " + format_dims(sa) + " and " + format_dims(sb) +
                               " is not supported: both must have the same rank, at least 2 "
                               "(no broadcasting)");
        int64_t batch = 1;
        for (int k = 0; k + 2 < sa.rank(); ++k) {
            if (sa.dims[static_cast<size_t>(k)] != sb.dims[static_cast<size_t>(k)])
                fail_node(idx, "MatMul of " + format_dims(sa) + " and " + format_dims(sb) +
                                   ": batch dimensions must match (no broadcasting)");
            batch *= sa.dims[static_cast<size_t>(k)];
        }
        // A scale right after it (attention's 1/√d) becomes matmul's alpha.
        double alpha = 1;
        std::string result = out_name(idx);
        int scale = sole_consumer(result);
        if (scale >= 0 && (op_of(scale) == "Mul" || op_of(scale) == "Div")) {
            const Const* s = other_const(scale, result);
            const bool rhs = in_name(scale, 0) == result;
            if (s && s->scalar_like() && (op_of(scale) == "Mul" || rhs) && s->at(0) != 0) {
                alpha = op_of(scale) == "Mul" ? s->at(0) : 1.0 / s->at(0);
                done_[static_cast<size_t>(scale)] = true;
            } else {
                scale = -1;
            }
        } else {
            scale = -1;
        }
        const std::string base = node_base(idx);
        auto to3 = [&](ValueId v, const Shape& s, const char* tag) {
            if (s.rank() == 3) return v;
            return add(idx, base + tag, OpKind::Reshape, {v},
                       {{"shape", std::vector<int64_t>{batch, s[-2], s[-1]}}});
        };
        const ValueId a3 = to3(a, sa, "/a3"), b3 = to3(b, sb, "/b3");
        Attrs attrs;
        if (alpha != 1) attrs.set("alpha", alpha);
        ValueId y = add(idx, base, OpKind::MatMul, {a3, b3}, std::move(attrs));
        if (sa.rank() != 3) {
            Dims d(sa.dims.begin(), sa.dims.end() - 1);
            d.push_back(sb[-1]);
            y = add(idx, base + "/out", OpKind::Reshape, {y}, {{"shape", d}});
        }
        define(scale >= 0 ? scale : idx, 0, {y, {}});
    }

    // Einsum of two computed tensors that is a batched matrix product: "…ik,…jk->…ij" (A·Bᵀ) or
    // "…ij,…jk->…ik" (A·B), the leading letters the same batch axes in both operands and the
    // output (MaxViT's "B G H I D, B G H J D -> B G H I J" and its "… I J, … J D -> … I D").
    void einsum(int idx) {
        std::string eq;
        for (char ch : attr_string(idx, "equation", ""))
            if (ch != ' ') eq += ch;
        const size_t arrow = eq.find("->"), comma = eq.find(',');
        const std::string why =
            "equation '" + attr_string(idx, "equation", "") +
            "' is not supported; RematLab imports an Einsum of two tensors that is a batched "
            "matrix product, '…ik,…jk->…ij' or '…ij,…jk->…ik'";
        if (num_inputs(idx) != 2 || arrow == std::string::npos || comma == std::string::npos ||
            comma > arrow || eq.find('.') != std::string::npos)
            fail_node(idx, why);
        const std::string ta = eq.substr(0, comma), tb = eq.substr(comma + 1, arrow - comma - 1),
                          to = eq.substr(arrow + 2);
        const ValueId a = act(idx, 0), b = act(idx, 1);
        const Shape sa = shape_of(a), sb = shape_of(b);
        const size_t r = ta.size();
        if (r < 2 || tb.size() != r || to.size() != r || static_cast<size_t>(sa.rank()) != r ||
            static_cast<size_t>(sb.rank()) != r || ta.substr(0, r - 2) != tb.substr(0, r - 2) ||
            ta.substr(0, r - 2) != to.substr(0, r - 2))
            fail_node(idx, why);
        const std::string batch_letters = ta.substr(0, r - 2);
        for (size_t k = 0; k < r; ++k)
            if (ta.find(ta[k]) != k || tb.find(tb[k]) != k || to.find(to[k]) != k)
                fail_node(idx, why);
        const char i = ta[r - 2], ka = ta[r - 1], b0 = tb[r - 2], b1 = tb[r - 1];
        bool transpose_b = false;
        if (ka == b1 && to.substr(r - 2) == std::string{i, b0} && i != b0 && ka != i) {
            transpose_b = true;  // A [.., I, K] · B [.., J, K]ᵀ
        } else if (ka == b0 && to.substr(r - 2) == std::string{i, b1} && i != b1 && ka != i) {
            transpose_b = false;  // A [.., I, K] · B [.., K, J]
        } else {
            fail_node(idx, why);
        }
        for (char ch : batch_letters)
            if (ch == i || ch == ka || ch == b0 || ch == b1) fail_node(idx, why);
        int64_t batch = 1;
        for (size_t k = 0; k + 2 < r; ++k) {
            if (sa.dims[k] != sb.dims[k])
                fail_node(idx, "operands " + format_dims(sa) + " and " + format_dims(sb) +
                                   " differ in batch axis " + std::to_string(k) +
                                   " (no broadcasting)");
            batch *= sa.dims[k];
        }
        if (sa[-1] != (transpose_b ? sb[-1] : sb[-2]))
            fail_node(idx, "operands " + format_dims(sa) + " and " + format_dims(sb) +
                               " do not agree on the summed axis '" + std::string(1, ka) + "'");
        const std::string base = node_base(idx);
        auto to3 = [&](ValueId v, const Shape& s, const char* tag) {
            if (s.rank() == 3) return v;
            return add(idx, base + tag, OpKind::Reshape, {v},
                       {{"shape", std::vector<int64_t>{batch, s[-2], s[-1]}}});
        };
        const ValueId a3 = to3(a, sa, "/a3"), b3 = to3(b, sb, "/b3");
        Attrs attrs;
        if (transpose_b) attrs.set("transpose_b", int64_t{1});
        ValueId y = add(idx, base, OpKind::MatMul, {a3, b3}, std::move(attrs));
        if (r != 3) {
            Dims d(sa.dims.begin(), sa.dims.end() - 1);
            d.push_back(transpose_b ? sb[-2] : sb[-1]);
            y = add(idx, base + "/out", OpKind::Reshape, {y}, {{"shape", d}});
        }
        define(idx, 0, {y, {}});
    }

    // Window attributes shared by Conv and the pools: kernel, stride, padding, dilation.
    void window_attrs(int idx, const Shape& x, std::vector<int64_t> kernel, Attrs& attrs) {
        if (kernel.size() != 2)
            fail_node(idx, "kernel_shape " + dims_text(kernel) + " must have 2 entries (2-D)");
        auto pair = [&](const char* key) {
            auto v = attr_ints(idx, key).value_or(std::vector<int64_t>{1, 1});
            if (v.size() != 2)
                fail_node(idx, std::string(key) + " " + dims_text(v) + " must have 2 entries");
            return v;
        };
        const auto strides = pair("strides"), dilations = pair("dilations");
        auto pads = attr_ints(idx, "pads").value_or(std::vector<int64_t>{0, 0, 0, 0});
        if (pads.size() != 4)
            fail_node(idx,
                      "pads " + dims_text(pads) + " must have 4 entries [top,left,bottom,right]");
        // Bounded before any arithmetic on them (no overflow below or in the window geometry).
        constexpr int64_t kMaxWindow = int64_t{1} << 31;
        auto bounded = [&](const char* key, const std::vector<int64_t>& v, int64_t min) {
            for (int64_t x : v)
                if (x < min || x > kMaxWindow)
                    fail_node(idx, std::string(key) + " " + dims_text(v) + " must lie in [" +
                                       std::to_string(min) + ", 2^31]");
        };
        bounded("kernel_shape", kernel, 1);
        bounded("strides", strides, 1);
        bounded("dilations", dilations, 1);
        bounded("pads", pads, 0);
        const std::string auto_pad = attr_string(idx, "auto_pad", "NOTSET");
        if (auto_pad == "VALID") {
            pads = {0, 0, 0, 0};
        } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
            for (int a = 0; a < 2; ++a) {
                const int64_t in = x[2 + a], s = strides[static_cast<size_t>(a)];
                if (s <= 0) fail_node(idx, "strides must be positive");
                const int64_t out = (in + s - 1) / s;
                const int64_t extent =
                    dilations[static_cast<size_t>(a)] * (kernel[static_cast<size_t>(a)] - 1) + 1;
                const int64_t total = std::max<int64_t>((out - 1) * s + extent - in, 0);
                const int64_t small = total / 2, big = total - small;
                pads[static_cast<size_t>(a)] = auto_pad == "SAME_UPPER" ? small : big;
                pads[static_cast<size_t>(a + 2)] = auto_pad == "SAME_UPPER" ? big : small;
            }
        } else if (auto_pad != "NOTSET") {
            fail_node(idx, "auto_pad '" + auto_pad +
                               "' is not one of NOTSET, VALID, SAME_UPPER, "
                               "SAME_LOWER");
        }
        attrs.set("kernel", kernel);
        attrs.set("stride", strides);
        attrs.set("padding", pads);
        attrs.set("dilation", dilations);
    }

    void conv(int idx) {
        const ValueId x = act(idx, 0);
        const Shape xs = shape_of(x);
        if (xs.rank() != 4)
            fail_node(idx, "input " + format_dims(xs) + " must be rank 4 [N,C,H,W] (2-D conv)");
        const Const& w = cst(idx, 1, "W, the weight");
        if (w.dims.size() != 4)
            fail_node(idx, "W " + dims_text(w.dims) + " must be rank 4 [out, in/group, kh, kw]");
        const int64_t group = attr_int(idx, "group", 1);
        if (group <= 0 || xs[1] % group != 0 || xs[1] / group != w.dims[1])
            fail_node(idx, "W " + dims_text(w.dims) + " with group=" + std::to_string(group) +
                               " does not fit input " + format_dims(xs));
        const std::vector<int64_t> kernel = {w.dims[2], w.dims[3]};
        if (auto ks = attr_ints(idx, "kernel_shape"); ks && *ks != kernel)
            fail_node(idx,
                      "kernel_shape " + dims_text(*ks) + " does not match W " + dims_text(w.dims));
        Attrs attrs{{"out_channels", w.dims[0]}, {"groups", group}};
        window_attrs(idx, xs, kernel, attrs);
        std::vector<ParamSource> params{param_from(idx, w)};
        if (has_input(idx, 2)) {
            const Const& b = cst(idx, 2, "B, the bias");
            if (static_cast<int64_t>(b.size()) != w.dims[0] || b.dims.size() != 1)
                fail_node(
                    idx, "B " + dims_text(b.dims) + " must be [" + std::to_string(w.dims[0]) + "]");
            params.push_back(param_from(idx, b));
        } else {
            attrs.set("bias", int64_t{0});
        }
        define(idx, 0,
               {add(idx, module_or_name(idx), OpKind::Conv2d, {x}, std::move(attrs), params), {}});
    }

    void pool(int idx) {
        const bool is_max = op_of(idx) == "MaxPool";
        const ValueId x = act(idx, 0);
        const Shape xs = shape_of(x);
        if (xs.rank() != 4)
            fail_node(idx, "input " + format_dims(xs) + " must be rank 4 [N,C,H,W] (2-D pooling)");
        const auto kernel = attr_ints(idx, "kernel_shape");
        if (!kernel) fail_node(idx, "kernel_shape is required");
        if (is_max && attr_int(idx, "storage_order", 0) != 0)
            fail_node(idx, "storage_order=1 is not supported");
        if (is_max) require_single_output(idx, "the indices");
        Attrs attrs;
        window_attrs(idx, xs, *kernel, attrs);
        const int64_t ceil = attr_int(idx, "ceil_mode", 0);
        if (ceil) attrs.set("ceil_mode", int64_t{1});
        if (!is_max && attr_int(idx, "count_include_pad", 0))
            attrs.set("count_include_pad", int64_t{1});
        define(idx, 0,
               {add(idx, node_base(idx), is_max ? OpKind::MaxPool2d : OpKind::AvgPool2d, {x},
                    std::move(attrs)),
                {}});
    }

    void batchnorm(int idx) {
        const ValueId x = act(idx, 0);
        const Const& scale = cst(idx, 1, "scale");
        const Const& bias = cst(idx, 2, "B");
        const Shape xs = shape_of(x);
        if (xs.rank() < 2) fail_node(idx, "input " + format_dims(xs) + " must have a channel axis");
        for (const Const* c : {&scale, &bias})
            if (c->dims.size() != 1 || c->dims[0] != xs[1])
                fail_node(idx, "scale and B must be [" + std::to_string(xs[1]) + "], got " +
                                   dims_text(c->dims));
        if (attr_int(idx, "spatial", 1) != 1) fail_node(idx, "spatial=0 is not supported");
        require_single_output(idx, "running statistics");
        Attrs attrs{{"eps", attr_float(idx, "epsilon", 1e-5)}};
        define(idx, 0,
               {add(idx, module_or_name(idx), OpKind::BatchNorm, {x}, std::move(attrs),
                    {param_from(idx, scale), param_from(idx, bias)}),
                {}});
    }

    void layernorm(int idx) {
        const ValueId x = act(idx, 0);
        const Shape xs = shape_of(x);
        const int64_t axis = axis_in(idx, attr_int(idx, "axis", -1), xs.rank());
        if (axis != xs.rank() - 1)
            fail_node(idx, "normalising from axis " + std::to_string(axis) +
                               " is not supported; RematLab's layernorm is over the last axis");
        require_single_output(idx, "the mean or inverse deviation");
        const int64_t d = xs[-1];
        std::vector<ParamSource> params;
        const Const& w = cst(idx, 1, "scale");
        if (static_cast<int64_t>(w.size()) != d)
            fail_node(idx, "scale " + dims_text(w.dims) + " must hold " + std::to_string(d));
        params.push_back(param_from(idx, w));
        if (has_input(idx, 2)) {
            const Const& b = cst(idx, 2, "B");
            if (static_cast<int64_t>(b.size()) != d)
                fail_node(idx, "B " + dims_text(b.dims) + " must hold " + std::to_string(d));
            params.push_back(param_from(idx, b));
        }
        define(idx, 0,
               {add(idx, module_or_name(idx), OpKind::LayerNorm, {x},
                    {{"eps", attr_float(idx, "epsilon", 1e-5)}}, params),
                {}});
    }

    void concat(int idx) {
        std::vector<ValueId> ins;
        for (int k = 0; k < num_inputs(idx); ++k) ins.push_back(act(idx, k));
        if (ins.size() == 1) return define(idx, 0, {ins[0], {}});
        define(idx, 0,
               {add(idx, node_base(idx), OpKind::Concat, ins, {{"axis", attr_int(idx, "axis", 1)}}),
                {}});
    }

    void reshape(int idx) {
        const ValueId x = act(idx, 0);
        const Shape xs = shape_of(x);
        const Dims d = reshape_dims(idx, xs.dims, xs.numel());
        if (d == xs.dims) return define(idx, 0, {x, {}});
        define(idx, 0, {add(idx, node_base(idx), OpKind::Reshape, {x}, {{"shape", d}}), {}});
    }

    // Unsqueeze/Squeeze of a computed tensor: a reshape (none when the shape stays).
    void squeeze(int idx) {
        const ValueId x = act(idx, 0);
        const Shape xs = shape_of(x);
        Dims d = xs.dims;
        const auto axes = axes_of(idx);
        const auto rank = static_cast<int64_t>(d.size());
        if (op_of(idx) == "Unsqueeze") {
            if (!axes) fail_node(idx, "Unsqueeze needs axes");
            const auto out_rank = rank + static_cast<int64_t>(axes->size());
            std::vector<int64_t> norm;
            for (int64_t ax : *axes) norm.push_back(axis_in(idx, ax, out_rank));
            std::sort(norm.begin(), norm.end());
            if (std::adjacent_find(norm.begin(), norm.end()) != norm.end())
                fail_node(idx, "axes repeat an axis");
            for (int64_t ax : norm) d.insert(d.begin() + static_cast<ptrdiff_t>(ax), 1);
        } else {
            std::vector<bool> drop(d.size(), !axes);
            if (axes) {
                for (int64_t ax : *axes) {
                    const int64_t r = axis_in(idx, ax, rank);
                    if (d[static_cast<size_t>(r)] != 1)
                        fail_node(idx, "cannot squeeze axis " + std::to_string(ax) + " of size " +
                                           std::to_string(d[static_cast<size_t>(r)]) + " of " +
                                           format_dims(xs));
                    drop[static_cast<size_t>(r)] = true;
                }
            }
            Dims kept;
            for (size_t k = 0; k < d.size(); ++k)
                if (!(drop[k] && d[k] == 1)) kept.push_back(d[k]);
            d = kept;
        }
        if (d == xs.dims) return define(idx, 0, {x, {}});
        define(idx, 0, {add(idx, node_base(idx), OpKind::Reshape, {x}, {{"shape", d}}), {}});
    }

    // Cast of a computed tensor: our values are float32, so a cast to FLOAT (or DOUBLE, computed
    // in float32 as every op is) is nothing; a cast to an integer type is refused.
    void cast(int idx) {
        const ValueId x = act(idx, 0);
        const int64_t to = attr_int(idx, "to", 0);
        if (to != onnx::TensorProto::FLOAT && to != onnx::TensorProto::DOUBLE)
            fail_node(idx, "a Cast of a computed tensor to " + dtype_text(static_cast<int>(to)) +
                               " is not supported; RematLab computes in float32 (a cast to "
                               "FLOAT is accepted)");
        if (g_.value(x).dtype != DType::F32)
            fail_node(idx, "the Cast reads '" + in_name(idx, 0) +
                               "', which holds indices; RematLab casts to float only an integer "
                               "input that is used by casts alone (an attention mask)");
        define(idx, 0, {x, {}});
    }

    void transpose(int idx) {
        const ValueId x = act(idx, 0);
        const int64_t rank = shape_of(x).rank();
        std::vector<int64_t> perm;
        if (auto p = attr_ints(idx, "perm")) {
            perm = *p;
        } else {
            for (int64_t k = rank - 1; k >= 0; --k) perm.push_back(k);
        }
        bool identity = static_cast<int64_t>(perm.size()) == rank;
        for (size_t k = 0; identity && k < perm.size(); ++k)
            identity = perm[k] == static_cast<int64_t>(k);
        if (identity) return define(idx, 0, {x, {}});
        if (rank > 4 && static_cast<int64_t>(perm.size()) == rank &&
            try_transpose_then_pick(idx, x, perm))
            return;
        if (rank > 4 && static_cast<int64_t>(perm.size()) == rank)
            return define(idx, 0, {merged_transpose(idx, x, perm), {}});
        define(idx, 0, {add(idx, node_base(idx), OpKind::Transpose, {x}, {{"perm", perm}}), {}});
    }

    // A transpose above rank 4 read only by Gathers of one constant index along its first axis
    // (Swin's qkv.reshape(B, N, 3, heads, d).permute(2, 0, 3, 1, 4), then qkv[0], qkv[1],
    // qkv[2]): each pick is a slice of the input along axis perm[0], then a transpose of the
    // other axes, one rank lower.
    bool try_transpose_then_pick(int idx, ValueId x, const std::vector<int64_t>& perm) {
        auto it = consumers_.find(out_name(idx));
        if (it == consumers_.end() || it->second.empty() || out_name(idx) == output_) return false;
        const Shape xs = shape_of(x);
        const int64_t axis = perm[0];
        if (axis < 0 || axis >= xs.rank()) return false;
        std::vector<std::pair<int, int64_t> > picks;
        for (int g : it->second) {
            if (op_of(g) != "Gather" || done_[static_cast<size_t>(g)] ||
                in_name(g, 0) != out_name(idx) || attr_int(g, "axis", 0) != 0 || !is_const(g, 1))
                return false;
            const Const& c = cst(g, 1, "indices");
            if (c.is_float || !c.dims.empty() || c.i.size() != 1) return false;
            const int64_t n = xs[static_cast<int>(axis)];
            const int64_t i = c.i[0] < 0 ? c.i[0] + n : c.i[0];
            if (i < 0 || i >= n) return false;
            picks.push_back({g, i});
        }
        std::vector<int64_t> rest;
        for (size_t k = 1; k < perm.size(); ++k)
            rest.push_back(perm[k] > axis ? perm[k] - 1 : perm[k]);
        Dims dropped;
        for (int a = 0; a < xs.rank(); ++a)
            if (a != axis) dropped.push_back(xs[a]);
        for (const auto& [g, i] : picks) {
            const std::string base = node_base(g);
            const ValueId s = add(g, base + "/pick", OpKind::Slice, {x},
                                  {{"axis", axis}, {"start", i}, {"end", i + 1}});
            ValueId v = add(g, base + "/drop", OpKind::Reshape, {s}, {{"shape", dropped}});
            bool identity = true;
            for (size_t k = 0; k < rest.size(); ++k)
                identity = identity && rest[k] == static_cast<int64_t>(k);
            if (!identity)
                v = rest.size() > 4 ? merged_transpose(g, v, rest)
                                    : add(g, base, OpKind::Transpose, {v}, {{"perm", rest}});
            done_[static_cast<size_t>(g)] = true;
            define(g, 0, {v, {}});
        }
        return true;
    }

    // A transpose above rank 4 whose axes move in runs that stay together (ShuffleNet's channel
    // shuffle: [N, g, C/g, H, W] with perm [0, 2, 1, 3, 4]): each run is merged into one axis,
    // so it is reshape → transpose (rank ≤ 4) → reshape, the same elements in the same order.
    ValueId merged_transpose(int idx, ValueId x, const std::vector<int64_t>& perm) {
        const Shape xs = shape_of(x);
        std::vector<bool> seen(perm.size(), false);
        for (int64_t p : perm) {
            if (p < 0 || p >= xs.rank() || seen[static_cast<size_t>(p)])
                fail_node(idx, "perm " + dims_text(perm) + " is not a permutation");
            seen[static_cast<size_t>(p)] = true;
        }
        // Runs of output positions reading consecutive input axes, in output order.
        std::vector<std::pair<int64_t, int64_t> > runs;  // (first input axis, length)
        for (size_t k = 0; k < perm.size(); ++k) {
            if (k > 0 && perm[k] == perm[k - 1] + 1)
                ++runs.back().second;
            else
                runs.push_back({perm[k], 1});
        }
        if (runs.size() > 4) {
            // Move one axis at a time into its place (MaxViT's window partition, perm
            // [0, 2, 4, 3, 5, 1]): each step moves at most 4 runs, the same elements in the same
            // order in the end, at the cost of a copy per step.
            std::vector<int64_t> cur(perm.size());
            for (size_t k = 0; k < cur.size(); ++k) cur[k] = static_cast<int64_t>(k);
            ValueId v = x;
            for (size_t k = 0; k < perm.size(); ++k) {
                if (cur[k] == perm[k]) continue;
                const auto j = static_cast<size_t>(
                    std::find(cur.begin() + static_cast<ptrdiff_t>(k), cur.end(), perm[k]) -
                    cur.begin());
                std::vector<int64_t> step;
                for (size_t a = 0; a < k; ++a) step.push_back(static_cast<int64_t>(a));
                step.push_back(static_cast<int64_t>(j));
                for (size_t a = k; a < j; ++a) step.push_back(static_cast<int64_t>(a));
                for (size_t a = j + 1; a < perm.size(); ++a)
                    step.push_back(static_cast<int64_t>(a));
                v = merged_transpose(idx, v, step);
                std::vector<int64_t> next;
                for (int64_t p : step) next.push_back(cur[static_cast<size_t>(p)]);
                cur = next;
            }
            return v;
        }
        std::vector<size_t> by_input(runs.size());
        for (size_t k = 0; k < runs.size(); ++k) by_input[k] = k;
        std::sort(by_input.begin(), by_input.end(),
                  [&](size_t a, size_t b) { return runs[a].first < runs[b].first; });
        Dims merged;
        std::vector<int64_t> merged_perm(runs.size());
        for (size_t j = 0; j < by_input.size(); ++j) {
            const auto& r = runs[by_input[j]];
            int64_t d = 1;
            for (int64_t a = r.first; a < r.first + r.second; ++a) d *= xs[static_cast<int>(a)];
            merged.push_back(d);
            merged_perm[by_input[j]] = static_cast<int64_t>(j);
        }
        Dims out;
        for (int64_t p : perm) out.push_back(xs[static_cast<int>(p)]);
        const std::string base = node_base(idx);
        const ValueId m = add(idx, base + "/merge", OpKind::Reshape, {x}, {{"shape", merged}});
        const ValueId t = add(idx, base, OpKind::Transpose, {m}, {{"perm", merged_perm}});
        return add(idx, base + "/split", OpKind::Reshape, {t}, {{"shape", out}});
    }

    void resize(int idx) {
        const ValueId x = act(idx, 0);
        const Shape xs = shape_of(x);
        if (xs.rank() != 4) fail_node(idx, "input " + format_dims(xs) + " must be rank 4");
        const std::string mode = attr_string(idx, "mode", "nearest");
        if (mode != "nearest")
            fail_node(idx, "mode '" + mode + "' is not supported; only nearest is");
        std::vector<double> scales;
        const bool upsample = op_of(idx) == "Upsample";
        if (upsample && opset_ < 9) {
            const std::vector<float> given = attr_floats(idx, "scales");
            scales.assign(given.begin(), given.end());
        } else {
            const int scales_input = upsample || opset_ < 11 ? 1 : 2;
            if (has_input(idx, scales_input) && cst(idx, scales_input, "scales").size() > 0) {
                const Const& s = cst(idx, scales_input, "scales");
                for (size_t k = 0; k < s.size(); ++k) scales.push_back(s.at(k));
            } else if (!upsample && has_input(idx, 3)) {
                const Const& sz = cst(idx, 3, "sizes");
                if (sz.is_float || sz.size() != 4) fail_node(idx, "sizes must be 4 integers");
                for (int k = 0; k < 4; ++k) {
                    const int64_t want = sz.i[static_cast<size_t>(k)];
                    if (want <= 0 || want % xs[k] != 0)
                        fail_node(idx, "sizes " + dims_text(sz.i) +
                                           " are not integer multiples of " + format_dims(xs));
                    scales.push_back(static_cast<double>(want / xs[k]));
                }
            }
            // Upsample and Resize-10 copy input pixel floor(x / scale).
            const bool legacy = upsample || opset_ < 11;
            const std::string coord = attr_string(idx, "coordinate_transformation_mode",
                                                  legacy ? "asymmetric" : "half_pixel");
            const std::string nearest =
                attr_string(idx, "nearest_mode", legacy ? "floor" : "round_prefer_floor");
            // With an integer scale every output pixel copies one input pixel under these modes.
            const bool ok = coord == "half_pixel" || coord == "pytorch_half_pixel" ||
                            (coord == "asymmetric" && nearest == "floor");
            if (!ok)
                fail_node(idx, "coordinate_transformation_mode '" + coord +
                                   "' with nearest_mode '" + nearest +
                                   "' is not supported (use asymmetric with floor, or "
                                   "half_pixel)");
        }
        if (scales.size() != 4 || scales[0] != 1 || scales[1] != 1)
            fail_node(idx, "scales must be [1, 1, sh, sw]");
        std::vector<int64_t> s;
        for (int k = 2; k < 4; ++k) {
            const double v = scales[static_cast<size_t>(k)];
            if (!(v >= 1 && v <= 1e6 && v == std::floor(v)))
                fail_node(idx, "scale " + std::to_string(v) +
                                   " is not supported; only integer upsampling factors are");
            s.push_back(static_cast<int64_t>(v));
        }
        define(idx, 0,
               {add(idx, node_base(idx), OpKind::UpsampleNearest2d, {x}, {{"scale", s}}), {}});
    }

    void dropout(int idx) {
        const ValueId x = act(idx, 0);
        require_single_output(idx, "the mask");
        double ratio = 0.5;
        bool training = false;
        if (opset_ >= 12) {
            auto scalar = [&](int k, const char* what) {
                const Const& c = cst(idx, k, what);
                if (c.size() != 1) fail_node(idx, std::string(what) + " must be a scalar");
                return c.at(0);
            };
            if (has_input(idx, 1)) ratio = scalar(1, "ratio");
            if (has_input(idx, 2)) training = scalar(2, "training_mode") != 0;
        } else {
            ratio = attr_float(idx, "ratio", 0.5);
        }
        if (!training || ratio == 0) return define(idx, 0, {x, {}});  // inference: identity
        if (!(ratio > 0 && ratio < 1))
            fail_node(idx, "ratio " + std::to_string(ratio) + " must be in [0, 1)");
        define(idx, 0, {add(idx, node_base(idx), OpKind::Dropout, {x}, {{"p", ratio}}), {}});
    }

    void pad(int idx) {
        const ValueId x = act(idx, 0);
        std::vector<int64_t> pads;
        if (opset_ >= 11) {
            const Const& p = cst(idx, 1, "pads");
            for (size_t k = 0; k < p.size(); ++k) pads.push_back(static_cast<int64_t>(p.at(k)));
        } else {
            pads = attr_ints(idx, "pads").value_or(std::vector<int64_t>{});
        }
        bool zero = true;
        for (int64_t p : pads) zero = zero && p == 0;
        if (zero) return define(idx, 0, {x, {}});
        const std::string mode = attr_string(idx, "mode", "constant");
        if (mode != "constant")
            fail_node(idx, "mode '" + mode +
                               "' is not supported; RematLab pads with zeros (mode 'constant')");
        double value = opset_ >= 11 ? 0.0 : attr_float(idx, "value", 0.0);
        if (opset_ >= 11 && has_input(idx, 2)) {
            const Const& v = cst(idx, 2, "constant_value");
            if (!v.scalar_like()) fail_node(idx, "constant_value must hold one value");
            value = v.at(0);
        }
        if (value != 0.0)
            fail_node(idx, "padding with " + std::to_string(value) +
                               " is not supported; RematLab pads with zeros");
        if (static_cast<int64_t>(pads.size()) != 2 * shape_of(x).rank())
            fail_node(idx, "pads " + dims_text(pads) + " must hold 2 values per axis of " +
                               format_dims(shape_of(x)));
        for (int64_t p : pads)
            if (p < 0)
                fail_node(idx, "negative padding " + dims_text(pads) +
                                   " (a crop) is not supported; RematLab pads with zeros");
        define(idx, 0, {add(idx, node_base(idx), OpKind::Pad, {x}, {{"pads", pads}}), {}});
    }

    // --- broadcasting binary ops, Clip, HardSigmoid, ReduceMean ----------------

    // Add/Sub/Mul/Div: two computed tensors (numpy broadcasting), or a computed tensor and a
    // constant, in the operands' order: an initializer becomes the op's parameter (param_shape:
    // the initializer's dims, values and name; a one-element initializer too, as a learnable
    // scalar must get its gradient), any other one-element constant the op's scalar.
    void binary_op(int idx, OpKind kind) {
        if (num_inputs(idx) != 2) fail_node(idx, "needs exactly 2 inputs");
        const bool c0 = is_const(idx, 0), c1 = is_const(idx, 1);
        if (!c0 && !c1) {
            const ValueId a = act(idx, 0), b = act(idx, 1);
            return define(idx, 0, {add(idx, node_base(idx), kind, {a, b}, {}), {}});
        }
        const int k = c0 ? 0 : 1;  // the constant operand
        const ValueId x = act(idx, 1 - k);
        const Const& c = cst(idx, k, "the constant operand");
        Attrs attrs;
        if (k == 0) attrs.set("reversed", int64_t{1});
        if (c.scalar_like() && (c.initializer.empty() || c.transposed || !c.is_float)) {
            if (static_cast<int>(c.dims.size()) > shape_of(x).rank())
                fail_node(idx, "the constant " + dims_text(c.dims) + " has more axes than " +
                                   format_dims(shape_of(x)) +
                                   ", so it would add leading axes; this form is not supported");
            attrs.set("scalar", c.at(0));
            return define(idx, 0, {add(idx, node_base(idx), kind, {x}, std::move(attrs)), {}});
        }
        if (c.initializer.empty() || c.transposed) return constant_operand(idx, kind, x, k, c);
        attrs.set("param_shape", std::vector<int64_t>(c.dims.begin(), c.dims.end()));
        const std::vector<ParamSource> params = {param_from(idx, c)};
        define(idx, 0, {add(idx, node_base(idx), kind, {x}, std::move(attrs), params), {}});
    }

    // A tensor folded from constants (Swin's shifted-window mask: 0 where a query and a key lie
    // in the same region, -100 elsewhere) is the op's constant operand: no parameter, no
    // gradient. An additive one holding -inf in every element of a row of its last axis would
    // make that row of a following softmax all -inf (NaN): refused, naming the row.
    void constant_operand(int idx, OpKind kind, ValueId x, int k, const Const& c) {
        if (!c.is_float)
            fail_node(idx, "the constant operand '" + in_name(idx, k) + "' holds integers");
        if (static_cast<int>(c.dims.size()) > shape_of(x).rank())
            fail_node(idx, "the constant " + dims_text(c.dims) + " has more axes than " +
                               format_dims(shape_of(x)) +
                               ", so it would add leading axes; this form is not supported");
        for (float v : c.f)
            if (std::isnan(v)) fail_node(idx, "the constant operand holds NaN");
        if ((kind == OpKind::Add || kind == OpKind::Sub) && !c.dims.empty()) {
            const auto cols = static_cast<size_t>(c.dims.back());
            for (size_t r = 0; cols && r < c.f.size() / cols; ++r) {
                bool all = true;
                for (size_t j = 0; all && j < cols; ++j)
                    all = std::isinf(c.f[r * cols + j]) &&
                          ((c.f[r * cols + j] < 0) == (kind == OpKind::Add));
                if (all)
                    fail_node(idx, "the constant mask '" + in_name(idx, k) + "' " +
                                       dims_text(c.dims) + " is -inf in every column of row " +
                                       std::to_string(r) +
                                       " (of its rows over the last axis): a softmax over that "
                                       "row would be all -inf (NaN); mask with a finite value "
                                       "(-1e4) or keep one position per row");
            }
        }
        std::vector<int64_t> bits(c.f.size());
        for (size_t j = 0; j < c.f.size(); ++j) {
            uint32_t u;
            std::memcpy(&u, &c.f[j], sizeof(u));
            bits[j] = u;
        }
        Attrs attrs{{"constant_shape", std::vector<int64_t>(c.dims.begin(), c.dims.end())},
                    {"constant_bits", std::move(bits)}};
        if (k == 0) attrs.set("reversed", int64_t{1});
        define(idx, 0, {add(idx, node_base(idx), kind, {x}, std::move(attrs)), {}});
    }

    // F.normalize(x, dim=-1, eps) as PyTorch exports it: ReduceL2(x, axes [-1], keepdims 1) →
    // Clip(min ε) → Expand(to x's shape) → Div(x, ·), one l2_normalize node (Swin V2's cosine
    // attention normalises its queries and keys so).
    void l2_normalize(int idx) {
        const ValueId x = act(idx, 0);
        const Shape xs = shape_of(x);
        const std::string form =
            "ReduceL2 is imported only as F.normalize over the last axis: ReduceL2(x, axes=[-1], "
            "keepdims=1) → Clip(min=ε) → Expand → Div(x, ·); ";
        const auto axes = axes_of(idx);
        if (!axes || axes->size() != 1 || xs.rank() == 0 ||
            axis_in(idx, (*axes)[0], xs.rank()) != xs.rank() - 1 ||
            attr_int(idx, "keepdims", 1) == 0)
            fail_node(idx, form + "here its axes or keepdims differ");
        const int clip = sole_consumer(out_name(idx));
        if (clip < 0 || op_of(clip) != "Clip")
            fail_node(idx, form + "here its output is not read by one Clip alone");
        double eps = 0;
        if (opset_ >= 11) {
            if (!has_input(clip, 1) || has_input(clip, 2))
                fail_node(idx, form + "here " + label(clip) + " does not clip at a minimum alone");
            const Const& m = cst(clip, 1, "min");
            if (!m.scalar_like()) fail_node(clip, "min must hold one value");
            eps = m.at(0);
        } else {
            if (!find_attr(gp_.node(clip), "min") || find_attr(gp_.node(clip), "max"))
                fail_node(idx, form + "here " + label(clip) + " does not clip at a minimum alone");
            eps = attr_float(clip, "min", 0);
        }
        if (!(eps > 0))
            fail_node(idx, form + "here ε (the Clip's minimum) is " + std::to_string(eps) +
                               "; it must be > 0");
        int expand = -1, div = sole_consumer(out_name(clip));
        if (div >= 0 && op_of(div) == "Expand") {
            expand = div;
            div = sole_consumer(out_name(expand));
        }
        const std::string& denom = out_name(expand >= 0 ? expand : clip);
        if (div < 0 || op_of(div) != "Div" || num_inputs(div) != 2 ||
            in_name(div, 0) != in_name(idx, 0) || in_name(div, 1) != denom)
            fail_node(idx, form + "here the clipped norm is not what x is divided by");
        if (expand >= 0) {
            // Expand to x's own shape: its shape input is Shape(x), or a constant equal to it.
            const auto it = producer_.find(in_name(expand, 1));
            const bool shape_of_x = it != producer_.end() && op_of(it->second) == "Shape" &&
                                    num_inputs(it->second) == 1 &&
                                    in_name(it->second, 0) == in_name(idx, 0) &&
                                    !find_attr(gp_.node(it->second), "start") &&
                                    !find_attr(gp_.node(it->second), "end");
            const bool same = is_const(expand, 1) && !cst(expand, 1, "shape").is_float &&
                              cst(expand, 1, "shape").i == xs.dims;
            if (!shape_of_x && !same)
                fail_node(idx, form + "here " + label(expand) + " does not expand to x's shape " +
                                   format_dims(xs));
            done_[static_cast<size_t>(expand)] = true;
        }
        done_[static_cast<size_t>(clip)] = true;
        done_[static_cast<size_t>(div)] = true;
        const ValueId y = add(div, module_of(node_base(idx)) + "/normalize", OpKind::L2Normalize,
                              {x}, {{"eps", eps}});
        define(div, 0, {y, {}});
    }

    void reduce_mean(int idx) {
        const ValueId x = act(idx, 0);
        Attrs attrs{{"keepdims", attr_int(idx, "keepdims", 1) != 0 ? int64_t{1} : int64_t{0}}};
        const auto axes = axes_of(idx);
        if (axes && axes->empty() && attr_int(idx, "noop_with_empty_axes", 0) != 0)
            return define(idx, 0, {x, {}});
        if (axes && !axes->empty()) attrs.set("axes", *axes);
        define(idx, 0, {add(idx, node_base(idx), OpKind::ReduceMean, {x}, std::move(attrs)), {}});
    }

    // Clip: bounds from inputs 1 and 2 (opset 11+, each optional and constant) or attributes.
    void clip(int idx) {
        const ValueId x = act(idx, 0);
        Attrs attrs;
        const char* names[2] = {"min", "max"};
        for (int k = 0; k < 2; ++k) {
            if (opset_ >= 11) {
                if (!has_input(idx, k + 1)) continue;
                const Const& c = cst(idx, k + 1, names[k]);
                if (!c.scalar_like())
                    fail_node(idx, std::string(names[k]) + " must hold one value, not " +
                                       dims_text(c.dims));
                attrs.set(names[k], c.at(0));
            } else if (find_attr(gp_.node(idx), names[k])) {
                attrs.set(names[k], attr_float(idx, names[k], 0));
            }
        }
        define(idx, 0, {add(idx, node_base(idx), OpKind::Clip, {x}, std::move(attrs)), {}});
    }

    // HardSigmoid (ONNX defaults alpha 0.2, beta 0.5); x · HardSigmoid(x) with PyTorch's
    // hardswish constants (how PyTorch exports hardswish below opset 14) becomes one hard_swish,
    // whose backward reads x alone.
    void hard_sigmoid(int idx) {
        const ValueId x = act(idx, 0);
        const double alpha = attr_float(idx, "alpha", 0.2), beta = attr_float(idx, "beta", 0.5);
        const int mul = sole_consumer(out_name(idx));
        if (near(alpha, 1.0 / 6) && near(beta, 0.5) && mul >= 0 && op_of(mul) == "Mul" &&
            num_inputs(mul) == 2) {
            const std::string& xn = in_name(idx, 0);
            const bool uses_x = (in_name(mul, 0) == xn && in_name(mul, 1) == out_name(idx)) ||
                                (in_name(mul, 1) == xn && in_name(mul, 0) == out_name(idx));
            if (uses_x) {
                done_[static_cast<size_t>(mul)] = true;
                const std::string module = module_of(gp_.node(idx).name());
                const std::string base =
                    (module == gp_.node(idx).name() ? std::string() : module) + "/HardSwish";
                return define(mul, 0, {add(idx, base, OpKind::HardSwish, {x}, {}), {}});
            }
        }
        define(
            idx, 0,
            {add(idx, node_base(idx), OpKind::HardSigmoid, {x}, {{"alpha", alpha}, {"beta", beta}}),
             {}});
    }

    // x·x·x (or Pow(x, 3)) → Mul 0.044715 → Add x → Mul √(2/π) → Tanh → Add 1 → Mul x → Mul 0.5:
    // gelu(approximate='tanh') as PyTorch 1.13 exports it, fused into one gelu_tanh.
    bool try_gelu_tanh(int idx) {
        if (num_inputs(idx) != 2 || is_const(idx, 0)) return false;
        const std::string& x = in_name(idx, 0);
        int cube = -1;
        std::vector<int> group;
        if (op_of(idx) == "Pow") {
            if (!scalar_operand(idx, x, 3.0) || in_name(idx, 0) != x) return false;
            cube = idx;
        } else {
            if (in_name(idx, 1) != x) return false;  // Mul(x, x)
            cube = sole_consumer(out_name(idx));
            if (cube < 0 || op_of(cube) != "Mul" || num_inputs(cube) != 2) return false;
            const bool xs = (in_name(cube, 0) == x && in_name(cube, 1) == out_name(idx)) ||
                            (in_name(cube, 1) == x && in_name(cube, 0) == out_name(idx));
            if (!xs) return false;
            group.push_back(cube);
        }
        auto next = [&](int from, const char* op, double want) {
            const int n = sole_consumer(out_name(from));
            if (n < 0 || op_of(n) != op || !scalar_operand(n, out_name(from), want)) return -1;
            group.push_back(n);
            return n;
        };
        const int kappa = next(cube, "Mul", 0.044715);
        if (kappa < 0) return false;
        const int plus_x = sole_consumer(out_name(kappa));
        if (plus_x < 0 || op_of(plus_x) != "Add" || num_inputs(plus_x) != 2) return false;
        if (!((in_name(plus_x, 0) == x && in_name(plus_x, 1) == out_name(kappa)) ||
              (in_name(plus_x, 1) == x && in_name(plus_x, 0) == out_name(kappa))))
            return false;
        group.push_back(plus_x);
        const int beta = next(plus_x, "Mul", std::sqrt(2.0 / 3.14159265358979323846));
        if (beta < 0) return false;
        const int tanh = sole_consumer(out_name(beta));
        if (tanh < 0 || op_of(tanh) != "Tanh") return false;
        group.push_back(tanh);
        const int one = next(tanh, "Add", 1.0);
        if (one < 0) return false;
        const int times_x = sole_consumer(out_name(one));
        if (times_x < 0 || op_of(times_x) != "Mul" || num_inputs(times_x) != 2) return false;
        if (!((in_name(times_x, 0) == x && in_name(times_x, 1) == out_name(one)) ||
              (in_name(times_x, 1) == x && in_name(times_x, 0) == out_name(one))))
            return false;
        group.push_back(times_x);
        const int half = next(times_x, "Mul", 0.5);
        if (half < 0) return false;
        for (int n : group) done_[static_cast<size_t>(n)] = true;
        const std::string& name = gp_.node(idx).name();
        const std::string module = module_of(name);
        const std::string base = (module == name ? std::string() : module) + "/Gelu";
        define(half, 0, {add(idx, base, OpKind::GeluTanh, {act(idx, 0)}, {}), {}});
        return true;
    }

    // --- indexing: Gather, Slice, Split ---------------------------------------------------------

    // A Gather from a 2-D float initializer: an embedding lookup (the table is a parameter, so
    // it is not folded even when the indices are constant). Likewise an Expand of a float
    // initializer (ViT's class token, cls.expand(B, -1, -1)): the parameter, repeated.
    bool table_gather(int idx) const {
        if (!is_const(idx, 0)) return false;
        const Const& c = *entry(idx, 0).c;
        if (op_of(idx) == "Expand") return c.is_float && !c.initializer.empty();
        if (op_of(idx) != "Gather") return false;
        return c.is_float && c.dims.size() == 2 && !c.initializer.empty();
    }

    // Expand(parameter [1, …, 1, d], shape): every row of the output is the parameter; an
    // embedding of one row with the constant index 0 at each position (its table keeps the
    // initializer's shape).
    void expand_parameter(int idx) {
        const Const& p = cst(idx, 0, "input");
        const Const& shape = cst(idx, 1, "shape");
        if (shape.is_float) fail_node(idx, "the shape must be integers");
        const Dims out = broadcast_dims(idx, p.dims, shape.i);
        bool ones = !p.dims.empty() && !out.empty() && p.dims.back() == out.back();
        for (size_t k = 0; k + 1 < p.dims.size(); ++k) ones = ones && p.dims[k] == 1;
        if (!ones || out.size() < 2)
            fail_node(idx, "Expand of the parameter '" + p.initializer + "' " + dims_text(p.dims) +
                               " is imported when it repeats one row [1, …, 1, d] (a class "
                               "token), to a shape of rank ≥ 2");
        const int64_t dim = out.back();
        Attrs attrs{{"num_embeddings", int64_t{1}},
                    {"dim", dim},
                    {"first", int64_t{0}},
                    {"period", int64_t{1}},
                    {"index_shape", Dims(out.begin(), out.end() - 1)}};
        if (p.dims.size() != 2) attrs.set("table_shape", p.dims);
        std::vector<ParamSource> params{param_from(idx, p)};
        define(
            idx, 0,
            {add(idx, module_or_name(idx), OpKind::Embedding, {}, std::move(attrs), params), {}});
    }

    void gather(int idx) {
        const int64_t axis_attr = attr_int(idx, "axis", 0);
        if (table_gather(idx)) return embedding(idx, axis_attr);
        if (is_const(idx, 0))
            fail_node(idx,
                      "Gather from a constant is imported only as an embedding lookup, from a "
                      "2-D float initializer [rows, dim]");
        const ValueId x = act(idx, 0);
        const Shape xs = shape_of(x);
        const int64_t axis = axis_in(idx, axis_attr, xs.rank());
        const Const& ind = cst(idx, 1, "indices");
        if (ind.is_float) fail_node(idx, "indices must be integers");
        const int64_t n = xs[static_cast<int>(axis)];
        std::vector<int64_t> k;
        for (int64_t v : ind.i) {
            const int64_t r = v < 0 ? v + n : v;
            if (r < 0 || r >= n)
                fail_node(idx, "index " + std::to_string(v) + " is out of range for axis " +
                                   std::to_string(axis) + " of '" + in_name(idx, 0) + "' " +
                                   format_dims(xs));
            k.push_back(r);
        }
        bool contiguous = !k.empty() && ind.dims.size() <= 1;
        for (size_t j = 1; j < k.size(); ++j) contiguous = contiguous && k[j] == k[0] + int64_t(j);
        const std::string base = node_base(idx);
        if (!contiguous) {
            // Any constant indices along axis 0 (Swin V2: its position-bias MLP's output
            // indexed by relative_position_index).
            if (axis != 0)
                fail_node(idx,
                          "Gather on a computed tensor is imported along axis 0 (any constant "
                          "indices), or for one index (x[:, 0]) or a contiguous 1-D range "
                          "of indices along other axes; here it gathers axis " +
                              std::to_string(axis) + " of " + format_dims(xs) +
                              ": transpose that axis to the front first");
            return define(
                idx, 0,
                {add(idx, base, OpKind::Gather, {x}, {{"indices", k}, {"index_shape", ind.dims}}),
                 {}});
        }
        ValueId y = xs[static_cast<int>(axis)] == static_cast<int64_t>(k.size())
                        ? x
                        : add(idx, base, OpKind::Slice, {x},
                              {{"axis", axis},
                               {"start", k.front()},
                               {"end", k.front() + static_cast<int64_t>(k.size())}});
        if (ind.dims.empty()) {  // a scalar index drops the axis
            Dims d;
            for (int a = 0; a < xs.rank(); ++a)
                if (a != axis) d.push_back(xs[a]);
            if (d.empty())
                fail_node(idx, "indexing a 1-D tensor down to a scalar is not supported");
            y = add(idx, base + "/squeeze", OpKind::Reshape, {y}, {{"shape", d}});
        }
        define(idx, 0, {y, {}});
    }

    void embedding(int idx, int64_t axis_attr) {
        const Const& table = cst(idx, 0, "data");
        if (axis_in(idx, axis_attr, 2) != 0)
            fail_node(idx, "an embedding lookup gathers rows of its table (axis 0), not axis " +
                               std::to_string(axis_attr));
        const int64_t rows = table.dims[0], dim = table.dims[1];
        Attrs attrs{{"num_embeddings", rows}, {"dim", dim}};
        std::vector<ValueId> ins;
        if (is_const(idx, 1)) {
            // Constant indices. Position embeddings count up: first + (k mod period), which is
            // what arange(T), arange(T)[None] and arange(T).expand(B, T) give, kept as two
            // numbers; any others (Swin's relative position index into its bias table) are kept
            // whole (attr indices).
            const Const& ind = cst(idx, 1, "indices");
            if (ind.is_float || ind.i.empty()) fail_node(idx, "indices must be integers");
            if (ind.dims.empty())
                fail_node(idx, "a single constant index into an embedding table is not supported");
            std::vector<int64_t> rows_read = ind.i;
            for (size_t k = 0; k < rows_read.size(); ++k) {
                int64_t& r = rows_read[k];
                if (r < 0) r += rows;  // numpy-style negative indices, as ONNX's Gather
                if (r < 0 || r >= rows)
                    fail_node(idx, "constant index " + std::to_string(ind.i[k]) + " at position " +
                                       std::to_string(k) + " is out of range for the " +
                                       std::to_string(rows) + " rows of '" + in_name(idx, 0) + "'");
            }
            const auto count = static_cast<int64_t>(rows_read.size());
            int64_t period = 0;
            for (int64_t p = 1; p <= count && period == 0; ++p) {
                if (count % p) continue;
                bool ok = rows_read[0] + p <= rows;
                for (int64_t k = 0; ok && k < count; ++k)
                    ok = rows_read[static_cast<size_t>(k)] == rows_read[0] + k % p;
                if (ok) period = p;
            }
            attrs.set("index_shape", ind.dims);
            if (period > 0) {
                attrs.set("first", rows_read[0]);
                attrs.set("period", period);
            } else {
                attrs.set("indices", rows_read);
            }
        } else {
            const ValueId v = act(idx, 1);
            if (g_.value(v).dtype != DType::I32)
                fail_node(idx, "indices '" + in_name(idx, 1) +
                                   "' are computed floats; RematLab reads embedding indices from "
                                   "an integer graph input");
            ins.push_back(v);
        }
        std::vector<ParamSource> params{param_from(idx, table)};
        define(
            idx, 0,
            {add(idx, module_or_name(idx), OpKind::Embedding, ins, std::move(attrs), params), {}});
    }

    // A slice [start, end) of each listed axis of a computed tensor, one slice node per axis
    // that is cut (step 1 only).
    void slice(int idx) {
        const ValueId x = act(idx, 0);
        const Shape xs = shape_of(x);
        std::vector<int64_t> starts, ends, axes, steps;
        if (opset_ >= 10) {
            auto ints = [&](int k, const char* what) {
                const Const& c = cst(idx, k, what);
                if (c.is_float) fail_node(idx, std::string(what) + " must be integers");
                return c.i;
            };
            starts = ints(1, "starts");
            ends = ints(2, "ends");
            if (has_input(idx, 3)) axes = ints(3, "axes");
            if (has_input(idx, 4)) steps = ints(4, "steps");
        } else {
            starts = attr_ints(idx, "starts").value_or(std::vector<int64_t>{});
            ends = attr_ints(idx, "ends").value_or(std::vector<int64_t>{});
            axes = attr_ints(idx, "axes").value_or(std::vector<int64_t>{});
        }
        if (axes.empty())
            for (size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
        if (starts.size() != ends.size() || axes.size() != starts.size() ||
            (!steps.empty() && steps.size() != starts.size()))
            fail_node(idx, "starts, ends, axes and steps must have the same length");
        ValueId y = x;
        for (size_t k = 0; k < axes.size(); ++k) {
            const int64_t step = steps.empty() ? 1 : steps[k];
            const int64_t axis = axis_in(idx, axes[k], xs.rank());
            const int64_t n = xs[static_cast<int>(axis)];
            if (step < 1 || (step > 1 && n % step != 0))
                fail_node(idx, "step " + std::to_string(step) + " on axis " + std::to_string(axis) +
                                   " of " + format_dims(xs) +
                                   " is not supported; RematLab slices with step 1, or a "
                                   "positive step that divides the axis");
            auto clamp = [n](int64_t v) { return std::clamp(v < 0 ? v + n : v, int64_t{0}, n); };
            const int64_t b = clamp(starts[k]), e = clamp(ends[k]);
            if (b >= e)
                fail_node(idx, "the slice [" + std::to_string(starts[k]) + ", " +
                                   std::to_string(ends[k]) + ") of axis " + std::to_string(axis) +
                                   " of " + format_dims(xs) + " is empty");
            if (b == 0 && e == n && step == 1) continue;
            std::string name = node_base(idx);
            if (k) name.append("/").append(std::to_string(k));
            if (step == 1) {
                y = add(idx, name, OpKind::Slice, {y}, {{"axis", axis}, {"start", b}, {"end", e}});
                continue;
            }
            // Every step-th element (Swin's patch merging, x[:, 0::2, 1::2]): the axis viewed as
            // [n / step, step], the phase b mod step cut from the inner axis, the range of
            // whole steps from the outer one, the inner axis dropped.
            const int64_t count = (e - b + step - 1) / step;
            const Shape ys = shape_of(y);
            Dims split = ys.dims;
            split[static_cast<size_t>(axis)] = n / step;
            split.insert(split.begin() + axis + 1, step);
            ValueId v = add(idx, name + "/steps", OpKind::Reshape, {y}, {{"shape", split}});
            v = add(idx, name + "/phase", OpKind::Slice, {v},
                    {{"axis", axis + 1}, {"start", b % step}, {"end", b % step + 1}});
            if (b / step != 0 || count != n / step)
                v = add(idx, name, OpKind::Slice, {v},
                        {{"axis", axis}, {"start", b / step}, {"end", b / step + count}});
            Dims merged = ys.dims;
            merged[static_cast<size_t>(axis)] = count;
            y = add(idx, name + "/merge", OpKind::Reshape, {v}, {{"shape", merged}});
        }
        define(idx, 0, {y, {}});
    }

    // Split along an axis into slices (the sizes from input 1, the 'split' attribute, or equal
    // parts); outputs nothing reads are not built.
    void split(int idx) {
        const ValueId x = act(idx, 0);
        const Shape xs = shape_of(x);
        const int64_t axis = axis_in(idx, attr_int(idx, "axis", 0), xs.rank());
        const int64_t n = xs[static_cast<int>(axis)];
        const int outs = gp_.node(idx).output_size();
        std::vector<int64_t> sizes;
        if (opset_ >= 13 && has_input(idx, 1)) {
            const Const& c = cst(idx, 1, "split");
            if (c.is_float) fail_node(idx, "split sizes must be integers");
            sizes = c.i;
        } else if (auto a = attr_ints(idx, "split")) {
            sizes = *a;
        } else {
            if (n % outs != 0)
                fail_node(idx, "axis " + std::to_string(axis) + " of " + format_dims(xs) +
                                   " does not split into " + std::to_string(outs) + " equal parts");
            sizes.assign(static_cast<size_t>(outs), n / outs);
        }
        int64_t total = 0;
        for (int64_t v : sizes) {
            if (v <= 0) fail_node(idx, "split sizes " + dims_text(sizes) + " must be positive");
            total += v;
        }
        if (static_cast<int>(sizes.size()) != outs || total != n)
            fail_node(idx, "split sizes " + dims_text(sizes) + " do not cut axis " +
                               std::to_string(axis) + " of " + format_dims(xs) + " into " +
                               std::to_string(outs) + " outputs");
        int64_t at = 0;
        for (int k = 0; k < outs; ++k) {
            const std::string& out = gp_.node(idx).output(k);
            const int64_t b = at;
            at += sizes[static_cast<size_t>(k)];
            if (out.empty() || (!consumers_.count(out) && out != output_)) continue;
            const ValueId y =
                outs == 1 ? x
                          : add(idx, node_base(idx) + "/" + std::to_string(k), OpKind::Slice, {x},
                                {{"axis", axis}, {"start", b}, {"end", at}});
            define(idx, k, {y, {}});
        }
    }

    // Where(mask, -inf, x) or Where(mask, x, -inf) with a constant mask: PyTorch's
    // masked_fill(mask, -inf) before a softmax. A causal mask (a tril buffer: masked where
    // column > row of the last two axes) becomes causal_mask; a mask that leaves a softmax row
    // with nothing is refused, naming it.
    void where_mask(int idx) {
        if (!is_const(idx, 0))
            fail_node(idx,
                      "Where with a computed condition is not supported; the condition must "
                      "be a constant mask");
        const bool x_first = !is_const(idx, 1) && is_const(idx, 2);
        const bool x_second = is_const(idx, 1) && !is_const(idx, 2);
        if (!x_first && !x_second)
            fail_node(idx,
                      "Where is imported as masked_fill: one branch computed, the other a "
                      "constant -inf");
        const Const& cond = cst(idx, 0, "condition");
        const Const& fill = cst(idx, x_first ? 2 : 1, "fill value");
        bool neg_inf = fill.is_float && fill.size() >= 1;
        for (float v : fill.f) neg_inf = neg_inf && std::isinf(v) && v < 0;
        const ValueId x = act(idx, x_first ? 1 : 2);
        const Shape xs = shape_of(x);
        if (!neg_inf || xs.rank() < 2)
            fail_node(idx,
                      "Where is imported as masked_fill(mask, -inf) on attention scores "
                      "[..., rows, columns]; other fill values are not supported");
        if (broadcast_dims(idx, cond.dims, xs.dims) != xs.dims)
            fail_node(idx, "the mask " + dims_text(cond.dims) + " does not broadcast to " +
                               format_dims(xs));
        const int64_t rows = xs[-2], cols = xs[-1];
        const auto n = static_cast<size_t>(xs.numel());
        bool causal = true;
        for (size_t row = 0; row < n / static_cast<size_t>(cols); ++row) {
            bool any_kept = false;
            const auto r = static_cast<int64_t>(row % static_cast<size_t>(rows));
            for (int64_t j = 0; j < cols; ++j) {
                const size_t k = row * static_cast<size_t>(cols) + static_cast<size_t>(j);
                const bool set = cond.at(broadcast_index(k, xs.dims, cond.dims)) != 0;
                const bool masked = x_first ? !set : set;
                any_kept = any_kept || !masked;
                causal = causal && masked == (j > r);
            }
            if (!any_kept)
                fail_node(idx, "the mask '" + in_name(idx, 0) + "' masks every column of row " +
                                   std::to_string(r) + " of '" + in_name(idx, x_first ? 1 : 2) +
                                   "', so a softmax over it would be all -inf (NaN); every row "
                                   "must keep at least one position");
        }
        if (!causal)
            fail_node(idx, "the mask '" + in_name(idx, 0) +
                               "' is not causal (masked exactly where column > row); RematLab "
                               "imports constant masks of that form only");
        define(idx, 0, {add(idx, node_base(idx), OpKind::CausalMask, {x}, {}), {}});
    }

    // --- patterns --------------------------------------------------------------------------------

    static bool near(double a, double b) { return std::fabs(a - b) <= 1e-4 * std::fabs(b); }

    bool scalar_operand(int idx, const std::string& tensor, double want) const {
        const Const* c = other_const(idx, tensor);
        return c && c->scalar_like() && near(c->at(0), want);
    }

    // Div(x, √2) (or Mul(x, 1/√2)) → Erf → Add 1 → Mul x → Mul 0.5: PyTorch's exact GELU.
    bool try_gelu(int idx) {
        if (num_inputs(idx) != 2 || is_const(idx, 0) || !is_const(idx, 1)) return false;
        const std::string& x = in_name(idx, 0);
        const bool div = op_of(idx) == "Div";
        if (!scalar_operand(idx, x, div ? std::sqrt(2.0) : 1.0 / std::sqrt(2.0))) return false;
        const int erf = sole_consumer(out_name(idx));
        if (erf < 0 || op_of(erf) != "Erf") return false;
        const int plus = sole_consumer(out_name(erf));
        if (plus < 0 || op_of(plus) != "Add" || !scalar_operand(plus, out_name(erf), 1.0))
            return false;
        const int times_x = sole_consumer(out_name(plus));
        if (times_x < 0 || op_of(times_x) != "Mul" || num_inputs(times_x) != 2) return false;
        const bool uses_x = (in_name(times_x, 0) == x && in_name(times_x, 1) == out_name(plus)) ||
                            (in_name(times_x, 1) == x && in_name(times_x, 0) == out_name(plus));
        if (!uses_x) return false;
        const int half = sole_consumer(out_name(times_x));
        if (half < 0 || op_of(half) != "Mul" || !scalar_operand(half, out_name(times_x), 0.5))
            return false;
        for (int n : {erf, plus, times_x, half}) done_[static_cast<size_t>(n)] = true;
        const std::string& name = gp_.node(idx).name();
        const std::string module = module_of(name);
        const std::string base = (module == name ? std::string() : module) + "/Gelu";
        define(half, 0, {add(idx, base, OpKind::Gelu, {act(idx, 0)}, {}), {}});
        return true;
    }

    bool reduces_last_axis(int idx, const Shape& s) const {
        if (attr_int(idx, "keepdims", 1) != 1) return false;
        // A scalar has no last axis (found by fuzz_onnx: `xs[-1]` on a rank-0 input).
        if (s.rank() < 1) return false;
        const auto axes = axes_of(idx);
        return axes && axes->size() == 1 &&
               ((*axes)[0] == -1 || (*axes)[0] == static_cast<int64_t>(s.rank()) - 1);
    }

    // ReduceMean → Sub → Pow 2 → ReduceMean → Add ε → Sqrt → Div (→ Mul w → Add b): LayerNorm as
    // exporters write it below opset 17.
    bool try_layernorm(int idx) {
        if (is_const(idx, 0)) return false;
        const ValueId xv = act(idx, 0);
        const Shape xs = shape_of(xv);
        const std::string& x = in_name(idx, 0);
        if (!reduces_last_axis(idx, xs)) return false;
        const int sub = sole_consumer(out_name(idx));
        if (sub < 0 || op_of(sub) != "Sub" || num_inputs(sub) != 2 || in_name(sub, 0) != x ||
            in_name(sub, 1) != out_name(idx))
            return false;
        auto it = consumers_.find(out_name(sub));
        if (it == consumers_.end() || it->second.size() != 2) return false;
        int pow = -1, div = -1;
        for (int c : it->second) {
            if (op_of(c) == "Pow") pow = c;
            if (op_of(c) == "Div") div = c;
        }
        if (pow < 0 || div < 0 || in_name(pow, 0) != out_name(sub) ||
            !scalar_operand(pow, out_name(sub), 2.0) || in_name(div, 0) != out_name(sub))
            return false;
        const int mean2 = sole_consumer(out_name(pow));
        if (mean2 < 0 || op_of(mean2) != "ReduceMean" || !reduces_last_axis(mean2, xs))
            return false;
        const int plus = sole_consumer(out_name(mean2));
        if (plus < 0 || op_of(plus) != "Add") return false;
        const Const* eps = other_const(plus, out_name(mean2));
        if (!eps || !eps->scalar_like() || !(eps->at(0) > 0)) return false;
        const int sqrt = sole_consumer(out_name(plus));
        if (sqrt < 0 || op_of(sqrt) != "Sqrt" || sole_consumer(out_name(sqrt)) != div ||
            in_name(div, 1) != out_name(sqrt))
            return false;
        std::vector<int> group = {sub, pow, mean2, plus, sqrt, div};
        int last = div;
        const int64_t d = xs[-1];
        std::vector<ParamSource> params;
        const int mul = sole_consumer(out_name(div));
        const Const* w =
            mul >= 0 && op_of(mul) == "Mul" ? other_const(mul, out_name(div)) : nullptr;
        if (w && w->is_float && static_cast<int64_t>(w->size()) == d) {
            params.push_back(param_from(mul, *w));
            group.push_back(mul);
            last = mul;
            const int badd = sole_consumer(out_name(mul));
            const Const* b =
                badd >= 0 && op_of(badd) == "Add" ? other_const(badd, out_name(mul)) : nullptr;
            if (b && b->is_float && static_cast<int64_t>(b->size()) == d) {
                params.push_back(param_from(badd, *b));
                group.push_back(badd);
                last = badd;
            }
        }
        for (int n : group) done_[static_cast<size_t>(n)] = true;
        define(
            last, 0,
            {add(idx, module_or_name(idx), OpKind::LayerNorm, {xv}, {{"eps", eps->at(0)}}, params),
             {}});
        return true;
    }

    // --- the loss --------------------------------------------------------------------------------

    void add_loss() {
        auto it = env_.find(output_);
        if (it == env_.end() || it->second.c)
            fail("the graph's output '" + output_ +
                 "' is a constant: it does not depend on the network's input");
        const ValueId y = it->second.value;
        try {
            if (opt_.loss == ImportLoss::SumSquares) {
                g_.add_node(unique_name("loss"), OpKind::SumSquares, std::vector<ValueId>{y}, {},
                            {"loss"});
            } else {
                const Shape& s = shape_of(y);
                if (s.rank() != 2)
                    fail("cross_entropy needs a [rows, classes] output, but '" + output_ + "' is " +
                         format_dims(s));
                const ValueId labels =
                    g_.add_input(unique_name("labels"), DType::I32, Shape{s[0]}, s[1]);
                g_.add_node(unique_name("loss"), OpKind::CrossEntropy,
                            std::vector<ValueId>{y, labels}, {}, {"loss"});
            }
        } catch (const Error& e) {
            fail(e.what());
        }
    }

    onnx::ModelProto& model_;
    const onnx::GraphProto& gp_;
    std::string origin_;
    OnnxImportOptions opt_;
    int64_t opset_ = 0;
    Graph g_;
    std::unordered_map<std::string, Entry> env_;
    std::set<std::string> initializer_inputs_;
    std::set<std::string> used_names_;
    std::unordered_map<std::string, int> producer_;
    std::unordered_map<std::string, std::vector<int> > consumers_;
    std::map<std::string, int> param_owner_;
    std::map<std::string, std::shared_ptr<const std::vector<float> > > param_values_;
    std::vector<int> order_;
    std::vector<bool> done_;
    std::unordered_map<std::string, ValueId> materialized_;  // constants read as tensors
    std::unordered_set<std::string> carries_gradient_;       // see carries_gradient()
    bool gradient_swept_ = false;
    std::string output_;
};

// A ModelProto of `size` bytes from `stream`: no field may claim more bytes than that, nesting
// stays shallow. `origin` names it in messages.
void parse_model(google::protobuf::io::ZeroCopyInputStream* stream, uint64_t size,
                 const std::string& origin, onnx::ModelProto& model) {
    google::protobuf::io::CodedInputStream in(stream);
    in.SetTotalBytesLimit(static_cast<int>(size));
    in.SetRecursionLimit(64);
    if (!model.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage())
        throw Error(origin + ": not a valid ONNX model (the protobuf data is truncated or " +
                    "malformed; parsing stopped at byte " + std::to_string(in.CurrentPosition()) +
                    " of " + std::to_string(size) + "); export the network again");
}

Graph import_model(onnx::ModelProto& model, const std::string& origin,
                   const OnnxImportOptions& opt) {
    Graph g = Importer(model, origin, opt).run();
    if (!opt.narrow_slices) return g;
    return narrow_slices(g).graph;
}

}  // namespace

Graph network_from_onnx(const std::string& bytes, const std::string& origin,
                        const OnnxImportOptions& opt) {
    if (bytes.size() > opt.max_file_bytes || bytes.size() > static_cast<size_t>(INT_MAX))
        throw Error(origin + ": the model is " + std::to_string(bytes.size()) +
                    " bytes, more than the limit of " +
                    std::to_string(std::min<uint64_t>(opt.max_file_bytes, INT_MAX)) + " bytes");
    if (bytes.empty()) throw Error(origin + ": the file is empty; it is not an ONNX model");
    onnx::ModelProto model;
    google::protobuf::io::ArrayInputStream raw(bytes.data(), static_cast<int>(bytes.size()));
    parse_model(&raw, bytes.size(), origin, model);
    return import_model(model, origin, opt);
}

Graph load_onnx_file(const std::string& path, const OnnxImportOptions& opt) {
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (ec || !std::filesystem::exists(status))
        throw Error("cannot open ONNX file '" + path + "': no such file");
    if (std::filesystem::is_directory(status))
        throw Error("cannot open ONNX file '" + path + "': it is a directory");
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) throw Error("cannot open ONNX file '" + path + "': " + ec.message());
    if (size > opt.max_file_bytes || size > static_cast<uint64_t>(INT_MAX))
        throw Error("ONNX file '" + path + "' is " + std::to_string(size) +
                    " bytes, more than the limit of " +
                    std::to_string(std::min<uint64_t>(opt.max_file_bytes, INT_MAX)) + " bytes" +
                    (size > static_cast<uint64_t>(INT_MAX)
                         ? " (protobuf reads at most 2 GiB; weights above 2 GiB must be saved "
                           "as external data, which RematLab reads)"
                         : ""));
    if (size == 0) throw Error(path + ": the file is empty; it is not an ONNX model");
    // Parsed as it is read, a block at a time: the file's bytes are never held whole beside
    // the model they become (ResNeXt-101's 348 MB export: 1.7 GB at its peak when the file was
    // read into a string, then copied, then parsed).
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error("cannot open ONNX file '" + path + "'");
    onnx::ModelProto model;
    {
        google::protobuf::io::IstreamInputStream stream(&in, 1 << 20);
        parse_model(&stream, size, path, model);
    }
    if (in.bad()) throw Error("reading ONNX file '" + path + "' failed");
    // External data is found relative to the model's folder.
    OnnxImportOptions with_dir = opt;
    const auto parent = std::filesystem::path(path).parent_path();
    with_dir.model_dir = parent.empty() ? std::string(".") : parent.string();
    return import_model(model, path, with_dir);
}

#endif

}  // namespace rl
