// Parsing and checking the 2-D window attributes (kernel, stride, padding, dilation) of conv2d,
// maxpool2d and avgpool2d.
#include "engine/ops/window.h"

#include <array>
#include <string>

#include "engine/errors.h"
#include "engine/ops/op.h"

namespace rl {
namespace {

// Window sizes, strides, dilations and padding are bounded so that the geometry's arithmetic
// (dilation·(kernel-1)+1, in+pads) cannot overflow int64: a file may hold any integer there.
constexpr int64_t kMaxWindow = int64_t{1} << 31;

std::string list_text(const std::vector<int64_t>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) {
        if (i) s += ",";
        s += std::to_string(v[i]);
    }
    return s + "]";
}

// An int (both axes) or a list of two ints [h, w].
std::array<int64_t, 2> pair_attr(const Node& n, const char* key, int64_t fallback, int64_t min,
                                 const char* what) {
    std::array<int64_t, 2> r{fallback, fallback};
    const AttrValue* v = n.attrs.find(key);
    if (!v) {
        if (fallback < 0) throw Error(std::string("attribute '") + key + "' is required");
        return r;
    }
    if (const auto* i = std::get_if<int64_t>(v)) {
        r = {*i, *i};
    } else if (const auto* l = std::get_if<std::vector<int64_t>>(v)) {
        if (l->size() != 2)
            throw Error(std::string("attribute '") + key + "' is " + list_text(*l) +
                        "; it must be an integer or a list of 2 integers " + what);
        r = {(*l)[0], (*l)[1]};
    } else {
        throw Error(std::string("attribute '") + key + "' must be an integer or a list of 2 " +
                    "integers " + what);
    }
    for (int64_t x : r)
        if (x < min || x > kMaxWindow)
            throw Error(std::string("attribute '") + key + "' has " + std::to_string(x) +
                        "; it must be >= " + std::to_string(min) + " and <= 2^31");
    return r;
}

// padding: an int, [ph, pw] or [top, left, bottom, right] (ONNX pads order).
void read_padding(const Node& n, Window2d& w) {
    const AttrValue* v = n.attrs.find("padding");
    std::array<int64_t, 4> p{0, 0, 0, 0};
    if (v) {
        if (const auto* i = std::get_if<int64_t>(v)) {
            p = {*i, *i, *i, *i};
        } else if (const auto* l = std::get_if<std::vector<int64_t>>(v)) {
            if (l->size() == 2)
                p = {(*l)[0], (*l)[1], (*l)[0], (*l)[1]};
            else if (l->size() == 4)
                p = {(*l)[0], (*l)[1], (*l)[2], (*l)[3]};
            else
                throw Error("attribute 'padding' is " + list_text(*l) +
                            "; it must be an integer, [ph, pw] or [top, left, bottom, right]");
        } else {
            throw Error(
                "attribute 'padding' must be an integer, [ph, pw] or [top, left, bottom, right]");
        }
    }
    for (int64_t x : p)
        if (x < 0 || x > kMaxWindow)
            throw Error("attribute 'padding' has " + std::to_string(x) +
                        "; it must be >= 0 and <= 2^31");
    w.pad_top = p[0];
    w.pad_left = p[1];
    w.pad_bottom = p[2];
    w.pad_right = p[3];
}

Window2d read_window(const Node& n, bool stride_defaults_to_kernel) {
    Window2d w;
    const auto k = pair_attr(n, "kernel", -1, 1, "[kh, kw]");
    w.kh = k[0];
    w.kw = k[1];
    const auto s = pair_attr(n, "stride", 1, 1, "[sh, sw]");
    w.sh = s[0];
    w.sw = s[1];
    if (stride_defaults_to_kernel && !n.attrs.has("stride")) {
        w.sh = w.kh;
        w.sw = w.kw;
    }
    const auto d = pair_attr(n, "dilation", 1, 1, "[dh, dw]");
    w.dh = d[0];
    w.dw = d[1];
    read_padding(n, w);
    return w;
}

const Shape& nchw_input(const Graph& g, const Node& n) {
    const Value& x = g.value(n.inputs[0]);
    if (x.shape.rank() != 4)
        throw Error("input 0 has shape " + format_dims(x.shape) + " but " +
                    std::string(op_name(n.op)) + " expects rank 4 [N, C, H, W]");
    return x.shape;
}

// Positions of a window along one axis.
int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe, bool ceil,
                 const char* axis, const Shape& x) {
    const int64_t extent = d * (k - 1) + 1;
    const int64_t span = in + pb + pe - extent;
    if (span < 0)
        throw Error(std::string("the window along ") + axis + " spans " + std::to_string(extent) +
                    " elements (kernel " + std::to_string(k) + ", dilation " + std::to_string(d) +
                    ") but input 0 " + format_dims(x) + " has only " +
                    std::to_string(in + pb + pe) +
                    " there with padding; use a smaller kernel or more padding");
    int64_t out = (ceil ? span + s - 1 : span) / s + 1;
    if (ceil && (out - 1) * s >= in + pb) --out;  // a last window starting in the end padding
    return out;
}

}  // namespace

Conv2dGeometry conv2d_geometry(const Graph& g, const Node& n) {
    const Shape& x = nchw_input(g, n);
    Conv2dGeometry c;
    c.n = x[0];
    c.c = x[1];
    c.h = x[2];
    c.w = x[3];
    c.out_c = n.attrs.get_int("out_channels");
    if (c.out_c <= 0)
        throw Error("attribute 'out_channels' is " + std::to_string(c.out_c) +
                    "; it must be positive");
    c.groups = n.attrs.get_int("groups", 1);
    if (c.groups <= 0 || c.c % c.groups != 0 || c.out_c % c.groups != 0)
        throw Error("attribute 'groups' is " + std::to_string(c.groups) +
                    "; it must divide both the input channels (" + std::to_string(c.c) +
                    ", from input 0 " + format_dims(x) + ") and out_channels (" +
                    std::to_string(c.out_c) + ")");
    const int64_t bias = n.attrs.get_int("bias", 1);
    if (bias != 0 && bias != 1)
        throw Error("attribute 'bias' is " + std::to_string(bias) + "; it must be 0 or 1");
    c.bias = bias != 0;
    c.win = read_window(n, false);
    const Window2d& w = c.win;
    c.oh = out_size(c.h, w.kh, w.sh, w.dh, w.pad_top, w.pad_bottom, false, "H", x);
    c.ow = out_size(c.w, w.kw, w.sw, w.dw, w.pad_left, w.pad_right, false, "W", x);
    return c;
}

Pool2dGeometry pool2d_geometry(const Graph& g, const Node& n) {
    const Shape& x = nchw_input(g, n);
    Pool2dGeometry p;
    p.n = x[0];
    p.c = x[1];
    p.h = x[2];
    p.w = x[3];
    const bool is_avg = n.op == OpKind::AvgPool2d;
    const int64_t global = is_avg ? n.attrs.get_int("global", 0) : 0;
    if (global != 0 && global != 1)
        throw Error("attribute 'global' is " + std::to_string(global) + "; it must be 0 or 1");
    if (global) {
        for (const char* key : {"kernel", "stride", "padding", "dilation", "ceil_mode"})
            if (n.attrs.has(key))
                throw Error(std::string("attribute '") + key +
                            "' does not apply with global=1 (the window is the whole plane)");
        p.win.kh = p.h;
        p.win.kw = p.w;
        p.oh = p.ow = 1;
        return p;
    }
    // Stride defaults to the kernel, as in PyTorch (ONNX's default is 1: importers pass it).
    p.win = read_window(n, true);
    const int64_t ceil = n.attrs.get_int("ceil_mode", 0);
    if (ceil != 0 && ceil != 1)
        throw Error("attribute 'ceil_mode' is " + std::to_string(ceil) + "; it must be 0 or 1");
    if (is_avg) {
        const int64_t cip = n.attrs.get_int("count_include_pad", 0);
        if (cip != 0 && cip != 1)
            throw Error("attribute 'count_include_pad' is " + std::to_string(cip) +
                        "; it must be 0 or 1");
        p.count_include_pad = cip != 0;
    }
    const Window2d& w = p.win;
    const int64_t ext_h = w.dh * (w.kh - 1) + 1, ext_w = w.dw * (w.kw - 1) + 1;
    if (std::max(w.pad_top, w.pad_bottom) >= ext_h || std::max(w.pad_left, w.pad_right) >= ext_w)
        throw Error("attribute 'padding' must be smaller than the window (" +
                    std::to_string(ext_h) + "x" + std::to_string(ext_w) +
                    "), or some windows would hold only padding");
    p.oh = out_size(p.h, w.kh, w.sh, w.dh, w.pad_top, w.pad_bottom, ceil != 0, "H", x);
    p.ow = out_size(p.w, w.kw, w.sw, w.dw, w.pad_left, w.pad_right, ceil != 0, "W", x);
    return p;
}

}  // namespace rl
