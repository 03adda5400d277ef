// The NCHW ops (conv2d, maxpool2d, avgpool2d, batchnorm, upsample_nearest2d, concat, flatten,
// dropout) and their CPU kernels, one small node at a time, as test_ops.cpp does for the dense
// ops: forward values against a float64 reference written out here, backward against central
// finite differences, the kernel contract (accumulate flags, garbage workspace, duplicate
// inputs), determinism at 2 threads, and the attribute errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "engine/backend.h"
#include "engine/cpu/conv_grouped.h"
#include "engine/cpu/im2col.h"
#include "engine/cpu/kernels.h"
#include "engine/errors.h"
#include "engine/op_harness.h"
#include "engine/ops/op.h"
#include "engine/ops/window.h"
#include "engine/rng.h"

namespace rl {
namespace {

using Ids = std::vector<ValueId>;
using Ints = std::vector<int64_t>;

using testing::check_accumulate;
using testing::check_forward;
using testing::check_repeatable;
using testing::Floats;
using testing::Grads;

// The cases here draw their values from seed 11, which the tolerances below were set with.
struct ConvCase : testing::OpHarness {
    explicit ConvCase(uint32_t seed = 11, std::string node_name = "op")
        : OpHarness(seed, "conv-ops", std::move(node_name)) {}
};

void check_gradients(ConvCase& c, double eps = 1e-2, double atol = 2e-3, double rtol = 1e-2) {
    testing::check_gradients(c, eps, atol, rtol);
}

// --- references in double -----------------------------------------------------------------

struct ConvSpec {
    int64_t n, c, h, w, out;
    int64_t kh, kw, sh = 1, sw = 1, dh = 1, dw = 1;
    int64_t pt = 0, pl = 0, pb = 0, pr = 0;
    int64_t groups = 1;
    bool bias = true;

    Attrs attrs() const {
        Attrs a{{"out_channels", out}, {"kernel", Ints{kh, kw}}};
        a.set("stride", Ints{sh, sw});
        a.set("padding", Ints{pt, pl, pb, pr});
        a.set("dilation", Ints{dh, dw});
        a.set("groups", groups);
        if (!bias) a.set("bias", int64_t{0});
        return a;
    }
    int64_t oh() const { return (h + pt + pb - dh * (kh - 1) - 1) / sh + 1; }
    int64_t ow() const { return (w + pl + pr - dw * (kw - 1) - 1) / sw + 1; }
};

// Calls f(yi, xi, wi) for every output element yi (NCHW order) and every input element xi and
// weight wi that meet in one of its window's taps inside the input.
template <class F>
void for_each_tap(const ConvSpec& s, F&& f) {
    const int64_t cg = s.c / s.groups, og = s.out / s.groups;
    size_t yi = 0;
    for (int64_t n = 0; n < s.n; ++n)
        for (int64_t o = 0; o < s.out; ++o)
            for (int64_t oh = 0; oh < s.oh(); ++oh)
                for (int64_t ow = 0; ow < s.ow(); ++ow, ++yi)
                    for (int64_t ci = 0; ci < cg; ++ci)
                        for (int64_t i = 0; i < s.kh; ++i)
                            for (int64_t j = 0; j < s.kw; ++j) {
                                const int64_t ih = oh * s.sh - s.pt + i * s.dh;
                                const int64_t iw = ow * s.sw - s.pl + j * s.dw;
                                if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w) continue;
                                const int64_t xc = o / og * cg + ci;
                                f(yi, static_cast<size_t>(((n * s.c + xc) * s.h + ih) * s.w + iw),
                                  static_cast<size_t>(((o * cg + ci) * s.kh + i) * s.kw + j));
                            }
}

std::vector<double> conv_reference(const ConvSpec& s, const Floats& x, const Floats& wt,
                                   const Floats* b) {
    std::vector<double> y(static_cast<size_t>(s.n * s.out * s.oh() * s.ow()), 0.0);
    if (b)
        for (size_t yi = 0; yi < y.size(); ++yi)
            y[yi] = (*b)[yi / static_cast<size_t>(s.oh() * s.ow()) % static_cast<size_t>(s.out)];
    for_each_tap(s, [&](size_t yi, size_t xi, size_t wi) { y[yi] += double(wt[wi]) * x[xi]; });
    return y;
}

// The gradients of L = Σ r·y against their definition in double: dX[xi] = Σ r[yi]·w[wi] and
// dW[wi] = Σ r[yi]·x[xi] over the taps where they meet (for_each_tap), dB[o] = Σ r over o's
// outputs. Each may differ from the reference by float rounding of its sum: 1e-4 of the sum of
// its terms' magnitudes (one term left out or counted twice is off by |r·w|, about 0.25). A
// convolution is linear in each argument, so this is what central differences checked, at one
// backward instead of two forwards per element (the 90 × 100 plane took 8 s that way).
void check_conv_gradients(ConvCase& c, const ConvSpec& s, ValueId x) {
    const Floats r = c.random(c.forward().size());
    const Grads an = c.backward(r);
    const Floats& xs = c.data(x);
    const Floats& w = c.params[0];
    std::vector<double> dx(xs.size()), dw(w.size()), dx_mag(xs.size()), dw_mag(w.size());
    for_each_tap(s, [&](size_t yi, size_t xi, size_t wi) {
        const double tx = double(r[yi]) * w[wi], tw = double(r[yi]) * xs[xi];
        dx[xi] += tx, dx_mag[xi] += std::abs(tx);
        dw[wi] += tw, dw_mag[wi] += std::abs(tw);
    });
    auto expect = [](const Floats& got, const std::vector<double>& want,
                     const std::vector<double>& mag, const char* what) {
        ASSERT_EQ(got.size(), want.size()) << what;
        int wrong = 0;
        for (size_t k = 0; k < got.size(); ++k)
            if (!(std::abs(got[k] - want[k]) <= 1e-4 * (1 + mag[k])) && wrong++ < 5)
                ADD_FAILURE() << what << " element " << k << ": " << got[k] << ", want " << want[k];
        EXPECT_EQ(wrong, 0) << what;
    };
    expect(an.inputs.at(x), dx, dx_mag, "dX");
    expect(an.params[0], dw, dw_mag, "dW");
    if (s.bias) {
        const size_t plane = static_cast<size_t>(s.oh() * s.ow());
        std::vector<double> db(static_cast<size_t>(s.out)), db_mag(db.size());
        for (size_t yi = 0; yi < r.size(); ++yi) {
            const size_t o = yi / plane % db.size();
            db[o] += r[yi], db_mag[o] += std::abs(double(r[yi]));
        }
        expect(an.params[1], db, db_mag, "dB");
    }
}

void check_conv(const ConvSpec& s, const char* what) {
    SCOPED_TRACE(what);
    ConvCase c;
    const ValueId x = c.input("x", Shape{s.n, s.c, s.h, s.w});
    c.op(OpKind::Conv2d, {x}, s.attrs());
    ASSERT_EQ(c.out_shape(), (Shape{s.n, s.out, s.oh(), s.ow()}));
    ASSERT_EQ(c.params.size(), s.bias ? 2u : 1u);
    check_forward(c, conv_reference(s, c.data(x), c.params[0], s.bias ? &c.params[1] : nullptr));
    check_conv_gradients(c, s, x);
}

// check_conv for a convolution that must take a given path: `expect` asserts it on the
// geometry first (a test that took another path would exercise nothing new), then the input
// gradient's accumulation into what was there, then check_conv.
void check_conv_path(const ConvSpec& s, const char* what,
                     const std::function<void(const Conv2dGeometry&)>& expect) {
    SCOPED_TRACE(what);
    ConvCase c;
    c.op(OpKind::Conv2d, {c.input("x", Shape{s.n, s.c, s.h, s.w})}, s.attrs());
    expect(conv2d_geometry(c.g, c.n()));
    if (::testing::Test::HasFatalFailure()) return;
    ASSERT_NO_FATAL_FAILURE(check_accumulate(c));
    check_conv(s, what);
}

// ---------------------------------------------------------------------------------------------
// conv2d

TEST(ConvOps, Conv2dPadded3x3) {
    check_conv({.n = 2,
                .c = 3,
                .h = 5,
                .w = 6,
                .out = 4,
                .kh = 3,
                .kw = 3,
                .pt = 1,
                .pl = 1,
                .pb = 1,
                .pr = 1},
               "3x3 pad 1");
}

TEST(ConvOps, Conv2dStrideDilationAsymmetricPadding) {
    check_conv({.n = 2, .c = 2, .h = 7, .w = 6, .out = 3, .kh = 3, .kw = 2, .sh = 2, .sw = 1},
               "stride 2x1, kernel 3x2");
    check_conv({.n = 1,
                .c = 2,
                .h = 7,
                .w = 7,
                .out = 2,
                .kh = 3,
                .kw = 3,
                .dh = 2,
                .dw = 2,
                .pt = 2,
                .pl = 2,
                .pb = 2,
                .pr = 2},
               "dilation 2");
    check_conv({.n = 2,
                .c = 2,
                .h = 6,
                .w = 5,
                .out = 3,
                .kh = 3,
                .kw = 3,
                .sh = 2,
                .sw = 2,
                .pt = 0,
                .pl = 1,
                .pb = 2,
                .pr = 0},
               "asymmetric padding, stride 2");
    check_conv({.n = 1,
                .c = 3,
                .h = 4,
                .w = 4,
                .out = 2,
                .kh = 3,
                .kw = 3,
                .sh = 3,
                .sw = 2,
                .pt = 1,
                .pl = 1,
                .pb = 1,
                .pr = 1,
                .bias = false},
               "stride 3x2, no bias");
}

// im2col and col2im take a zero-padded copy of each plane where the window's extent fits on the
// stack (and the rows are not of the widths that go by vectors), and go row by row with bounds
// where it does not: both paths against the float64 reference and central differences, with
// padding, strides 1, 2 and 3, and output widths that are compiled in (8, from 10 columns) and
// that are not (9, 5, 3, 6).
TEST(ConvOps, Conv2dPaddedCopyAndRowByRowPaths) {
    const ConvSpec small{.n = 2,
                         .c = 2,
                         .h = 8,
                         .w = 8,
                         .out = 3,
                         .kh = 3,
                         .kw = 3,
                         .pt = 1,
                         .pl = 1,
                         .pb = 1,
                         .pr = 1};
    ConvSpec wide = small, odd2 = small, odd3 = small, compiled = small;
    wide.w = 9;                                      // 9 columns out, stride 1
    compiled.w = 10, compiled.pl = compiled.pr = 0;  // 8 columns out, stride 1
    odd2.w = 10, odd2.sw = 2, odd2.pr = 0;           // 5 columns out
    odd3.w = 10, odd3.sw = 3, odd3.pr = 0;           // 3 columns out, a stride not compiled in
    ConvSpec large = small;
    large.n = 1, large.c = 1, large.h = 90, large.w = 100;  // 92 × 102 padded: over 8192 floats
    ConvSpec large_strided = large;
    large_strided.sh = 2, large_strided.sw = 2;
    // A 7×7 stem at stride 2 on a 64-px input: 69 × 69 padded, through the copy.
    ConvSpec stem = small;
    stem.n = 1, stem.c = 1, stem.h = stem.w = 64, stem.kh = stem.kw = 7, stem.sh = stem.sw = 2;
    stem.pt = stem.pl = stem.pb = stem.pr = 3;
    // Stride 2 across keeps each padded row as its even columns, then its odd ones: a row of 20
    // columns inside (by vectors, from an odd padded column), and one of 19 from an even column
    // at dilation 2 with all the padding on one side.
    ConvSpec phased = small;
    phased.h = 6, phased.w = 20, phased.sh = phased.sw = 2;
    ConvSpec phased_dilated = small;
    phased_dilated.h = 7, phased_dilated.w = 19, phased_dilated.sh = phased_dilated.sw = 2;
    phased_dilated.dh = phased_dilated.dw = 2;
    phased_dilated.pt = phased_dilated.pr = 2, phased_dilated.pl = phased_dilated.pb = 0;
    // Short rows of widths that do not go by vectors: 6×6 and 3×3 planes, and 2 rows down a
    // plane of 5 rows of 6 whose last row no window reaches.
    ConvSpec short6 = small, short3 = small, short_uncovered = small;
    short6.h = short6.w = 6;
    short3.h = short3.w = 3;
    short_uncovered.h = 5, short_uncovered.w = 6, short_uncovered.kh = 2, short_uncovered.sh = 2;
    short_uncovered.pt = short_uncovered.pb = 0;
    // A strided 1×1 without padding has no edges: row by row, whatever its plane.
    ConvSpec projection{
        .n = 2, .c = 3, .h = 8, .w = 9, .out = 4, .kh = 1, .kw = 1, .sh = 2, .sw = 2};
    ConvSpec wide_projection = projection;  // 12 columns out: eight at once, then four
    wide_projection.h = 5, wide_projection.w = 24;
    ConvSpec odd_projection = projection;  // strides 3 down and across, not compiled in
    odd_projection.h = 7, odd_projection.w = 10, odd_projection.sh = odd_projection.sw = 3;
    for (const auto& [s, padded, what] :
         {std::tuple{compiled, true, "8x10, padded copy"}, std::tuple{wide, true, "9 columns"},
          std::tuple{odd2, true, "5 columns, stride 2"}, std::tuple{odd3, true, "stride 3"},
          std::tuple{stem, true, "7x7 stride 2 on 64x64, padded copy"},
          std::tuple{phased, true, "3x3 stride 2, 20 columns"},
          std::tuple{short6, true, "6x6 planes"}, std::tuple{short3, true, "3x3 planes"},
          std::tuple{short_uncovered, true, "2x3 windows at stride 2 down, last row unreached"},
          std::tuple{phased_dilated, true, "3x3 stride 2 dilation 2, padded on the right"},
          std::tuple{large, false, "90x100, row by row"},
          std::tuple{large_strided, false, "90x100 stride 2, row by row"},
          std::tuple{projection, false, "1x1 stride 2, row by row"},
          std::tuple{wide_projection, false, "1x1 stride 2, 12 columns"},
          std::tuple{odd_projection, false, "1x1 stride 3"}}) {
        SCOPED_TRACE(what);
        ConvCase c;
        c.op(OpKind::Conv2d, {c.input("x", Shape{s.n, s.c, s.h, s.w})}, s.attrs());
        ASSERT_EQ(conv2d_geometry(c.g, c.n()).im2col_through_padded_plane(), padded);
        check_conv(s, what);
    }
}

// A 3×3 window with padding 1 on every side, at stride 1, on [n, c, h, w].
ConvSpec padded3x3(int64_t n, int64_t c, int64_t h, int64_t w, int64_t out, int64_t groups) {
    ConvSpec s{.n = n, .c = c, .h = h, .w = w, .out = out, .kh = 3, .kw = 3, .groups = groups};
    s.pt = s.pl = s.pb = s.pr = 1;
    return s;
}

// `s` with `edit` applied: a case that differs from a base in a few fields.
template <class F>
ConvSpec edited(ConvSpec s, F&& edit) {
    edit(s);
    return s;
}

// Rows of 2, 4, 7 or 8 floats in and 1, 2, 4, 7 or 8 out, and of 14 or 16 in and 7, 8, 14 or 16
// out (two vectors), move by vector permutes (Conv2dGeometry::im2col_in_vector_rows): width
// pairs of both kinds, strides 1, 2 and 3, dilation, padding on one side only, a row no window
// reaches, kernels of 3 (compiled in) and of 5 and 7, groups — forward against the float64
// reference, gradients against their definition, and accumulation into an existing input
// gradient.
TEST(ConvOps, Conv2dRowsInOneVector) {
    const ConvSpec base = padded3x3(2, 3, 8, 8, 4, 1);
    auto with = [&](auto edit) { return edited(base, edit); };
    for (const auto& [s, what] :
         {std::tuple{base, "8x8"},
          std::tuple{with([](ConvSpec& s) { s.sh = s.sw = 2; }), "8x8 stride 2: 4 columns"},
          std::tuple{with([](ConvSpec& s) { s.h = s.w = 7, s.groups = 3, s.out = 3; }),
                     "7x7, 3 groups"},
          std::tuple{with([](ConvSpec& s) { s.h = s.w = 7, s.sh = s.sw = 2; }),
                     "7x7 stride 2: 4 columns"},
          std::tuple{with([](ConvSpec& s) { s.h = s.w = 7, s.sh = s.sw = 3, s.pl = s.pr = 0; }),
                     "7 columns at stride 3: 2"},
          std::tuple{with([](ConvSpec& s) {
                         s.h = s.w = 4, s.dh = s.dw = 2;
                         s.pt = s.pl = s.pb = s.pr = 2;
                     }),
                     "4x4, dilation 2"},
          std::tuple{with([](ConvSpec& s) { s.h = s.w = 2; }), "2x2"},
          std::tuple{with([](ConvSpec& s) { s.h = s.w = 2, s.sh = s.sw = 2; }),
                     "2x2 stride 2: 1 column"},
          std::tuple{with([](ConvSpec& s) {
                         s.h = 5, s.w = 4, s.kh = 2, s.sh = 2;
                         s.pt = s.pb = 0;
                     }),
                     "2x3 windows at stride 2 down, last row unreached"},
          std::tuple{with([](ConvSpec& s) {
                         s.h = s.w = 4, s.kh = s.kw = 5;
                         s.pt = s.pl = s.pb = s.pr = 2;
                     }),
                     "5x5 on 4x4"},
          std::tuple{with([](ConvSpec& s) {
                         s.kh = 1, s.kw = 7;
                         s.pt = s.pb = 0, s.pl = s.pr = 3;
                     }),
                     "1x7 on rows of 8"},
          std::tuple{with([](ConvSpec& s) { s.pl = 2, s.pr = 0, s.bias = false; }),
                     "padding 2 on the left, none on the right, no bias"},
          std::tuple{with([](ConvSpec& s) { s.h = s.w = 16; }), "16x16"},
          std::tuple{with([](ConvSpec& s) { s.h = s.w = 16, s.sh = s.sw = 2; }),
                     "16x16 stride 2: 8 columns"},
          std::tuple{with([](ConvSpec& s) { s.h = 5, s.w = 14, s.dw = 2, s.pl = s.pr = 2; }),
                     "14 columns, dilation 2 across"},
          std::tuple{with([](ConvSpec& s) { s.h = 6, s.w = 14, s.sw = 2; }),
                     "14 columns at stride 2: 7"},
          std::tuple{with([](ConvSpec& s) { s.h = 3, s.w = 16, s.kw = 5, s.pl = 3, s.pr = 1; }),
                     "16 columns, 3x5 window padded 3 left and 1 right"}}) {
        check_conv_path(s, what, [](const Conv2dGeometry& g) {
            ASSERT_TRUE(g.im2col_in_vector_rows());
            ASSERT_FALSE(g.im2col_through_padded_plane());
        });
    }
}

// im2col and col2im on each of their paths against their definition, bit for bit: im2col copies
// each tap's input (+0 in padding) to its column; col2im adds each column value to the input it
// came from, taps in order (i, then j), onto +0 or onto what dx held. Every path keeps that
// order, so a convolution's bits do not depend on the path its geometry takes. Column values
// include signed zeros, dx starts as NaN where it is written without accumulation, and the
// column matrix's rows are wider than the plane (images side by side).
TEST(ConvOps, Im2colAndCol2imKeepTheirDefinitionBitForBit) {
    const ConvSpec base = padded3x3(1, 3, 8, 8, 1, 1);
    auto with = [&](auto edit) { return edited(base, edit); };
    enum class Path { Vectors, Padded, Rows, Tiles, Strided1x1 };
    const std::vector<std::tuple<ConvSpec, Path, const char*>> cases = {
        {base, Path::Vectors, "8x8"},
        {with([](ConvSpec& s) { s.sh = s.sw = 2; }), Path::Vectors, "8x8 stride 2"},
        {with([](ConvSpec& s) { s.h = s.w = 7, s.sh = s.sw = 2; }), Path::Vectors, "7x7 stride 2"},
        {with([](ConvSpec& s) { s.h = s.w = 2, s.sh = s.sw = 2; }), Path::Vectors, "2x2 stride 2"},
        {with([](ConvSpec& s) {
             s.h = s.w = 4, s.dh = s.dw = 2;
             s.pt = s.pl = s.pb = s.pr = 2;
         }),
         Path::Vectors, "4x4 dilation 2"},
        {with([](ConvSpec& s) {
             s.h = 5, s.w = 4, s.kh = 2, s.sh = 2;
             s.pt = s.pb = 0;
         }),
         Path::Vectors, "last row unreached"},
        {with([](ConvSpec& s) {
             s.h = s.w = 4, s.kh = s.kw = 5;
             s.pt = s.pl = s.pb = s.pr = 2;
         }),
         Path::Vectors, "5x5 on 4x4"},
        {with([](ConvSpec& s) { s.h = s.w = 16, s.sh = s.sw = 2; }), Path::Vectors,
         "16x16 stride 2"},
        {with([](ConvSpec& s) { s.h = 5, s.w = 14, s.dw = 2, s.pl = s.pr = 2; }), Path::Vectors,
         "14 columns, dilation 2 across"},
        {with([](ConvSpec& s) { s.h = 3, s.w = 16, s.kw = 5, s.pl = 3, s.pr = 1; }), Path::Vectors,
         "16 columns, 3x5 window"},
        {with([](ConvSpec& s) { s.h = s.w = 6; }), Path::Padded, "6x6"},
        {with([](ConvSpec& s) { s.h = 6, s.w = 20, s.sh = s.sw = 2; }), Path::Padded,
         "20 columns at stride 2, in phases"},
        {with([](ConvSpec& s) { s.h = 90, s.w = 100; }), Path::Rows, "90x100"},
        {with([](ConvSpec& s) {
             s.kh = s.kw = 2, s.sh = s.sw = 2;
             s.pt = s.pl = s.pb = s.pr = 0;
         }),
         Path::Tiles, "2x2 windows that tile"},
        {with([](ConvSpec& s) {
             s.kh = s.kw = 1, s.sh = s.sw = 2, s.w = 9;
             s.pt = s.pl = s.pb = s.pr = 0;
         }),
         Path::Strided1x1, "1x1 stride 2"}};
    auto bits = [](float v) { return std::bit_cast<uint32_t>(v); };
    for (const auto& [s, path, what] : cases) {
        SCOPED_TRACE(what);
        ConvCase c;
        c.op(OpKind::Conv2d, {c.input("x", Shape{s.n, s.c, s.h, s.w})}, s.attrs());
        const Conv2dGeometry g = conv2d_geometry(c.g, c.n());
        const bool vectors = g.im2col_in_vector_rows(), padded = g.im2col_through_padded_plane();
        switch (path) {
            case Path::Vectors:
                ASSERT_TRUE(vectors);
                break;
            case Path::Padded:
                ASSERT_TRUE(padded);
                break;
            case Path::Rows:
                ASSERT_FALSE(vectors || padded || g.tiles() || g.strided_pointwise());
                break;
            case Path::Tiles:
                ASSERT_TRUE(g.tiles());
                break;
            case Path::Strided1x1:
                ASSERT_TRUE(g.strided_pointwise());
                break;
        }
        const int64_t oh = s.oh(), ow = s.ow(), plane = oh * ow, ld = plane + 5;
        const int64_t rows = s.c * s.kh * s.kw;
        // Calls f(column row, position, input index or -1 in padding) for every column entry.
        auto for_each_entry = [&](auto f) {
            for (int64_t ch = 0; ch < s.c; ++ch)
                for (int64_t i = 0; i < s.kh; ++i)
                    for (int64_t j = 0; j < s.kw; ++j)
                        for (int64_t y = 0; y < oh; ++y)
                            for (int64_t x = 0; x < ow; ++x) {
                                const int64_t ih = y * s.sh - s.pt + i * s.dh;
                                const int64_t iw = x * s.sw - s.pl + j * s.dw;
                                const bool in = ih >= 0 && ih < s.h && iw >= 0 && iw < s.w;
                                f((ch * s.kh + i) * s.kw + j, y * ow + x,
                                  in ? (ch * s.h + ih) * s.w + iw : int64_t{-1});
                            }
        };
        const Floats x = c.random(static_cast<size_t>(s.c * s.h * s.w));
        Floats col(static_cast<size_t>(rows * ld), 7.0f);
        cpu::im2col(x.data(), g, col.data(), ld);
        int wrong = 0;
        for_each_entry([&](int64_t r, int64_t p, int64_t xi) {
            const float want = xi >= 0 ? x[xi] : 0.0f;
            if (bits(col[r * ld + p]) != bits(want) && wrong++ < 5)
                ADD_FAILURE() << "im2col row " << r << " position " << p << ": " << col[r * ld + p]
                              << ", want " << want;
        });
        EXPECT_EQ(wrong, 0);
        for (int64_t r = 0; r < rows; ++r)  // nothing past the plane's columns
            for (int64_t p = plane; p < ld; ++p) ASSERT_EQ(col[r * ld + p], 7.0f) << r;

        Floats cols = c.random(col.size());
        for (size_t k = 0; k < cols.size(); k += 7) cols[k] = k % 2 ? -0.0f : 0.0f;
        const Floats start = c.random(x.size());
        for (const bool accumulate : {false, true}) {
            SCOPED_TRACE(accumulate ? "accumulating" : "fresh");
            std::vector<float> want(x.size());
            for (size_t k = 0; k < want.size(); ++k) want[k] = accumulate ? start[k] : 0.0f;
            for_each_entry([&](int64_t r, int64_t p, int64_t xi) {  // in order: channel, i, j
                if (xi >= 0) want[xi] += cols[r * ld + p];
            });
            Floats dx = accumulate ? start : Floats(x.size(), std::nanf(""));
            cpu::col2im(cols.data(), ld, g, dx.data(), accumulate);
            wrong = 0;
            for (size_t k = 0; k < dx.size(); ++k)
                if (bits(dx[k]) != bits(want[k]) && wrong++ < 5)
                    ADD_FAILURE() << "col2im input " << k << ": " << dx[k] << ", want " << want[k];
            EXPECT_EQ(wrong, 0);
        }
    }
}

// Small planes run several images per GEMM (Conv2dGeometry::images_per_gemm), their columns side
// by side, with a shorter last chunk when the batch does not divide: a 3×3 grouped and a 1×1
// convolution of 5 images in chunks of 3 + 2 and 4 + 1, forward against the float64 reference,
// gradients against central differences, and accumulation into an existing input gradient.
TEST(ConvOps, Conv2dImagesSideBySideInOneGemm) {
    const ConvSpec grouped = padded3x3(5, 4, 10, 10, 6, 2);
    const ConvSpec pointwise{.n = 5, .c = 3, .h = 8, .w = 8, .out = 4, .kh = 1, .kw = 1};
    ConvSpec pointwise2x2 = pointwise;
    pointwise2x2.n = 7, pointwise2x2.h = pointwise2x2.w = 2;
    for (const auto& [s, per_gemm, what] :
         {std::tuple{grouped, 3, "3x3, groups 2, 10x10 planes"},
          std::tuple{pointwise, 4, "1x1, 8x8 planes"},
          std::tuple{pointwise2x2, 7, "1x1, 2x2 planes: rows of 4 floats"}}) {
        check_conv_path(s, what, [&, per_gemm = per_gemm](const Conv2dGeometry& geo) {
            ASSERT_EQ(geo.images_per_gemm(), per_gemm);
        });
    }
}

// Products of 8 or 16 columns (2×2 planes of two and of four images) run few_columns_product
// (engine/cpu/few_columns.cpp): Y = W·cols and, where Wᵀ is small, cols = Wᵀ·dY; a 3×3 and a
// 1×1 convolution, forward against the float64 reference, gradients against central
// differences, and accumulation into an existing input gradient.
TEST(ConvOps, Conv2dProductsOfFewColumns) {
    const ConvSpec pointwise{.n = 4, .c = 40, .h = 2, .w = 2, .out = 36, .kh = 1, .kw = 1};
    for (const auto& [s, columns, what] :
         {std::tuple{padded3x3(2, 12, 2, 2, 40, 1), 8, "3x3, 12 -> 40 on 2x2 planes, 2 images"},
          std::tuple{pointwise, 16, "1x1, 40 -> 36 on 2x2 planes, 4 images"}}) {
        const ConvSpec& spec = s;
        check_conv_path(s, what, [&, columns = columns](const Conv2dGeometry& geo) {
            ASSERT_FALSE(geo.grouped_direct());
            ASSERT_EQ(geo.images_per_gemm() * spec.oh() * spec.ow(), columns);
            ASSERT_TRUE(cpu::few_columns_apply(false, spec.out, columns, geo.patch()));  // W·cols
            ASSERT_TRUE(cpu::few_columns_apply(true, geo.patch(), columns, spec.out));   // Wᵀ·dY
        });
    }
}

// At stride 1 the input gradient is a correlation of dY with the flipped kernel
// (Conv2dGeometry::input_grad_by_correlation) instead of Wᵀ·dY folded back by col2im: chunks of
// several images and of one (whose GEMM writes dX itself), a shorter last chunk, two groups, a
// dilated window with asymmetric padding, dY's columns through a padded plane and row by row
// (a plane too large for the stack) — forward against the float64 reference, gradients against
// central differences, and accumulation into an existing input gradient. And where it is not
// taken: strides, padding past the window's extent, many more outputs than inputs, and too few
// columns per output channel.
TEST(ConvOps, Conv2dInputGradientAsACorrelationOfDy) {
    ConvSpec dilated{.n = 2, .c = 4, .h = 9, .w = 7, .out = 2, .kh = 3, .kw = 2, .dh = 2};
    dilated.pt = 2, dilated.pl = 0, dilated.pb = 1, dilated.pr = 1;
    ConvSpec large{.n = 1, .c = 2, .h = 90, .w = 100, .out = 1, .kh = 3, .kw = 3};
    large.pt = large.pl = large.pb = large.pr = 1;
    for (const auto& [s, per_gemm, what] :
         {std::tuple{padded3x3(2, 4, 6, 6, 2, 1), 2, "6x6, both images in one GEMM"},
          std::tuple{padded3x3(1, 4, 8, 8, 2, 1), 1, "one image: the GEMM writes dX"},
          std::tuple{padded3x3(5, 8, 10, 10, 4, 2), 3, "groups 2, chunks of 3 + 2"},
          std::tuple{dilated, 2, "3x2, dilation 2, asymmetric padding"},
          std::tuple{large, 1, "90x100: dY's columns row by row"}}) {
        const ConvSpec& spec = s;
        check_conv_path(s, what, [&, per_gemm = per_gemm](const Conv2dGeometry& geo) {
            ASSERT_TRUE(geo.input_grad_by_correlation());
            ASSERT_EQ(geo.images_per_gemm(), per_gemm);
            const Conv2dGeometry t = geo.input_grad_geometry();
            EXPECT_EQ(std::tuple(t.c, t.h, t.w, t.out_c, t.oh, t.ow),
                      std::tuple(spec.out / spec.groups, spec.oh(), spec.ow(), spec.c / spec.groups,
                                 spec.h, spec.w));
            EXPECT_EQ(t.im2col_through_padded_plane() || t.im2col_in_vector_rows(), spec.h < 60);
        });
    }
    ConvSpec strided = padded3x3(2, 4, 8, 8, 2, 1);
    strided.sw = 2;
    ConvSpec wide_pad = padded3x3(2, 4, 8, 8, 2, 1);
    wide_pad.pl = 3;
    for (const auto& [s, what] :
         {std::tuple{strided, "stride 2 across"}, std::tuple{wide_pad, "padding 3 on a 3x3"},
          std::tuple{padded3x3(2, 4, 8, 8, 3, 1), "3 outputs from 4 inputs"},
          std::tuple{padded3x3(2, 36, 2, 2, 16, 1), "2x2 planes: 8 columns for 16 outputs"}}) {
        SCOPED_TRACE(what);
        ConvCase c;
        c.op(OpKind::Conv2d, {c.input("x", Shape{s.n, s.c, s.h, s.w})}, s.attrs());
        EXPECT_FALSE(conv2d_geometry(c.g, c.n()).input_grad_by_correlation());
        check_conv(s, what);
    }
}

// Windows that tile the input without overlap and have rows of 8 or more (ViT's patch
// embeddings) copy whole window rows into P [positions, C·kh·kw] and take its transpose
// (Conv2dGeometry::patches): planes the windows cover exactly and planes with rows and columns
// no window reaches (their gradient is 0, or what was there), chunks of several images with a
// shorter last one, no bias — forward against the float64 reference, gradients against central
// differences, and accumulation into an existing input gradient. And the windows that keep
// im2col: rows shorter than 8, overlap, padding, groups.
TEST(ConvOps, Conv2dNonOverlappingWindowsAsPatches) {
    auto patchify = [](int64_t n, int64_t c, int64_t h, int64_t w, int64_t out, int64_t k) {
        return ConvSpec{
            .n = n, .c = c, .h = h, .w = w, .out = out, .kh = k, .kw = k, .sh = k, .sw = k};
    };
    ConvSpec rect = patchify(2, 2, 13, 19, 4, 8);
    rect.kh = rect.sh = 4, rect.bias = false;
    ConvSpec rows = patchify(9, 1, 2, 128, 2, 8);
    rows.kh = rows.sh = 1;
    for (const auto& [s, per_gemm, what] :
         {std::tuple{patchify(2, 3, 16, 16, 5, 8), 2, "8x8 windows covering 16x16"},
          std::tuple{patchify(5, 2, 20, 18, 3, 8), 5, "20x18: the last rows and columns unread"},
          std::tuple{rect, 2, "4x8 windows, no bias"},
          std::tuple{patchify(1, 2, 16, 16, 3, 16), 1, "one 16x16 window, one image"},
          std::tuple{rows, 8, "1x8 windows, 9 images: chunks of 8 and 1"}}) {
        check_conv_path(s, what, [&, per_gemm = per_gemm](const Conv2dGeometry& geo) {
            ASSERT_TRUE(geo.patches());
            ASSERT_EQ(geo.images_per_gemm(), per_gemm);
        });
    }
    ConvSpec overlap = patchify(2, 2, 16, 16, 3, 8);
    overlap.sw = 4;
    ConvSpec padded = patchify(2, 2, 14, 14, 3, 8);
    padded.pt = padded.pl = 1;
    ConvSpec grouped = patchify(2, 4, 16, 16, 4, 8);
    grouped.groups = 2;
    for (const auto& [s, what] :
         {std::tuple{patchify(2, 2, 16, 16, 3, 4), "4x4 windows: rows too short"},
          std::tuple{overlap, "stride 4 across 8 columns"}, std::tuple{padded, "padding"},
          std::tuple{grouped, "groups 2"}}) {
        SCOPED_TRACE(what);
        ConvCase c;
        c.op(OpKind::Conv2d, {c.input("x", Shape{s.n, s.c, s.h, s.w})}, s.attrs());
        EXPECT_FALSE(conv2d_geometry(c.g, c.n()).patches());
    }
}

// Shorter windows that tile the input without overlap (ConvNeXt's 4×4 stem and 2×2
// downsampling) keep im2col, copying each input row once (Conv2dGeometry::tiles): kernels 2 and
// 4 wide (their shuffles, with output rows of whole vectors, partial ones and longer than the
// stack buffers), other widths and heights, planes the windows do not cover, several images a
// product, groups — forward against the float64 reference, gradients against central
// differences, and accumulation into an existing input gradient.
TEST(ConvOps, Conv2dTilingWindowsKeepIm2col) {
    auto tiling = [](int64_t n, int64_t c, int64_t h, int64_t w, int64_t out, int64_t kh,
                     int64_t kw) {
        return ConvSpec{
            .n = n, .c = c, .h = h, .w = w, .out = out, .kh = kh, .kw = kw, .sh = kh, .sw = kw};
    };
    ConvSpec grouped = tiling(2, 4, 8, 8, 6, 2, 2);
    grouped.groups = 2;
    ConvSpec no_bias = tiling(3, 5, 16, 16, 4, 2, 2);
    no_bias.bias = false;
    for (const auto& [s, what] :
         {std::tuple{tiling(2, 3, 8, 8, 4, 2, 2), "2x2 on 8x8: rows of 4"},
          std::tuple{no_bias, "2x2 on 16x16, 3 images, no bias: rows of 8"},
          std::tuple{tiling(2, 2, 9, 23, 3, 2, 2), "2x2 on 9x23: the last row and column unread"},
          std::tuple{tiling(1, 2, 4, 40, 3, 2, 2), "2x2 across 40: rows of 20"},
          std::tuple{tiling(2, 3, 16, 16, 4, 4, 4), "4x4 on 16x16"},
          std::tuple{tiling(2, 2, 6, 46, 3, 4, 4), "4x4 on 6x46: rows of 11, two rows unread"},
          std::tuple{tiling(1, 1, 4, 1204, 2, 4, 4), "4x4 across 1204: rows of 301"},
          std::tuple{tiling(2, 2, 9, 9, 3, 3, 3), "3x3 on 9x9"},
          std::tuple{tiling(2, 2, 6, 5, 3, 2, 1), "2x1"}, std::tuple{grouped, "groups 2"}}) {
        check_conv_path(s, what, [](const Conv2dGeometry& geo) {
            ASSERT_TRUE(geo.tiles());
            ASSERT_FALSE(geo.patches());
            ASSERT_FALSE(geo.grouped_direct());
        });
    }
    ConvSpec padded = tiling(2, 2, 8, 8, 3, 2, 2);
    padded.pt = padded.pl = 1;
    ConvSpec dilated = tiling(2, 2, 8, 8, 3, 2, 2);
    dilated.dh = dilated.dw = 2;
    ConvSpec overlap = tiling(2, 2, 8, 8, 3, 3, 3);
    overlap.sh = overlap.sw = 2;
    for (const auto& [s, what] :
         {std::tuple{padded, "padding"}, std::tuple{dilated, "dilation"},
          std::tuple{overlap, "3x3 at stride 2"}, std::tuple{tiling(2, 2, 8, 8, 3, 1, 1), "1x1"}}) {
        SCOPED_TRACE(what);
        ConvCase c;
        c.op(OpKind::Conv2d, {c.input("x", Shape{s.n, s.c, s.h, s.w})}, s.attrs());
        EXPECT_FALSE(conv2d_geometry(c.g, c.n()).tiles());
    }
}

TEST(ConvOps, Conv2dGroupsAndDepthwise) {
    check_conv({.n = 2,
                .c = 4,
                .h = 5,
                .w = 5,
                .out = 6,
                .kh = 3,
                .kw = 3,
                .pt = 1,
                .pl = 1,
                .pb = 1,
                .pr = 1,
                .groups = 2},
               "groups 2");
    check_conv({.n = 2,
                .c = 3,
                .h = 5,
                .w = 6,
                .out = 3,
                .kh = 3,
                .kw = 3,
                .pt = 1,
                .pl = 1,
                .pb = 1,
                .pr = 1,
                .groups = 3},
               "depthwise");
    check_conv({.n = 2,
                .c = 2,
                .h = 6,
                .w = 6,
                .out = 4,
                .kh = 3,
                .kw = 3,
                .sh = 2,
                .sw = 2,
                .dh = 1,
                .dw = 2,
                .pt = 1,
                .pl = 2,
                .pb = 0,
                .pr = 1,
                .groups = 2},
               "depthwise, multiplier 2, stride 2, dilation, asymmetric padding");
    check_conv(
        {.n = 1, .c = 4, .h = 4, .w = 3, .out = 4, .kh = 2, .kw = 2, .groups = 4, .bias = false},
        "depthwise 2x2 without bias");
    // Stride-1 rows take the fused kernel-row path (kw = 3, 5, 7): its edges and interiors.
    check_conv({.n = 2,
                .c = 2,
                .h = 6,
                .w = 7,
                .out = 4,
                .kh = 3,
                .kw = 5,
                .sh = 2,
                .sw = 1,
                .dh = 1,
                .dw = 2,
                .pt = 1,
                .pl = 3,
                .pb = 0,
                .pr = 2,
                .groups = 2},
               "depthwise 3x5, dilation 2 across: no interior");
    check_conv({.n = 2,
                .c = 2,
                .h = 6,
                .w = 16,
                .out = 4,
                .kh = 3,
                .kw = 5,
                .sh = 2,
                .sw = 1,
                .dh = 1,
                .dw = 2,
                .pt = 1,
                .pl = 3,
                .pb = 0,
                .pr = 2,
                .groups = 2},
               "depthwise 3x5, dilation 2 across, wide rows");
    check_conv({.n = 1,
                .c = 3,
                .h = 3,
                .w = 12,
                .out = 3,
                .kh = 1,
                .kw = 7,
                .pt = 0,
                .pl = 3,
                .pb = 0,
                .pr = 3,
                .groups = 3},
               "depthwise 1x7");
    // Multiplier 1 with short rows runs channels-last in blocks of 16 channels
    // (Conv2dGeometry::depthwise_blocked): two blocks, the second partly empty, stride 2,
    // dilation and asymmetric padding, a 5x5 kernel, a stride across only; long rows keep the
    // row kernel.
    check_conv({.n = 2,
                .c = 20,
                .h = 7,
                .w = 6,
                .out = 20,
                .kh = 3,
                .kw = 3,
                .sh = 2,
                .sw = 2,
                .dh = 2,
                .dw = 1,
                .pt = 2,
                .pl = 1,
                .pb = 1,
                .pr = 0,
                .groups = 20},
               "depthwise blocked: 20 channels, stride 2, dilation, asymmetric padding");
    check_conv({.n = 1,
                .c = 17,
                .h = 5,
                .w = 5,
                .out = 17,
                .kh = 5,
                .kw = 5,
                .pt = 2,
                .pl = 2,
                .pb = 2,
                .pr = 2,
                .groups = 17},
               "depthwise blocked 5x5, 17 channels");
    // ConvNeXt's last stages: a 7×7 window padded by 3 on planes smaller than it, so most taps
    // read padding, which the blocks skip (output positions and, backward, weight taps).
    check_conv({.n = 2,
                .c = 18,
                .h = 2,
                .w = 3,
                .out = 18,
                .kh = 7,
                .kw = 7,
                .pt = 3,
                .pl = 3,
                .pb = 3,
                .pr = 3,
                .groups = 18},
               "depthwise blocked 7x7 on 2x3 planes: most taps read padding");
    check_conv({.n = 2,
                .c = 2,
                .h = 3,
                .w = 40,
                .out = 2,
                .kh = 3,
                .kw = 3,
                .pt = 1,
                .pl = 1,
                .pb = 1,
                .pr = 1,
                .groups = 2},
               "depthwise, long stride-1 rows: zero-padded planes");
    // The padded planes (Conv2dGeometry::depthwise_padded) with every edge their geometry
    // handles: rows not a whole number of vectors, asymmetric and oversized padding (outputs
    // wider and taller than the input), kh != kw, 5- and 7-wide kernels, no bias.
    check_conv({.n = 2,
                .c = 3,
                .h = 6,
                .w = 17,
                .out = 3,
                .kh = 5,
                .kw = 5,
                .pt = 3,
                .pl = 0,
                .pb = 1,
                .pr = 4,
                .groups = 3},
               "depthwise padded 5x5, asymmetric padding, 17 columns");
    check_conv({.n = 1,
                .c = 2,
                .h = 4,
                .w = 20,
                .out = 2,
                .kh = 2,
                .kw = 7,
                .pt = 2,
                .pl = 6,
                .pb = 2,
                .pr = 1,
                .groups = 2,
                .bias = false},
               "depthwise padded 2x7, padding wider than the kernel, no bias");
    check_conv({.n = 3,
                .c = 4,
                .h = 16,
                .w = 16,
                .out = 4,
                .kh = 3,
                .kw = 3,
                .pt = 1,
                .pl = 1,
                .pb = 1,
                .pr = 1,
                .groups = 4},
               "depthwise padded 3x3 on 16x16 planes, three images");
    // Rows of 15-16 and 25-32 outputs run as 16-float vectors on AVX-512 (forward), with a part
    // of the last one stored; input-gradient rows of more than 8 columns likewise. Rows of 8 to
    // 14 take the blocks: 20 channels (a partial second block), and 273 input positions (the
    // input gradient's chunk of 256 ends inside a row, and inside a group of 4 positions taken
    // at once).
    auto same = [](int64_t n, int64_t c, int64_t h, int64_t w, int64_t k) {
        const int64_t p = k / 2;
        return ConvSpec{.n = n,
                        .c = c,
                        .h = h,
                        .w = w,
                        .out = c,
                        .kh = k,
                        .kw = k,
                        .pt = p,
                        .pl = p,
                        .pb = p,
                        .pr = p,
                        .groups = c};
    };
    ConvSpec two_vectors = same(1, 2, 9, 28, 7);
    two_vectors.bias = false;
    for (const auto& [s, blocked, what] :
         {std::tuple{same(2, 3, 11, 15, 5), false, "depthwise padded 5x5, rows of 15 in 16 lanes"},
          std::tuple{two_vectors, false, "depthwise padded 7x7, rows of 28: two vectors of 16"},
          std::tuple{same(2, 20, 9, 12, 7), true, "depthwise blocked 7x7 on 9x12 planes"},
          std::tuple{same(1, 18, 21, 13, 3), true, "depthwise blocked 3x3 on 21x13 planes"}})
        check_conv_path(s, what, [blocked = blocked](const Conv2dGeometry& g) {
            ASSERT_EQ(g.depthwise_blocked(), blocked);
            ASSERT_EQ(g.depthwise_padded(), !blocked);
        });
    // Strided: the input plane in column phases, the input gradient gathered phase by phase.
    check_conv({.n = 2,
                .c = 3,
                .h = 9,
                .w = 33,
                .out = 3,
                .kh = 3,
                .kw = 3,
                .sh = 2,
                .sw = 2,
                .pt = 1,
                .pl = 1,
                .pb = 1,
                .pr = 1,
                .groups = 3},
               "depthwise padded 3x3 stride 2, 17 columns");
    check_conv({.n = 1,
                .c = 2,
                .h = 7,
                .w = 40,
                .out = 2,
                .kh = 5,
                .kw = 5,
                .sh = 1,
                .sw = 2,
                .pt = 2,
                .pl = 0,
                .pb = 1,
                .pr = 3,
                .groups = 2},
               "depthwise padded 5x5 stride 1x2, asymmetric padding");
    check_conv({.n = 2,
                .c = 2,
                .h = 8,
                .w = 50,
                .out = 2,
                .kh = 4,
                .kw = 3,
                .sh = 3,
                .sw = 3,
                .pt = 0,
                .pl = 1,
                .pb = 2,
                .pr = 0,
                .groups = 2,
                .bias = false},
               "depthwise padded 4x3 stride 3, no bias");
    check_conv({.n = 1,
                .c = 2,
                .h = 5,
                .w = 36,
                .out = 2,
                .kh = 7,
                .kw = 7,
                .sh = 2,
                .sw = 2,
                .pt = 3,
                .pl = 6,
                .pb = 3,
                .pr = 1,
                .groups = 2},
               "depthwise padded 7x7 stride 2, padding wider than half the kernel");
    check_conv({.n = 2,
                .c = 3,
                .h = 5,
                .w = 18,
                .out = 3,
                .kh = 3,
                .kw = 3,
                .sh = 1,
                .sw = 2,
                .pt = 1,
                .pl = 1,
                .pb = 1,
                .pr = 1,
                .groups = 3},
               "depthwise, 9 columns at stride 2 across: padded planes");
}

// The one layout change of the CPU kernels (cpu::transpose): every size from 1 to 41 on each
// side, so whole 16 × 16 blocks (AVX-512) with their edges of 1 to 15 by eights, whole 8 × 8
// blocks, edges of one float (a float at a time) and of 2 to 7 (blocks overlapping the one before
// them), 4 × 4 blocks, and 16 × 4 ↔ 4 × 16 packed (2×2 planes) all run, with and without adding
// to what is there; leading dimensions wider than the matrices and equal to them, and every float
// outside the result must be left as it was.
TEST(ConvOps, TransposeCoversEveryEdgeAndWritesNothingElse) {
    for (const bool add : {false, true})
        for (const bool packed : {false, true})  // leading dimensions of the matrices' own widths
            for (int64_t rows = 1; rows < 42; ++rows)
                for (int64_t cols = 1; cols < 42; ++cols) {
                    const int64_t lda = packed ? cols : cols + 3, ldb = packed ? rows : rows + 5;
                    std::vector<float> a(static_cast<size_t>(rows * lda));
                    for (size_t i = 0; i < a.size(); ++i)
                        a[i] = static_cast<float>(i) * 0.5f + 1.0f;
                    std::vector<float> b(static_cast<size_t>(cols * ldb + 7));
                    for (size_t i = 0; i < b.size(); ++i) b[i] = -static_cast<float>(i) - 0.25f;
                    const std::vector<float> before = b;
                    cpu::transpose(a.data(), lda, rows, cols, b.data(), ldb, add);
                    int wrong = 0;
                    for (int64_t i = 0; i < static_cast<int64_t>(b.size()); ++i) {
                        const int64_t j = i / ldb, r = i % ldb;
                        const size_t at = static_cast<size_t>(i);
                        float want = before[at];
                        if (j < cols && r < rows) {
                            const float v = a[static_cast<size_t>(r * lda + j)];
                            want = add ? before[at] + v : v;
                        }
                        wrong += b[at] != want;
                    }
                    EXPECT_EQ(wrong, 0) << rows << " x " << cols << (add ? " added" : "")
                                        << (packed ? " packed" : "");
                }
}

// Groups of whole 8-float vectors of input and output channels run the direct kernel on
// channels-last padded planes (conv_grouped.cpp): both tile shapes (16 channels a group: two
// vectors by 6 positions; 8: one by 12), positions that do not fill the last tile, the input
// gradient gathered at stride 1 and 2 (phases), dilation, asymmetric padding, input rows and
// columns no window reaches, chunks of images (grouped_images) with a remainder, the short tiles
// of 2×2 planes, and no bias.
TEST(ConvOps, Conv2dGroupedDirectKernel) {
    // padded3x3, then what differs.
    const auto spec = padded3x3;
    std::vector<std::pair<ConvSpec, const char*>> cases;
    cases.push_back({spec(2, 16, 6, 6, 16, 2), "8 in, 8 out a group, 3x3 padded"});
    cases.push_back({spec(2, 48, 6, 6, 16, 2), "24 in, 8 out a group: dW in tiles of 12 rows"});
    ConvSpec s2 = spec(3, 32, 7, 7, 32, 2);
    s2.sh = s2.sw = 2;
    cases.push_back({s2, "16 in, 16 out a group, stride 2"});
    ConvSpec dil = spec(1, 16, 5, 9, 32, 2);
    std::tie(dil.kw, dil.sh, dil.dh, dil.dw) = std::tuple{2, 2, 2, 2};
    std::tie(dil.pt, dil.pl, dil.pb, dil.pr, dil.bias) = std::tuple{2, 0, 1, 3, false};
    cases.push_back({dil, "8 in, 16 out a group, dilation 2, asymmetric padding, no bias"});
    ConvSpec unread = spec(2, 24, 8, 8, 48, 3);
    unread.sh = unread.sw = 2;
    unread.pt = unread.pl = unread.pb = unread.pr = 0;
    cases.push_back({unread, "8 in, 16 out a group, stride 2, last row and column unread"});
    cases.push_back({spec(2, 32, 4, 4, 64, 2), "16 in, 32 out a group: two tiles of channels"});
    cases.push_back({spec(2, 48, 5, 5, 64, 2),
                     "24 in, 32 out a group: AVX-512's dW tiles of 12 rows by two vectors"});
    ConvSpec gathered = spec(2, 16, 7, 6, 16, 2);
    std::tie(gathered.kw, gathered.dh, gathered.dw) = std::tuple{2, 2, 3};
    std::tie(gathered.pt, gathered.pb, gathered.pr) = std::tuple{2, 0, 2};
    cases.push_back(
        {gathered, "stride 1 (the input gradient gathered), dilation, asymmetric padding"});
    cases.push_back({spec(5, 16, 8, 8, 16, 2),
                     "five 8x8 outputs: chunks of four images and one, tiles across images"});
    cases.push_back({spec(2, 32, 2, 2, 32, 2), "2x2 planes: tiles of 4 positions by 16 channels"});
    cases.push_back({spec(1, 16, 2, 2, 16, 2), "one 2x2 plane: a tile of 8 rows, half empty"});
    // Packed groups: 8 in, 8 out a group, two to a 16-float vector on AVX-512 builds, an odd
    // group count leaving the last group to the 8-float tiles; 4 in, 4 out, groups a multiple of
    // 4, four to a vector with AVX-512, two with AVX2.
    auto strided = [](ConvSpec s) {
        s.sh = s.sw = 2;
        return s;
    };
    auto dilated = [](ConvSpec s) {
        std::tie(s.kh, s.kw, s.dh, s.dw) = std::tuple{2, 2, 2, 3};
        std::tie(s.pt, s.pl, s.pb, s.pr, s.bias) = std::tuple{1, 2, 0, 1, false};
        return s;
    };
    cases.push_back({spec(2, 24, 6, 6, 24, 3), "three groups of 8: a pair and one alone"});
    cases.push_back({strided(spec(3, 32, 7, 7, 32, 4)),
                     "four groups of 8, stride 2: two pairs, the gradient in phases"});
    cases.push_back({dilated(spec(2, 40, 6, 9, 40, 5)),
                     "five groups of 8, 2x2 dilated, asymmetric padding, no bias"});
    cases.push_back({spec(3, 48, 2, 2, 48, 6), "six groups of 8 on 2x2 planes: tiles of 8 rows"});
    cases.push_back({spec(2, 16, 6, 6, 16, 4), "four groups of 4, 3x3 padded"});
    cases.push_back(
        {strided(spec(3, 32, 7, 7, 32, 8)), "eight groups of 4, stride 2: the gradient in phases"});
    cases.push_back({dilated(spec(2, 48, 6, 9, 48, 12)),
                     "twelve groups of 4, 2x2 dilated, asymmetric padding, no bias"});
    cases.push_back({spec(3, 16, 2, 2, 16, 4), "four groups of 4 on 2x2 planes"});
    cases.push_back({spec(5, 32, 8, 8, 32, 8), "eight groups of 4, chunks of four images and one"});
    ConvSpec skip = spec(2, 32, 7, 6, 16, 2);
    std::tie(skip.kh, skip.kw, skip.sh, skip.sw) = std::tuple{1, 1, 2, 2};
    skip.pt = skip.pl = skip.pb = skip.pr = 0;
    cases.push_back({skip, "1x1 at stride 2: phases no tap reaches get a zero gradient"});
    for (const auto& [s, what] : cases) {
        Graph g;
        const NodeId n =
            g.add_node("conv", OpKind::Conv2d,
                       Ids{g.add_input("x", DType::F32, Shape{s.n, s.c, s.h, s.w})}, s.attrs());
        const Conv2dGeometry geo = conv2d_geometry(g, g.node(n));
        ASSERT_TRUE(geo.grouped_direct()) << what;
        if (s.n == 5) {
            EXPECT_EQ(geo.grouped_images(), 4);  // 256 columns of 64 positions
        }
        check_conv(s, what);
    }
    // Two groups of 4 channels (not a whole pack) stay on im2col + GEMM; so do ungrouped
    // convolutions with more than 64
    // outputs or more than 64K floats of weights, and 1×1 ones (at stride 1 their input is the
    // GEMM's operand as it stands; at stride 2 im2col was faster).
    Graph g;
    const ValueId x = g.add_input("x", DType::F32, Shape{1, 8, 4, 4});
    const ValueId wide = g.add_input("wide", DType::F32, Shape{1, 128, 4, 4});
    for (const auto& [in, out, kernel, groups, stride, what] :
         {std::tuple{x, 8, 3, 2, 1, "two groups of 4"}, std::tuple{x, 72, 3, 1, 1, "72 outputs"},
          std::tuple{x, 16, 1, 1, 1, "1x1 at stride 1"},
          std::tuple{x, 16, 1, 1, 2, "1x1 at stride 2"},
          std::tuple{wide, 64, 3, 1, 1, "64 outputs of 128 x 3 x 3 weights: 73,728 floats"}}) {
        const NodeId n = g.add_node(what, OpKind::Conv2d, Ids{in},
                                    {{"out_channels", int64_t{out}},
                                     {"kernel", int64_t{kernel}},
                                     {"stride", int64_t{stride}},
                                     {"groups", int64_t{groups}}});
        const Conv2dGeometry geo = conv2d_geometry(g, g.node(n));
        EXPECT_FALSE(geo.grouped_direct()) << what;
        EXPECT_FALSE(geo.ungrouped_direct_fits()) << what;
    }
}

// The geometry the op works out for a convolution of `s` on an input of its own.
Conv2dGeometry geometry_of(const ConvSpec& s) {
    Graph graph;
    const NodeId node =
        graph.add_node("conv", OpKind::Conv2d,
                       Ids{graph.add_input("x", DType::F32, Shape{s.n, s.c, s.h, s.w})}, s.attrs());
    return conv2d_geometry(graph, graph.node(node));
}

// dX and dW of a convolution in float64, straight from the definition.
void conv_backward_reference(const ConvSpec& s, const Floats& x, const Floats& wt, const Floats& dy,
                             std::vector<double>& dx, std::vector<double>& dw) {
    dx.assign(x.size(), 0.0);
    dw.assign(wt.size(), 0.0);
    for_each_tap(s, [&](size_t yi, size_t xi, size_t wi) {
        dx[xi] += double(dy[yi]) * wt[wi];
        dw[wi] += double(dy[yi]) * x[xi];
    });
}

// An ungrouped convolution with few outputs runs the direct kernel as one group, its tiles in
// parallel. The kernel itself, called as the op calls it: the output against the float64
// reference, the gradients against the float64 definition (and dX added onto what was there),
// and the same bits at one thread and at two. On AVX-512 builds the cases take the 16-float
// tiles where the channels allow (32 outputs: two vectors; 16: one; 24 inputs: 8-float ones for
// the input gradient) and both row counts of the weight gradient's (24 inputs: twelve; 16 and
// 32: eight and sixteen).
TEST(ConvOps, Conv2dUngroupedDirectKernel) {
    ConvSpec strided = padded3x3(2, 32, 7, 6, 16, 1);
    strided.sh = strided.sw = 2;
    for (const auto& [s, what] :
         {std::pair{padded3x3(2, 16, 8, 8, 32, 1), "16 in, 32 out"},
          std::pair{padded3x3(3, 24, 5, 5, 64, 1), "64 out, chunks of 3 images"},
          std::pair{strided, "32 in, 16 out, 3x3 at stride 2"}}) {
        SCOPED_TRACE(what);
        const Conv2dGeometry g = geometry_of(s);
        ASSERT_TRUE(g.ungrouped_direct_fits());
        EXPECT_TRUE(g.grouped_direct());
        SplitMix64 rng(7);
        auto draw = [&](int64_t count) {
            Floats v(static_cast<size_t>(count));
            for (float& f : v) f = rng.symmetric();
            return v;
        };
        const Floats x = draw(s.n * s.c * s.h * s.w), wt = draw(s.out * s.c * s.kh * s.kw),
                     b = draw(s.out), dy = draw(s.n * s.out * s.oh() * s.ow()),
                     start = draw(s.n * s.c * s.h * s.w);
        std::vector<float> ws(static_cast<size_t>(
            std::max(g.grouped_slice_floats(false), g.grouped_slice_floats(true))));
        struct Run {
            Floats y, dx, dw;
        };
        auto run = [&](int threads) {
            set_cpu_threads(threads);
            Run r{Floats(dy.size()), start, Floats(wt.size())};
            cpu::grouped_direct_forward(x.data(), wt.data(), b.data(), g, r.y.data(), ws.data());
            cpu::grouped_direct_backward(x.data(), dy.data(), wt.data(), g, r.dw.data(),
                                         r.dx.data(), /*accumulate=*/true, ws.data());
            set_cpu_threads(1);
            return r;
        };
        const Run one = run(1), two = run(2);
        EXPECT_EQ(std::memcmp(one.y.data(), two.y.data(), one.y.size() * 4), 0);
        EXPECT_EQ(std::memcmp(one.dx.data(), two.dx.data(), one.dx.size() * 4), 0);
        EXPECT_EQ(std::memcmp(one.dw.data(), two.dw.data(), one.dw.size() * 4), 0);
        const std::vector<double> y = conv_reference(s, x, wt, &b);
        std::vector<double> dx, dw;
        conv_backward_reference(s, x, wt, dy, dx, dw);
        for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(one.y[i], y[i], 1e-4) << i;
        for (size_t i = 0; i < dx.size(); ++i) ASSERT_NEAR(one.dx[i], start[i] + dx[i], 1e-4) << i;
        for (size_t i = 0; i < dw.size(); ++i) ASSERT_NEAR(one.dw[i], dw[i], 1e-4) << i;
    }
}

// More groups than the workspace has slices (Conv2dGeometry::kGroupedSlices): the workspace
// holds that many, the groups run in lanes that take a slice each in turn, one lane a thread,
// and the kernel writes nothing past the workspace the op declares. Whatever the thread count
// (one lane; two; three, which do not divide the groups), each group is computed whole in a
// slice and gives the same bits, against the float64 definition. On 2×2 and 3×3 planes most of
// a padded 3×3's taps fall in the padding, which the gradients' sums skip.
TEST(ConvOps, Conv2dGroupsTakeTheWorkspacesSlicesInTurn) {
    ConvSpec strided = padded3x3(3, 20 * 8, 5, 5, 20 * 8, 20);
    strided.sh = strided.sw = 2;
    const ConvSpec quads = padded3x3(3, 20 * 4, 4, 4, 20 * 4, 20);
    for (const auto& [s, what] :
         {std::pair{padded3x3(2, 20 * 16, 2, 2, 20 * 16, 20), "20 groups of 16, 2x2 planes"},
          std::pair{strided, "20 groups of 8 (10 pairs on AVX-512), stride 2 onto 3x3"},
          std::pair{quads, "20 groups of 4 (5 packs on AVX-512, 10 on AVX2), 4x4 planes"},
          std::pair{padded3x3(5, 18 * 32, 3, 3, 18 * 32, 18), "18 groups of 32, 3x3 planes"}}) {
        SCOPED_TRACE(what);
        const Conv2dGeometry g = geometry_of(s);
        ASSERT_TRUE(g.grouped_direct());
        EXPECT_EQ(g.grouped_slices(), Conv2dGeometry::kGroupedSlices);
        for (const bool backward : {false, true})
            EXPECT_EQ(g.grouped_workspace_floats(backward),
                      Conv2dGeometry::kGroupedSlices * g.grouped_slice_floats(backward));
        SplitMix64 rng(11);
        auto draw = [&](int64_t count) {
            Floats v(static_cast<size_t>(count));
            for (float& f : v) f = rng.symmetric();
            return v;
        };
        const Floats x = draw(s.n * s.c * s.h * s.w), wt = draw(s.out * (s.c / s.groups) * 9),
                     b = draw(s.out), dy = draw(s.n * s.out * s.oh() * s.ow());
        const int64_t declared =
            std::max(g.grouped_workspace_floats(false), g.grouped_workspace_floats(true));
        constexpr int64_t kGuard = 4096;
        static constexpr float kUntouched = 1234.5f;
        struct Run {
            Floats y, dx, dw;
        };
        auto run = [&](int threads) {
            set_cpu_threads(threads);
            Floats ws(static_cast<size_t>(declared + kGuard), kUntouched);
            Run r{Floats(dy.size()), Floats(x.size()), Floats(wt.size())};
            cpu::grouped_direct_forward(x.data(), wt.data(), b.data(), g, r.y.data(), ws.data());
            cpu::grouped_direct_backward(x.data(), dy.data(), wt.data(), g, r.dw.data(),
                                         r.dx.data(), /*accumulate=*/false, ws.data());
            set_cpu_threads(1);
            EXPECT_TRUE(std::all_of(ws.begin() + declared, ws.end(),
                                    [](float f) { return f == kUntouched; }))
                << "written past the declared workspace at " << threads << " threads";
            return r;
        };
        const Run one = run(1);
        for (const int threads : {2, 3}) {
            const Run other = run(threads);
            EXPECT_EQ(std::memcmp(one.y.data(), other.y.data(), one.y.size() * 4), 0) << threads;
            EXPECT_EQ(std::memcmp(one.dx.data(), other.dx.data(), one.dx.size() * 4), 0) << threads;
            EXPECT_EQ(std::memcmp(one.dw.data(), other.dw.data(), one.dw.size() * 4), 0) << threads;
        }
        const std::vector<double> y = conv_reference(s, x, wt, &b);
        std::vector<double> dx, dw;
        conv_backward_reference(s, x, wt, dy, dx, dw);
        for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(one.y[i], y[i], 1e-4) << i;
        for (size_t i = 0; i < dx.size(); ++i) ASSERT_NEAR(one.dx[i], dx[i], 1e-4) << i;
        for (size_t i = 0; i < dw.size(); ++i) ASSERT_NEAR(one.dw[i], dw[i], 1e-4) << i;
    }
}

// Groups of 8 input and 8 output channels: on AVX-512 builds two groups share each 16-float
// vector (conv_grouped.cpp's paired groups) and an odd count leaves the last group to the 8-float
// tiles. Each group's output, input gradient and weight gradient must have the bits the same
// group gives run on its own (a convolution of one group, which the 8-float tiles run): the
// paired kernel's sums run in the same order, each term one multiply-add.
TEST(ConvOps, Conv2dPairedGroupsGiveEachGroupsBits) {
    ConvSpec strided = padded3x3(2, 40, 7, 7, 40, 5);
    strided.sh = strided.sw = 2;
    for (const auto& [s, what] : {std::pair{padded3x3(3, 24, 6, 6, 24, 3), "three groups, 6x6"},
                                  std::pair{strided, "five groups, stride 2"},
                                  std::pair{padded3x3(2, 32, 2, 2, 32, 4), "four groups, 2x2"}}) {
        SCOPED_TRACE(what);
        struct Run {
            Floats y, dx, dw;
        };
        auto run = [&](const ConvSpec& spec, const Floats& x, const Floats& wt, const Floats& b,
                       const Floats& dy) {
            const Conv2dGeometry g = geometry_of(spec);
            EXPECT_TRUE(g.grouped_direct());
            Floats ws(static_cast<size_t>(
                std::max(g.grouped_workspace_floats(false), g.grouped_workspace_floats(true))));
            Run r{Floats(dy.size()), Floats(x.size()), Floats(wt.size())};
            cpu::grouped_direct_forward(x.data(), wt.data(), b.data(), g, r.y.data(), ws.data());
            cpu::grouped_direct_backward(x.data(), dy.data(), wt.data(), g, r.dw.data(),
                                         r.dx.data(), /*accumulate=*/false, ws.data());
            return r;
        };
        SplitMix64 rng(5);
        auto draw = [&](int64_t count) {
            Floats v(static_cast<size_t>(count));
            for (float& f : v) f = rng.symmetric();
            return v;
        };
        const int64_t image = s.h * s.w, plane = s.oh() * s.ow(), k = 8 * s.kh * s.kw;
        const Floats x = draw(s.n * s.c * image), wt = draw(s.out * k), b = draw(s.out),
                     dy = draw(s.n * s.out * plane);
        const Run all = run(s, x, wt, b, dy);
        // Channels [8·gi, 8·gi + 8) of every image of an NCHW tensor with `per` floats a channel.
        auto slice = [&](const Floats& v, int64_t channels, int64_t per, int64_t gi) {
            Floats out;
            for (int64_t n = 0; n < s.n; ++n) {
                const auto from = v.begin() + (n * channels + 8 * gi) * per;
                out.insert(out.end(), from, from + 8 * per);
            }
            return out;
        };
        auto range = [](const Floats& v, int64_t from, int64_t count) {
            return Floats(v.begin() + from, v.begin() + from + count);
        };
        ConvSpec one = s;
        one.c = one.out = 8;
        one.groups = 1;
        for (int64_t gi = 0; gi < s.groups; ++gi) {
            SCOPED_TRACE("group " + std::to_string(gi));
            const Run alone = run(one, slice(x, s.c, image, gi), range(wt, gi * 8 * k, 8 * k),
                                  range(b, gi * 8, 8), slice(dy, s.out, plane, gi));
            EXPECT_EQ(slice(all.y, s.out, plane, gi), alone.y);
            EXPECT_EQ(slice(all.dx, s.c, image, gi), alone.dx);
            EXPECT_EQ(range(all.dw, gi * 8 * k, 8 * k), alone.dw);
        }
    }
}

TEST(ConvOps, Conv2dPointwiseNeedsNoWorkspace) {
    check_conv({.n = 2, .c = 5, .h = 3, .w = 4, .out = 3, .kh = 1, .kw = 1}, "1x1");
    check_conv({.n = 2, .c = 4, .h = 3, .w = 4, .out = 6, .kh = 1, .kw = 1, .groups = 2},
               "1x1 groups 2");
    check_conv({.n = 2, .c = 3, .h = 5, .w = 5, .out = 2, .kh = 1, .kw = 1, .sh = 2, .sw = 2},
               "1x1 stride 2 (im2col)");
}

// A 1×1 convolution on 1×1 planes (a squeeze-and-excitation projection) runs as a linear layer
// on [N, C] with no workspace: with and without bias, one image and several, an input gradient
// added onto what was there; grouped ones and larger planes keep the gathered path.
TEST(ConvOps, Conv2dOnOneByOnePlanesIsALinearLayer) {
    for (const auto& [s, what] :
         {std::pair{ConvSpec{.n = 3, .c = 24, .h = 1, .w = 1, .out = 10, .kh = 1, .kw = 1},
                    "3 images, 24 -> 10"},
          std::pair{
              ConvSpec{.n = 1, .c = 7, .h = 1, .w = 1, .out = 5, .kh = 1, .kw = 1, .bias = false},
              "one image, no bias"}}) {
        SCOPED_TRACE(what);
        ConvCase c;
        c.op(OpKind::Conv2d, {c.input("x", Shape{s.n, s.c, s.h, s.w})}, s.attrs());
        EXPECT_TRUE(conv2d_geometry(c.g, c.n()).linear_like());
        EXPECT_EQ(op_def(OpKind::Conv2d).fwd_workspace(c.g, c.n()), 0u);
        EXPECT_EQ(op_def(OpKind::Conv2d).bwd_workspace(c.g, c.n()), 0u);
        ASSERT_NO_FATAL_FAILURE(check_accumulate(c));
        check_conv(s, what);
    }
    for (const auto& [s, what] :
         {std::pair{
              ConvSpec{.n = 2, .c = 4, .h = 1, .w = 1, .out = 6, .kh = 1, .kw = 1, .groups = 2},
              "groups 2"},
          std::pair{ConvSpec{.n = 2, .c = 4, .h = 2, .w = 1, .out = 6, .kh = 1, .kw = 1},
                    "2x1 planes"}}) {
        ConvCase c;
        c.op(OpKind::Conv2d, {c.input("x", Shape{s.n, s.c, s.h, s.w})}, s.attrs());
        EXPECT_FALSE(conv2d_geometry(c.g, c.n()).linear_like()) << what;
        check_conv(s, what);
    }
}

TEST(ConvOps, Conv2dParamsWorkspaceAndCost) {
    Graph g;
    const ValueId x = g.add_input("x", DType::F32, Shape{2, 8, 10, 10});
    const NodeId conv = g.add_node("conv", OpKind::Conv2d, Ids{x},
                                   {{"out_channels", int64_t{16}},
                                    {"kernel", int64_t{3}},
                                    {"stride", int64_t{2}},
                                    {"padding", int64_t{1}},
                                    {"groups", int64_t{2}}});
    EXPECT_EQ(g.output_of(conv).shape, (Shape{2, 16, 5, 5}));
    ASSERT_EQ(g.node(conv).params.size(), 2u);
    const Param& w = g.param(g.node(conv).params[0]);
    EXPECT_EQ(w.name, "conv.weight");
    EXPECT_EQ(w.shape, (Shape{16, 4, 3, 3}));
    EXPECT_EQ(w.init, ParamInit::FanInUniform);
    EXPECT_EQ(w.fan_in, 4 * 3 * 3);
    EXPECT_EQ(g.param(g.node(conv).params[1]).shape, (Shape{16}));
    EXPECT_EQ(g.param(g.node(conv).params[1]).fan_in, 36);
    const OpDef& d = op_def(OpKind::Conv2d);
    // 5×5 planes are small: both images in one GEMM per group (images_per_gemm), so one group's
    // columns for both, (8/2)·3·3 rows × 2·25, and its 8 outputs (forward) or output gradients
    // (backward) for both, gathered.
    EXPECT_EQ(conv2d_geometry(g, g.node(conv)).images_per_gemm(), 2);
    EXPECT_EQ(d.fwd_workspace(g, g.node(conv)), 4u * (4 * 9 + 8) * 2 * 25);
    EXPECT_EQ(d.bwd_workspace(g, g.node(conv)), 4u * (4 * 9 + 8) * 2 * 25);
    // A 16×16 plane fills a GEMM alone: one group of one image, 4·3·3 rows × 256 columns.
    const ValueId big = g.add_input("big", DType::F32, Shape{2, 8, 16, 16});
    const NodeId one = g.add_node("one", OpKind::Conv2d, Ids{big},
                                  {{"out_channels", int64_t{16}},
                                   {"kernel", int64_t{3}},
                                   {"padding", int64_t{1}},
                                   {"groups", int64_t{2}}});
    EXPECT_EQ(conv2d_geometry(g, g.node(one)).images_per_gemm(), 1);
    EXPECT_EQ(d.fwd_workspace(g, g.node(one)), 4u * 4 * 9 * 256);
    EXPECT_EQ(d.bwd_workspace(g, g.node(one)), 4u * 4 * 9 * 256);
    // With at most half as many outputs as inputs a group, its input gradient is a correlation
    // of dY (input_grad_by_correlation): besides X's columns, dY's, (4/2)·3·3 rows × 256 columns,
    // and the group's flipped weights, 4 × 18, of which X's are the larger.
    const NodeId narrow = g.add_node("narrow", OpKind::Conv2d, Ids{big},
                                     {{"out_channels", int64_t{4}},
                                      {"kernel", int64_t{3}},
                                      {"padding", int64_t{1}},
                                      {"groups", int64_t{2}}});
    ASSERT_TRUE(conv2d_geometry(g, g.node(narrow)).input_grad_by_correlation());
    EXPECT_EQ(conv2d_geometry(g, g.node(narrow)).backward_gemm_workspace_floats(),
              std::max<int64_t>(4 * 9 * 256, 2 * 9 * 256 + 4 * 18));
    EXPECT_EQ(d.bwd_workspace(g, g.node(narrow)), 4u * 4 * 9 * 256);
    const OpCost cost = d.cost(g, g.node(conv));
    EXPECT_DOUBLE_EQ(cost.fwd_flops, 2.0 * (2 * 16 * 25) * 36 + 2 * 16 * 25);
    EXPECT_GT(cost.bwd_flops, cost.fwd_flops);
    EXPECT_TRUE(d.is_dot);
    EXPECT_EQ(d.residuals(g, g.node(conv)).inputs, 1u);
    EXPECT_FALSE(d.residuals(g, g.node(conv)).output);

    const NodeId pw = g.add_node("pw", OpKind::Conv2d, Ids{x},
                                 {{"out_channels", int64_t{4}}, {"kernel", int64_t{1}}});
    // 1×1 on 10×10 planes: both images' inputs gathered side by side (8 rows × 200) and the
    // outputs (4 × 200); one image alone reads its input in place and needs none.
    EXPECT_EQ(d.fwd_workspace(g, g.node(pw)), 4u * (8 + 4) * 200);
    const ValueId single = g.add_input("single", DType::F32, Shape{1, 8, 10, 10});
    const NodeId pw1 = g.add_node("pw1", OpKind::Conv2d, Ids{single},
                                  {{"out_channels", int64_t{4}}, {"kernel", int64_t{1}}});
    EXPECT_EQ(d.fwd_workspace(g, g.node(pw1)), 0u);
    EXPECT_EQ(d.bwd_workspace(g, g.node(pw1)), 0u);
    const NodeId dw =
        g.add_node("dw", OpKind::Conv2d, Ids{x},
                   {{"out_channels", int64_t{8}}, {"kernel", int64_t{3}}, {"groups", int64_t{8}}});
    EXPECT_EQ(g.output_of(dw).shape, (Shape{2, 8, 8, 8}));
    // Rows of 16 outputs: zero-padded planes, one per channel (8) — forward, the input plane,
    // 16 + 2 rows × 16 + 2 columns; backward also the output-gradient plane, 16 rows ×
    // max(16, 17 + 8) + 2 columns, and 8 partial sums per tap.
    // A 3×3 depthwise convolution of `channels` on input `in`.
    auto depthwise3x3 = [&](const char* name, ValueId in, int64_t channels) {
        return g.add_node(
            name, OpKind::Conv2d, Ids{in},
            {{"out_channels", channels}, {"kernel", int64_t{3}}, {"groups", channels}});
    };
    const NodeId dw_planes = depthwise3x3(
        "dw_planes", g.add_input("planes", DType::F32, Shape{2, 8, 18, 18}), int64_t{8});
    EXPECT_EQ(d.fwd_workspace(g, g.node(dw_planes)), 4u * 8 * (18 * 18));
    EXPECT_EQ(d.bwd_workspace(g, g.node(dw_planes)), 4u * 8 * (18 * 18 + 16 * 27 + 9 * 8));
    // Short rows (up to 14 output columns): channels-last blocks of 16 lanes (8 channels fill
    // one) — forward: the padded input plane, the output and 9 weights per lane; backward: the
    // padded input plane, the output gradient, weights and weight gradient. 8×8 outputs from
    // 10×10, and 7×7 from 9×9.
    EXPECT_EQ(d.fwd_workspace(g, g.node(dw)), 4u * 16 * (100 + 64 + 9));
    EXPECT_EQ(d.bwd_workspace(g, g.node(dw)), 4u * 16 * (100 + 64 + 2 * 9));
    const NodeId dw_small =
        depthwise3x3("dw_small", g.add_input("small", DType::F32, Shape{2, 8, 9, 9}), int64_t{8});
    EXPECT_EQ(d.fwd_workspace(g, g.node(dw_small)), 4u * 16 * (81 + 49 + 9));
    EXPECT_EQ(d.bwd_workspace(g, g.node(dw_small)), 4u * 16 * (81 + 49 + 2 * 9));
    // The blocks take up to 14 columns where the planes do not apply (dilation across): one
    // block, a 3 × 16 padded plane, 1 × 12 outputs.
    const ValueId mid = g.add_input("mid", DType::F32, Shape{1, 4, 3, 16});
    const NodeId dw_mid = g.add_node("dw_mid", OpKind::Conv2d, Ids{mid},
                                     {{"out_channels", int64_t{4}},
                                      {"kernel", int64_t{3}},
                                      {"dilation", Ints{1, 2}},
                                      {"groups", int64_t{4}}});
    EXPECT_EQ(g.output_of(dw_mid).shape, (Shape{1, 4, 1, 12}));
    EXPECT_EQ(d.fwd_workspace(g, g.node(dw_mid)), 4u * 16 * (48 + 12 + 9));
    // Long stride-1 rows: zero-padded planes, one per channel (4). Output 1×38, so rows of 40
    // floats (5 vectors): forward, the input plane, 1 + 2 rows × 40 + 2 columns; backward also
    // the output-gradient plane, max(3, 1) + 2 rows × max(40, 40) + 2 columns, and 8 partial
    // sums per tap.
    const ValueId wide = g.add_input("wide", DType::F32, Shape{1, 4, 3, 40});
    const NodeId dw_wide = depthwise3x3("dw_wide", wide, int64_t{4});
    EXPECT_EQ(d.fwd_workspace(g, g.node(dw_wide)), 4u * 4 * (3 * 42));
    EXPECT_EQ(d.bwd_workspace(g, g.node(dw_wide)), 4u * 4 * (3 * 42 + 1 * 49 + 9 * 8));
    // At stride 2 across, the input plane splits into 2 column phases of 24 + 1 columns each;
    // the gradient plane is max(24, 39 / 2 + 8) + 1 columns wide.
    const NodeId dw_strided = g.add_node("dw_strided", OpKind::Conv2d, Ids{wide},
                                         {{"out_channels", int64_t{4}},
                                          {"kernel", int64_t{3}},
                                          {"stride", Ints{1, 2}},
                                          {"groups", int64_t{4}}});
    EXPECT_EQ(g.output_of(dw_strided).shape, (Shape{1, 4, 1, 19}));
    EXPECT_EQ(d.fwd_workspace(g, g.node(dw_strided)), 4u * 4 * (2 * 3 * 25));
    EXPECT_EQ(d.bwd_workspace(g, g.node(dw_strided)), 4u * 4 * (2 * 3 * 25 + 1 * 28 + 9 * 8));
    // Dilated ones keep the row kernel, which needs none.
    const NodeId dw_dilated = g.add_node("dw_dilated", OpKind::Conv2d, Ids{wide},
                                         {{"out_channels", int64_t{4}},
                                          {"kernel", int64_t{3}},
                                          {"dilation", Ints{1, 2}},
                                          {"groups", int64_t{4}}});
    EXPECT_EQ(d.fwd_workspace(g, g.node(dw_dilated)), 0u);
    EXPECT_EQ(d.bwd_workspace(g, g.node(dw_dilated)), 0u);
}

// ResNet's stem, as ONNX describes it: 224 -> conv 7x7/2 pad 3 -> 112 -> maxpool 3x3/2 pad 1 -> 56.
TEST(ConvOps, OnnxShapesOfTheResNetStem) {
    Graph g;
    const ValueId x = g.add_input("x", DType::F32, Shape{1, 3, 224, 224});
    const NodeId conv = g.add_node("conv", OpKind::Conv2d, Ids{x},
                                   {{"out_channels", int64_t{64}},
                                    {"kernel", Ints{7, 7}},
                                    {"stride", Ints{2, 2}},
                                    {"padding", Ints{3, 3, 3, 3}},
                                    {"dilation", Ints{1, 1}},
                                    {"groups", int64_t{1}}});
    EXPECT_EQ(g.output_of(conv).shape, (Shape{1, 64, 112, 112}));
    const NodeId pool =
        g.add_node("pool", OpKind::MaxPool2d, Ids{g.node(conv).output},
                   {{"kernel", Ints{3, 3}}, {"stride", Ints{2, 2}}, {"padding", Ints{1, 1, 1, 1}}});
    EXPECT_EQ(g.output_of(pool).shape, (Shape{1, 64, 56, 56}));
    const NodeId gap =
        g.add_node("gap", OpKind::AvgPool2d, Ids{g.node(pool).output}, {{"global", int64_t{1}}});
    EXPECT_EQ(g.output_of(gap).shape, (Shape{1, 64, 1, 1}));
    const NodeId flat = g.add_node("flat", OpKind::Flatten, Ids{g.node(gap).output});
    EXPECT_EQ(g.output_of(flat).shape, (Shape{1, 64}));
}

// ---------------------------------------------------------------------------------------------
// pooling

struct PoolSpec {
    int64_t kh, kw, sh, sw;
    int64_t pt = 0, pl = 0, pb = 0, pr = 0;
    int64_t dh = 1, dw = 1;
    bool ceil = false, include_pad = false;
    Attrs attrs(bool avg) const {
        Attrs a{{"kernel", Ints{kh, kw}}, {"stride", Ints{sh, sw}}};
        a.set("padding", Ints{pt, pl, pb, pr});
        a.set("dilation", Ints{dh, dw});
        a.set("ceil_mode", int64_t{ceil});
        if (avg) a.set("count_include_pad", int64_t{include_pad});
        return a;
    }
};

// Output positions by the ONNX rule (with ceil_mode's last-window check), computed naively.
int64_t pooled(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe, bool ceil) {
    const double span = static_cast<double>(in + pb + pe - d * (k - 1) - 1) / s;
    int64_t out = static_cast<int64_t>(ceil ? std::ceil(span) : std::floor(span)) + 1;
    if (ceil && (out - 1) * s >= in + pb) --out;
    return out;
}

std::vector<double> pool_reference(const PoolSpec& p, const Floats& x, int64_t planes, int64_t h,
                                   int64_t w, bool avg) {
    const int64_t oh = pooled(h, p.kh, p.sh, p.dh, p.pt, p.pb, p.ceil);
    const int64_t ow = pooled(w, p.kw, p.sw, p.dw, p.pl, p.pr, p.ceil);
    std::vector<double> y;
    for (int64_t q = 0; q < planes; ++q)
        for (int64_t a = 0; a < oh; ++a)
            for (int64_t b = 0; b < ow; ++b) {
                double best = -1e300, sum = 0;
                int64_t count = 0, padded = 0;
                for (int64_t i = 0; i < p.kh; ++i)
                    for (int64_t j = 0; j < p.kw; ++j) {
                        const int64_t ih = a * p.sh - p.pt + i * p.dh;
                        const int64_t iw = b * p.sw - p.pl + j * p.dw;
                        if (ih >= -p.pt && ih < h + p.pb && iw >= -p.pl && iw < w + p.pr) ++padded;
                        if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
                        const double v = x[static_cast<size_t>((q * h + ih) * w + iw)];
                        best = std::max(best, v);
                        sum += v;
                        ++count;
                    }
                if (avg)
                    y.push_back(sum / static_cast<double>(p.include_pad ? padded : count));
                else
                    y.push_back(best);
            }
    return y;
}

// Planes take the kernels' channels-last path, 16 planes a block, in bands of output rows whose
// input rows fit 512 positions (one band, or several on tall planes); rows wider than one output
// row's band (over 170 columns for 3 rows), and the rows that path is slower on (no column under
// padding; 48 columns or more, forward), take the row path, with vector loops over interior
// columns.
void check_pool(bool avg, const PoolSpec& p, int64_t h, int64_t w, const char* what,
                int64_t channels = 3) {
    SCOPED_TRACE(what);
    ConvCase c;
    const Shape in{2, channels, h, w};
    const ValueId x = avg ? c.input("x", in) : c.distinct_input("x", in);
    c.op(avg ? OpKind::AvgPool2d : OpKind::MaxPool2d, {x}, p.attrs(avg));
    EXPECT_EQ(c.out_shape(), (Shape{2, channels, pooled(h, p.kh, p.sh, p.dh, p.pt, p.pb, p.ceil),
                                    pooled(w, p.kw, p.sw, p.dw, p.pl, p.pr, p.ceil)}));
    check_forward(c, pool_reference(p, c.data(x), 2 * channels, h, w, avg));
    check_gradients(c);
}

TEST(ConvOps, MaxPool) {
    check_pool(false, {.kh = 2, .kw = 2, .sh = 2, .sw = 2}, 6, 6, "2x2/2");
    check_pool(false, {.kh = 3, .kw = 3, .sh = 2, .sw = 2, .pt = 1, .pl = 1, .pb = 1, .pr = 1}, 7,
               6, "3x3/2 pad 1");
    check_pool(false, {.kh = 3, .kw = 2, .sh = 2, .sw = 2, .ceil = true}, 6, 7, "ceil_mode");
    check_pool(false, {.kh = 2, .kw = 2, .sh = 1, .sw = 1, .dh = 2, .dw = 2}, 5, 5, "dilation 2");
    check_pool(false, {.kh = 3, .kw = 3, .sh = 1, .sw = 1, .pt = 1, .pl = 0, .pb = 0, .pr = 2}, 4,
               4, "overlapping, asymmetric padding");
    // Rows over 170 columns: the row path's vector loops over interior columns (stride 1 and
    // 2) beside the window-by-window edges, and a stride that takes the window path throughout.
    check_pool(false, {.kh = 3, .kw = 3, .sh = 1, .sw = 1, .pt = 1, .pl = 1, .pb = 1, .pr = 1}, 3,
               181, "3x3/1 pad 1, wide", 1);
    check_pool(false, {.kh = 3, .kw = 3, .sh = 2, .sw = 2, .pt = 1, .pl = 1, .pb = 1, .pr = 1}, 3,
               185, "3x3/2 pad 1, wide", 1);
    check_pool(false, {.kh = 2, .kw = 3, .sh = 1, .sw = 1, .pl = 2, .dh = 2, .dw = 2}, 3, 257,
               "dilation 2, left padding, wide", 1);
    check_pool(false, {.kh = 3, .kw = 3, .sh = 3, .sw = 3, .pl = 1, .pr = 1}, 3, 190, "stride 3",
               1);
    // Rows with no column padded, 16 outputs or more: the row path at any width, its interior
    // windows eight at a time (AlexNet's first pool: 55 columns to 27), the rest one by one.
    check_pool(false, {.kh = 3, .kw = 3, .sh = 2, .sw = 2}, 9, 55, "3x3/2 on 55 columns", 2);
    check_pool(false, {.kh = 3, .kw = 3, .sh = 1, .sw = 1}, 5, 30, "3x3/1 on 30 columns", 2);
    check_pool(false, {.kh = 2, .kw = 3, .sh = 2, .sw = 2, .dh = 2, .dw = 2}, 6, 45,
               "dilation 2, stride 2, on 45 columns", 1);
    // Tall planes: several bands of output rows (10 rows of 40 to a band at stride 1, 5 of 45 at
    // stride 2), overlapping in the input rows they read; at 100 columns the forward takes the
    // row path and the backward the bands.
    check_pool(false, {.kh = 3, .kw = 3, .sh = 1, .sw = 1, .pt = 1, .pl = 1, .pb = 1, .pr = 1}, 40,
               40, "3x3/1 pad 1, 4 bands", 1);
    check_pool(false, {.kh = 3, .kw = 3, .sh = 2, .sw = 2, .pt = 1, .pl = 1, .pb = 1, .pr = 1}, 45,
               45, "3x3/2 pad 1, 5 bands", 1);
    check_pool(false, {.kh = 3, .kw = 3, .sh = 2, .sw = 2, .pt = 1, .pl = 1, .pb = 1, .pr = 1}, 12,
               100, "3x3/2 pad 1, 100 columns", 1);
    check_pool(false, {.kh = 2, .kw = 2, .sh = 2, .sw = 2}, 6, 40, "2x2/2, no column padded", 1);
    // Small planes, several blocks of 16 and a partial one.
    check_pool(false, {.kh = 3, .kw = 3, .sh = 1, .sw = 1, .pt = 1, .pl = 1, .pb = 1, .pr = 1}, 4,
               4, "3x3/1 pad 1 on 4x4, 40 planes", 20);
    check_pool(false, {.kh = 3, .kw = 3, .sh = 2, .sw = 2, .ceil = true}, 7, 7, "3x3/2 ceil on 7x7",
               17);
}

// Ties: every window's gradient goes to its first maximum in scan order (rows, then columns),
// as PyTorch's max_pool2d, on the row path (planes over 256 floats: vector loops and edges) and
// the 16-plane blocks alike.
TEST(ConvOps, MaxPoolTiesGoToTheFirstMaximum) {
    struct Plane {
        int64_t count, h, w;
    };
    for (const Plane pl : {Plane{1, 4, 200}, Plane{1, 10, 100}, Plane{18, 5, 6}})
        for (int64_t stride : {1, 2}) {
            SCOPED_TRACE(std::to_string(pl.count) + " planes of " + std::to_string(pl.h) + "x" +
                         std::to_string(pl.w) + ", stride " + std::to_string(stride));
            const PoolSpec p{
                .kh = 3, .kw = 3, .sh = stride, .sw = stride, .pt = 1, .pl = 1, .pb = 1, .pr = 1};
            const int64_t h = pl.h, w = pl.w;
            ConvCase c;
            const ValueId x = c.input("x", Shape{1, pl.count, h, w});
            Floats& v = c.values.at(x).f;
            for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 7) % 3);
            c.op(OpKind::MaxPool2d, {x}, p.attrs(false));
            const int64_t oh = c.out_shape()[2], ow = c.out_shape()[3];
            Floats dy(static_cast<size_t>(pl.count * oh * ow));
            for (size_t k = 0; k < dy.size(); ++k) dy[k] = static_cast<float>(k + 1);
            Floats want(v.size(), 0.0f);
            for (int64_t q = 0; q < pl.count; ++q)
                for (int64_t a = 0; a < oh; ++a)
                    for (int64_t b = 0; b < ow; ++b) {
                        int64_t best = -1;
                        for (int64_t i = 0; i < 3; ++i)
                            for (int64_t j = 0; j < 3; ++j) {
                                const int64_t ih = a * stride - 1 + i, iw = b * stride - 1 + j;
                                if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
                                const auto k = static_cast<size_t>((q * h + ih) * w + iw);
                                if (best < 0 || v[k] > v[static_cast<size_t>(best)])
                                    best = static_cast<int64_t>(k);
                            }
                        want[static_cast<size_t>(best)] +=
                            dy[static_cast<size_t>((q * oh + a) * ow + b)];
                    }
            EXPECT_EQ(c.backward(dy).inputs.at(x), want);
        }
}

TEST(ConvOps, AvgPool) {
    const PoolSpec with_pad{.kh = 3,
                            .kw = 3,
                            .sh = 2,
                            .sw = 2,
                            .pt = 1,
                            .pl = 1,
                            .pb = 1,
                            .pr = 1,
                            .include_pad = true};
    check_pool(true, {.kh = 2, .kw = 2, .sh = 2, .sw = 2}, 6, 6, "2x2/2");
    check_pool(true, {.kh = 3, .kw = 3, .sh = 2, .sw = 2, .pt = 1, .pl = 1, .pb = 1, .pr = 1}, 7, 6,
               "3x3/2 pad 1");
    check_pool(true, with_pad, 7, 6, "count_include_pad");
    check_pool(true, {.kh = 3, .kw = 2, .sh = 2, .sw = 2, .ceil = true}, 6, 7, "ceil_mode");
    check_pool(true, {.kh = 3, .kw = 3, .sh = 1, .sw = 1, .pt = 1, .pl = 1, .pb = 1, .pr = 1}, 3,
               181, "3x3/1 pad 1, wide", 1);
    check_pool(true, {.kh = 3, .kw = 3, .sh = 1, .sw = 1, .pt = 1, .pl = 1, .pb = 1, .pr = 1}, 40,
               40, "3x3/1 pad 1, 4 bands", 1);
    check_pool(true, {.kh = 3, .kw = 3, .sh = 1, .sw = 1, .pt = 1, .pl = 1, .pb = 1, .pr = 1}, 4, 4,
               "3x3/1 pad 1 on 4x4, 40 planes", 20);
    check_pool(true, with_pad, 3, 185, "3x3/2 pad 1 count_include_pad, wide", 1);
    check_pool(true, with_pad, 7, 7, "3x3/2 pad 1 count_include_pad on 7x7", 17);
    check_pool(true, {.kh = 1, .kw = 1, .sh = 1, .sw = 1}, 6, 6,
               "1x1, as an adaptive pool to its own size");
    check_pool(true, {.kh = 2, .kw = 3, .sh = 1, .sw = 3, .pl = 2, .dh = 2, .dw = 2}, 3, 257,
               "dilation 2, stride 3", 1);
}

// Max pool written out as its scan over planes of h × w: y, each window's first maximum in scan
// order (rows, then columns) among its taps inside the input (0 where there is none), and dX,
// `dx` (the starting gradient) with each window's dY added at its choice in output order.
std::pair<Floats, Floats> max_pool_scan(const PoolSpec& p, const Floats& x, int64_t planes,
                                        int64_t h, int64_t w, const Floats& dy, Floats dx) {
    const int64_t oh = pooled(h, p.kh, p.sh, p.dh, p.pt, p.pb, p.ceil);
    const int64_t ow = pooled(w, p.kw, p.sw, p.dw, p.pl, p.pr, p.ceil);
    Floats y;
    for (int64_t q = 0; q < planes; ++q)
        for (int64_t a = 0; a < oh; ++a)
            for (int64_t b = 0; b < ow; ++b) {
                int64_t best = -1;
                for (int64_t i = 0; i < p.kh; ++i)
                    for (int64_t j = 0; j < p.kw; ++j) {
                        const int64_t ih = a * p.sh - p.pt + i * p.dh;
                        const int64_t iw = b * p.sw - p.pl + j * p.dw;
                        if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
                        const auto t = static_cast<size_t>((q * h + ih) * w + iw);
                        if (best < 0 || x[t] > x[static_cast<size_t>(best)])
                            best = static_cast<int64_t>(t);
                    }
                y.push_back(best < 0 ? 0.0f : x[static_cast<size_t>(best)]);
                if (best >= 0)
                    dx[static_cast<size_t>(best)] += dy[static_cast<size_t>((q * oh + a) * ow + b)];
            }
    return {y, dx};
}

// got and want hold the same floats, bit for bit (-0 apart from +0, NaN equal to itself).
void expect_same_bits(const Floats& got, const Floats& want, const char* what) {
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0) << what;
}

// Every path of the pooling backwards (16-plane blocks in one band and in several, the row path
// at strides 1 and 2, with and without padded columns: max pool's eight windows at a time and
// the windows past them one by one) adds each input's shares in output (oh, ow) order onto the
// gradient it started from: the starting values when accumulating, 0 when not. Checked bitwise
// against that sum written out in float, so the CPU and the CUDA kernels (which gather in that
// order) agree to the bit, also when a pooled value has a second consumer. Max pool's inputs
// have ties, a NaN that comes first in its window (chosen) and NaNs that come later (never),
// dY a -0 (0 + -0 is +0) and the starting gradient -0s (that stay -0 where nothing is added).
TEST(ConvOps, PoolGradientsAddInOutputOrderOntoTheStartingValue) {
    struct Case {
        int64_t planes, h, w, stride, pad;
        const char* what;
    };
    for (const bool avg : {false, true})
        for (const Case k :
             {Case{20, 4, 4, 1, 1, "blocks, one band"}, Case{1, 45, 45, 2, 1, "blocks, 5 bands"},
              Case{1, 3, 185, 2, 1, "row path, stride 2"},
              Case{1, 3, 181, 1, 1, "row path, stride 1"},
              Case{2, 9, 55, 2, 0, "row path, stride 2, no column padded (AlexNet's)"},
              Case{2, 5, 30, 1, 0, "row path, stride 1, no column padded"}})
            for (const bool acc : {false, true}) {
                SCOPED_TRACE(std::string(avg ? "avg " : "max ") + k.what +
                             (acc ? ", accumulating" : ""));
                const PoolSpec p{.kh = 3,
                                 .kw = 3,
                                 .sh = k.stride,
                                 .sw = k.stride,
                                 .pt = k.pad,
                                 .pl = k.pad,
                                 .pb = k.pad,
                                 .pr = k.pad,
                                 .include_pad = true};
                ConvCase c;
                const Shape in{1, k.planes, k.h, k.w};
                const ValueId x = avg ? c.input("x", in) : c.distinct_input("x", in);
                c.op(avg ? OpKind::AvgPool2d : OpKind::MaxPool2d, {x}, p.attrs(avg));
                const int64_t oh = c.out_shape()[2], ow = c.out_shape()[3];
                Floats& v = c.values.at(x).f;
                if (!avg) {
                    for (float& e : v) e = std::floor(3 * e);  // a few small integers: ties
                    v[0] = std::nanf("");                      // first in window (0, 0): chosen
                    v[v.size() / 2] = std::nanf("");           // within windows, not first: never
                    v[v.size() / 3 + 1] = std::nanf("");
                }
                Floats dy = c.random(static_cast<size_t>(k.planes * oh * ow));
                dy[dy.size() / 2] = -0.0f;
                Grads start;
                start.inputs[x] = c.random(v.size());
                for (size_t i = 0; i < v.size(); i += 7) start.inputs[x][i] = -0.0f;  // + -0: -0
                Floats want = acc ? start.inputs[x] : Floats(v.size(), 0.0f);
                for (int64_t q = 0; q < k.planes; ++q)
                    for (int64_t a = 0; a < oh; ++a)
                        for (int64_t b = 0; b < ow; ++b) {
                            std::vector<size_t> taps;
                            int64_t best = -1;
                            for (int64_t i = 0; i < 3; ++i)
                                for (int64_t j = 0; j < 3; ++j) {
                                    const int64_t ih = a * k.stride - k.pad + i,
                                                  iw = b * k.stride - k.pad + j;
                                    if (ih < 0 || ih >= k.h || iw < 0 || iw >= k.w) continue;
                                    const auto t = static_cast<size_t>((q * k.h + ih) * k.w + iw);
                                    taps.push_back(t);
                                    if (best < 0 || v[t] > v[static_cast<size_t>(best)])
                                        best = static_cast<int64_t>(t);
                                }
                            const float g = dy[static_cast<size_t>((q * oh + a) * ow + b)];
                            if (!avg) {
                                want[static_cast<size_t>(best)] += g;
                                continue;
                            }
                            // count_include_pad: the window's taps within the padded extent.
                            const auto inside = [&](int64_t o, int64_t s, int64_t n) {
                                int64_t m = 0;
                                for (int64_t t = 0; t < 3; ++t) m += o * s - k.pad + t < n + k.pad;
                                return m;
                            };
                            const auto div = static_cast<float>(inside(a, k.stride, k.h) *
                                                                inside(b, k.stride, k.w));
                            for (size_t t : taps) want[t] += g / div;
                        }
                const Grads got = c.backward(dy, acc ? &start : nullptr);
                expect_same_bits(got.inputs.at(x), want, "not the output-order sum, bit for bit");
            }
}

// Max pool on geometries drawn at random (kernels 1–5, strides 1–2, dilations 1–2, padding up
// to half the kernel, floor and ceil mode, rows from 9 to 300 columns: the row path's blocks of
// eight with and without a last block that overlaps the one before it or reads its stride-2 taps
// from one float earlier, and the 16-plane blocks), against the scan written out: each window's
// first maximum forward, and backward each window's dY added to it in output order onto the
// starting gradient, bit for bit.
TEST(ConvOps, MaxPoolMatchesTheScanOnRandomGeometries) {
    std::mt19937 rng(20261207);
    auto draw = [&](int64_t lo, int64_t hi) {
        return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
    };
    for (int trial = 0; trial < 60; ++trial) {
        PoolSpec p{.kh = draw(1, 5), .kw = draw(1, 5), .sh = draw(1, 2), .sw = draw(1, 2)};
        p.dh = draw(1, 2);
        p.dw = draw(1, 2);
        p.pt = draw(0, p.kh / 2);
        p.pb = draw(0, p.kh / 2);
        p.pl = draw(0, p.kw / 2);
        p.pr = draw(0, p.kw / 2);
        p.ceil = draw(0, 1) == 1;
        const int64_t h = draw(p.dh * (p.kh - 1) + 1, 9);
        const int64_t w =
            draw(0, 1) ? draw(std::max<int64_t>(9, p.dw * (p.kw - 1) + 1), 90) : draw(240, 300);
        const int64_t planes = draw(1, 3);
        const bool acc = draw(0, 1) == 1;
        const int64_t oh = pooled(h, p.kh, p.sh, p.dh, p.pt, p.pb, p.ceil);
        const int64_t ow = pooled(w, p.kw, p.sw, p.dw, p.pl, p.pr, p.ceil);
        SCOPED_TRACE("trial " + std::to_string(trial) + ": " + std::to_string(p.kh) + "x" +
                     std::to_string(p.kw) + " stride " + std::to_string(p.sh) + "," +
                     std::to_string(p.sw) + " dilation " + std::to_string(p.dh) + "," +
                     std::to_string(p.dw) + " padding " + std::to_string(p.pt) + "," +
                     std::to_string(p.pl) + "," + std::to_string(p.pb) + "," +
                     std::to_string(p.pr) + (p.ceil ? " ceil" : "") + " on " +
                     std::to_string(planes) + " planes of " + std::to_string(h) + "x" +
                     std::to_string(w) + (acc ? ", accumulating" : ""));
        ConvCase c(static_cast<uint32_t>(100 + trial));
        const ValueId x = c.input("x", Shape{1, planes, h, w});
        Floats& v = c.values.at(x).f;
        for (float& e : v) e = std::floor(4 * e);  // a few small integers: ties everywhere
        c.op(OpKind::MaxPool2d, {x}, p.attrs(false));
        ASSERT_EQ(c.out_shape(), (Shape{1, planes, oh, ow}));
        const Floats dy = c.random(static_cast<size_t>(planes * oh * ow));
        Grads start;
        start.inputs[x] = c.random(v.size());
        const auto [want_y, want] =
            max_pool_scan(p, v, planes, h, w, dy, acc ? start.inputs[x] : Floats(v.size(), 0.0f));
        expect_same_bits(c.forward(), want_y, "not each window's first maximum");
        const Grads got = c.backward(dy, acc ? &start : nullptr);
        expect_same_bits(got.inputs.at(x), want, "not the output-order sum, bit for bit");
    }
}

// 2 × 2 windows of stride 2 on rows of 8 outputs or more take their own path (pool.cpp): eight
// windows at a time, a row pair's taps written once backward. Forward, each window's first
// maximum in scan order; backward, that tap gets 0 + dy, or its starting value + dy when
// accumulating, every other tap 0 or its starting value, an odd last row and column included.
// Ties, a NaN that comes first in its window (chosen) and one that comes later (never chosen),
// and a dy of -0 (0 + -0 is +0), bit for bit; vectors and the columns past them.
TEST(ConvOps, MaxPoolTwoByTwoWritesEachTapOnce) {
    struct Plane {
        int64_t planes, h, w;
    };
    for (const Plane pl : {Plane{1, 7, 41}, Plane{5, 7, 41}, Plane{3, 16, 17}})
        for (const bool acc : {false, true}) {
            const int64_t h = pl.h, w = pl.w, oh = h / 2, ow = w / 2, planes = pl.planes;
            SCOPED_TRACE(std::to_string(planes) + " planes of " + std::to_string(h) + "x" +
                         std::to_string(w) + (acc ? ", accumulating" : ""));
            ConvCase c;
            const ValueId x = c.input("x", Shape{1, planes, h, w});
            Floats& v = c.values.at(x).f;
            v = c.random(v.size());
            for (float& e : v) e = std::floor(2 * e);       // a few small integers: ties everywhere
            v[0] = std::nanf("");                           // first in window (0, 0): chosen
            v[static_cast<size_t>(w + 3)] = std::nanf("");  // last in window (0, 1): never
            const PoolSpec p{.kh = 2, .kw = 2, .sh = 2, .sw = 2};
            c.op(OpKind::MaxPool2d, {x}, p.attrs(false));
            ASSERT_EQ(c.out_shape(), (Shape{1, planes, oh, ow}));
            Floats dy = c.random(static_cast<size_t>(planes * oh * ow));
            dy[1] = -0.0f;  // its window's choice gets 0 + -0 = +0, as the row path gave it
            Grads start;
            start.inputs[x] = c.random(v.size());
            const auto [want_y, want] = max_pool_scan(
                p, v, planes, h, w, dy, acc ? start.inputs[x] : Floats(v.size(), 0.0f));
            expect_same_bits(c.forward(), want_y, "not each window's first maximum");
            const Grads got = c.backward(dy, acc ? &start : nullptr);
            expect_same_bits(got.inputs.at(x), want, "not the first maximum's dy, bit for bit");
        }
}

TEST(ConvOps, MaxPoolStrideDefaultsToKernelAndTiesGoToTheFirst) {
    ConvCase c;
    const ValueId x = c.input("x", Shape{1, 1, 2, 4});
    c.values.at(x).f = {1, 1, 0, 2, 1, 0, 2, 2};
    c.op(OpKind::MaxPool2d, {x}, {{"kernel", int64_t{2}}});
    EXPECT_EQ(c.out_shape(), (Shape{1, 1, 1, 2}));
    const Floats y = c.forward();
    EXPECT_EQ(y[0], 1.0f);
    EXPECT_EQ(y[1], 2.0f);
    const Grads g = c.backward({10.0f, 20.0f});
    EXPECT_EQ(g.inputs.at(x), (Floats{10, 0, 0, 20, 0, 0, 0, 0}));
}

TEST(ConvOps, GlobalAvgPool) {
    ConvCase c;
    const ValueId x = c.input("x", Shape{2, 3, 4, 5});
    c.op(OpKind::AvgPool2d, {x}, {{"global", int64_t{1}}});
    EXPECT_EQ(c.out_shape(), (Shape{2, 3, 1, 1}));
    std::vector<double> want;
    for (int q = 0; q < 6; ++q) {
        double s = 0;
        for (int k = 0; k < 20; ++k) s += c.data(x)[static_cast<size_t>(q * 20 + k)];
        want.push_back(s / 20);
    }
    check_forward(c, want);
    check_gradients(c);
}

// ---------------------------------------------------------------------------------------------
// batchnorm, upsample, concat, flatten

void check_batchnorm(Shape shape) {
    SCOPED_TRACE(format_dims(shape));
    ConvCase c;
    const ValueId x = c.input("x", shape);
    for (float& v : c.values.at(x).f) v = 2.0f * v + 0.5f;
    c.op(OpKind::BatchNorm, {x}, {{"eps", 1e-3}});
    ASSERT_EQ(c.params.size(), 2u);
    EXPECT_EQ(c.g.param(c.n().params[0]).init, ParamInit::Ones);
    EXPECT_EQ(c.g.param(c.n().params[1]).init, ParamInit::Zeros);
    const int64_t n = shape[0], ch = shape[1], inner = shape.numel() / (n * ch);
    std::vector<double> want(static_cast<size_t>(shape.numel()));
    for (int64_t k = 0; k < ch; ++k) {
        double sum = 0, sq = 0;
        auto at = [&](int64_t i, int64_t e) {
            return static_cast<size_t>((i * ch + k) * inner + e);
        };
        for (int64_t i = 0; i < n; ++i)
            for (int64_t e = 0; e < inner; ++e) sum += c.data(x)[at(i, e)];
        const double mean = sum / static_cast<double>(n * inner);
        for (int64_t i = 0; i < n; ++i)
            for (int64_t e = 0; e < inner; ++e) sq += std::pow(c.data(x)[at(i, e)] - mean, 2);
        const double rstd = 1 / std::sqrt(sq / static_cast<double>(n * inner) + 1e-3);
        for (int64_t i = 0; i < n; ++i)
            for (int64_t e = 0; e < inner; ++e)
                want[at(i, e)] =
                    (c.data(x)[at(i, e)] - mean) * rstd * c.params[0][static_cast<size_t>(k)] +
                    c.params[1][static_cast<size_t>(k)];
    }
    check_forward(c, want);
    check_gradients(c, 1e-2, 3e-3, 2e-2);
}

TEST(ConvOps, BatchNorm) {
    check_batchnorm(Shape{2, 3, 6, 6});    // segments of 36: one channel at a time, Eigen's sums
    check_batchnorm(Shape{1, 2, 17, 17});  // 289: blocks of 256 and a tail of 33
    check_batchnorm(Shape{5, 3});          // [N, C]: statistics over the batch only
    // Segments shorter than 32 take 16 channels at once, one per lane: 19 channels are a full
    // group and one of 3, 7 channels one group; segments of 4, 12, 16 and 20; N·inner past the
    // 256 positions that stay transposed (20 images of 16) transposes each image at each pass;
    // [N, C] with 9 channels is one group of segments of one float.
    check_batchnorm(Shape{2, 7, 2, 2});
    check_batchnorm(Shape{3, 2, 3, 4});
    check_batchnorm(Shape{2, 19, 4, 4});
    check_batchnorm(Shape{2, 3, 4, 5});
    check_batchnorm(Shape{20, 3, 4, 4});
    check_batchnorm(Shape{4, 9});
}

TEST(ConvOps, UpsampleNearest) {
    ConvCase c;
    const ValueId x = c.input("x", Shape{2, 2, 3, 2});
    c.op(OpKind::UpsampleNearest2d, {x}, {{"scale", Ints{2, 3}}});
    EXPECT_EQ(c.out_shape(), (Shape{2, 2, 6, 6}));
    std::vector<double> want;
    for (int q = 0; q < 4; ++q)
        for (int h = 0; h < 6; ++h)
            for (int w = 0; w < 6; ++w)
                want.push_back(c.data(x)[static_cast<size_t>(q * 6 + (h / 2) * 2 + w / 3)]);
    check_forward(c, want, 0.0);
    check_gradients(c);
    ConvCase d;
    d.op(OpKind::UpsampleNearest2d, {d.input("x", Shape{1, 3, 2, 2})}, {{"scale", int64_t{2}}});
    EXPECT_EQ(d.out_shape(), (Shape{1, 3, 4, 4}));
}

// A column factor of 2 takes vectors (pool.cpp): forward each input column twice, backward each
// input's block of dY summed from 0, rows then columns, as the scalar path does, bit for bit;
// vectors and the columns past them, row factors 2 and 3, with and without accumulation.
TEST(ConvOps, UpsampleNearestByTwoColumnsIsTheScalarSum) {
    for (const int64_t sh : {int64_t{2}, int64_t{3}})
        for (const bool acc : {false, true}) {
            SCOPED_TRACE("row factor " + std::to_string(sh) + (acc ? ", accumulating" : ""));
            const int64_t planes = 3, h = 2, w = 19, oh = h * sh, ow = 2 * w;
            ConvCase c;
            const ValueId x = c.input("x", Shape{1, planes, h, w});
            c.op(OpKind::UpsampleNearest2d, {x}, {{"scale", Ints{sh, 2}}});
            ASSERT_EQ(c.out_shape(), (Shape{1, planes, oh, ow}));
            const Floats& v = c.data(x);
            Floats want_y;
            for (int64_t q = 0; q < planes; ++q)
                for (int64_t i = 0; i < oh; ++i)
                    for (int64_t j = 0; j < ow; ++j)
                        want_y.push_back(v[static_cast<size_t>((q * h + i / sh) * w + j / 2)]);
            EXPECT_EQ(c.forward(), want_y);
            Floats dy = c.random(static_cast<size_t>(planes * oh * ow));
            for (size_t k = 0; k < 4; ++k) dy[k] = -0.0f;  // dX[0] = 0 + -0 + ... = +0
            Grads start;
            start.inputs[x] = c.random(v.size());
            Floats want = acc ? start.inputs[x] : Floats(v.size(), 0.0f);
            for (int64_t q = 0; q < planes; ++q)
                for (int64_t i = 0; i < h; ++i)
                    for (int64_t j = 0; j < w; ++j) {
                        float sum = 0;
                        for (int64_t a = 0; a < sh; ++a)
                            for (int64_t b = 0; b < 2; ++b)
                                sum +=
                                    dy[static_cast<size_t>((q * oh + i * sh + a) * ow + 2 * j + b)];
                        float& d = want[static_cast<size_t>((q * h + i) * w + j)];
                        d = acc ? d + sum : sum;
                    }
            const Floats got = c.backward(dy, acc ? &start : nullptr).inputs.at(x);
            ASSERT_EQ(got.size(), want.size());
            EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
                << "not the scalar sum, bit for bit";
        }
}

TEST(ConvOps, ConcatChannelsAndOtherAxes) {
    ConvCase c;
    const ValueId a = c.input("a", Shape{2, 1, 2, 3});
    const ValueId b = c.input("b", Shape{2, 3, 2, 3});
    const ValueId d = c.input("d", Shape{2, 2, 2, 3});
    c.op(OpKind::Concat, {a, b, d});
    EXPECT_EQ(c.out_shape(), (Shape{2, 6, 2, 3}));
    std::vector<double> want;
    for (int n = 0; n < 2; ++n)
        for (auto [v, ch] : std::vector<std::pair<ValueId, int>>{{a, 1}, {b, 3}, {d, 2}})
            for (int k = 0; k < ch * 6; ++k)
                want.push_back(c.data(v)[static_cast<size_t>(n * ch * 6 + k)]);
    check_forward(c, want, 0.0);
    check_gradients(c);

    ConvCase last;
    const ValueId p = last.input("p", Shape{3, 2});
    const ValueId q = last.input("q", Shape{3, 4});
    last.op(OpKind::Concat, {p, q}, {{"axis", int64_t{-1}}});
    EXPECT_EQ(last.out_shape(), (Shape{3, 6}));
    check_gradients(last);
}

TEST(ConvOps, ConcatSameInputTwice) {
    ConvCase c;
    const ValueId x = c.input("x", Shape{2, 2, 2, 2});
    c.op(OpKind::Concat, {x, x});
    const Grads g = c.backward(Floats(32, 1.5f));
    for (float v : g.inputs.at(x)) EXPECT_EQ(v, 3.0f);
    check_gradients(c);
}

TEST(ConvOps, Flatten) {
    ConvCase c;
    const ValueId x = c.input("x", Shape{2, 3, 2, 2});
    c.op(OpKind::Flatten, {x});
    EXPECT_EQ(c.out_shape(), (Shape{2, 12}));
    std::vector<double> want(c.data(x).begin(), c.data(x).end());
    check_forward(c, want, 0.0);
    check_gradients(c);
    ConvCase d;
    d.op(OpKind::Flatten, {d.input("x", Shape{2, 3, 4})}, {{"axis", int64_t{2}}});
    EXPECT_EQ(d.out_shape(), (Shape{6, 4}));
    ConvCase e;
    e.op(OpKind::Flatten, {e.input("x", Shape{2, 3, 4})}, {{"axis", int64_t{0}}});
    EXPECT_EQ(e.out_shape(), (Shape{1, 24}));
}

// ---------------------------------------------------------------------------------------------
// dropout: a mask that is a function of (graph seed, node name, element index)

TEST(ConvOps, DropoutMaskIsSeededScaledAndRecomputable) {
    ConvCase c;
    const ValueId x = c.input("x", Shape{64, 64});
    for (float& v : c.values.at(x).f) v = std::abs(v) + 0.5f;  // never 0: zeros show the mask
    c.op(OpKind::Dropout, {x}, {{"p", 0.25}});
    const Floats y1 = c.forward(), y2 = c.forward();
    EXPECT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * 4), 0);
    const uint64_t key = dropout_key(c.g.seed(), "op");
    const uint32_t threshold = dropout_threshold(0.25);
    int64_t kept = 0;
    for (size_t k = 0; k < y1.size(); ++k) {
        const bool keep = dropout_keeps(key, k, threshold);
        ASSERT_EQ(y1[k] != 0.0f, keep) << k;
        if (keep) {
            EXPECT_FLOAT_EQ(y1[k], c.data(x)[k] / 0.75f);
        }
        kept += keep;
    }
    EXPECT_NEAR(static_cast<double>(kept) / 4096, 0.75, 0.03);
    // The backward applies the same mask and scale.
    const Grads g = c.backward(Floats(4096, 1.0f));
    for (size_t k = 0; k < y1.size(); ++k)
        EXPECT_EQ(g.inputs.at(x)[k], y1[k] != 0.0f ? 1.0f / 0.75f : 0.0f) << k;
    check_gradients(c);

    // Another node name or another graph seed gives another mask; p = 0 keeps everything.
    ConvCase other(11, "other");
    const ValueId ox = other.input("x", Shape{64, 64});
    other.values.at(ox).f = c.values.at(x).f;
    other.op(OpKind::Dropout, {ox}, {{"p", 0.25}});
    EXPECT_NE(other.forward(), y1);
    c.g.set_seed(2);
    EXPECT_NE(c.forward(), y1);
    ConvCase none;
    const ValueId nx = none.input("x", Shape{3, 5});
    none.op(OpKind::Dropout, {nx}, {{"p", 0.0}});
    EXPECT_EQ(none.forward(), none.data(nx));
}

TEST(ConvOps, CounterHashIsSplitMix64) {
    // counter_hash(key, i) is the (i+1)-th output of SplitMix64 seeded with key.
    SplitMix64 rng(42);
    for (uint64_t i = 0; i < 5; ++i) EXPECT_EQ(counter_hash(42, i), rng.next());
}

// ---------------------------------------------------------------------------------------------
// registry, contract, determinism

TEST(ConvOps, RegistryNamesFlagsAndResiduals) {
    const std::vector<std::pair<OpKind, const char*>> names = {
        {OpKind::Conv2d, "conv2d"},
        {OpKind::MaxPool2d, "maxpool2d"},
        {OpKind::AvgPool2d, "avgpool2d"},
        {OpKind::BatchNorm, "batchnorm"},
        {OpKind::UpsampleNearest2d, "upsample_nearest2d"},
        {OpKind::Concat, "concat"},
        {OpKind::Flatten, "flatten"},
        {OpKind::Dropout, "dropout"},
    };
    for (auto [k, name] : names) {
        EXPECT_EQ(op_name(k), name);
        EXPECT_EQ(op_from_name(name), k);
        EXPECT_FALSE(op_def(k).is_loss);
        EXPECT_EQ(op_def(k).is_dot, k == OpKind::Conv2d) << name;
    }
    Graph g;
    const ValueId x = g.add_input("x", DType::F32, Shape{2, 4, 6, 6});
    auto residuals = [&](OpKind k, Ids ins, Attrs attrs = {}) {
        std::string name = "n";  // appended: GCC 12 warns falsely (-Wrestrict) on "n" + string
        name += std::to_string(g.num_nodes());
        const NodeId n = g.add_node(name, k, ins, attrs);
        EXPECT_EQ(op_def(k).bwd_workspace && op_def(k).bwd_workspace(g, g.node(n)) > 0,
                  k == OpKind::Conv2d);
        const Residuals r = op_def(k).residuals(g, g.node(n));
        return std::pair{r.inputs, r.output};
    };
    using R = std::pair<uint32_t, bool>;
    EXPECT_EQ(
        residuals(OpKind::Conv2d, {x}, {{"out_channels", int64_t{2}}, {"kernel", int64_t{3}}}),
        (R{1, false}));
    EXPECT_EQ(residuals(OpKind::MaxPool2d, {x}, {{"kernel", int64_t{2}}}), (R{1, false}));
    EXPECT_EQ(residuals(OpKind::AvgPool2d, {x}, {{"kernel", int64_t{2}}}), (R{0, false}));
    EXPECT_EQ(residuals(OpKind::BatchNorm, {x}), (R{1, false}));
    EXPECT_EQ(residuals(OpKind::UpsampleNearest2d, {x}, {{"scale", int64_t{2}}}), (R{0, false}));
    EXPECT_EQ(residuals(OpKind::Concat, {x, x}), (R{0, false}));
    EXPECT_EQ(residuals(OpKind::Flatten, {x}), (R{0, false}));
    EXPECT_EQ(residuals(OpKind::Dropout, {x}), (R{0, false}));
}

using Build = std::function<void(ConvCase&)>;

std::vector<std::pair<const char*, Build>> small_cases() {
    return {
        {"conv2d",
         [](ConvCase& c) {
             c.op(OpKind::Conv2d, {c.input("x", Shape{2, 3, 5, 5})},
                  {{"out_channels", int64_t{4}}, {"kernel", int64_t{3}}, {"padding", int64_t{1}}});
         }},
        {"conv2d 1x1",
         [](ConvCase& c) {
             c.op(OpKind::Conv2d, {c.input("x", Shape{2, 3, 4, 4})},
                  {{"out_channels", int64_t{4}}, {"kernel", int64_t{1}}});
         }},
        {"conv2d grouped, channels-last direct",
         [](ConvCase& c) {
             c.op(OpKind::Conv2d, {c.input("x", Shape{2, 16, 5, 5})},
                  {{"out_channels", int64_t{16}},
                   {"kernel", int64_t{3}},
                   {"padding", int64_t{1}},
                   {"groups", int64_t{2}}});
         }},
        {"conv2d depthwise",
         [](ConvCase& c) {
             c.op(OpKind::Conv2d, {c.input("x", Shape{2, 3, 5, 5})},
                  {{"out_channels", int64_t{3}}, {"kernel", int64_t{3}}, {"groups", int64_t{3}}});
         }},
        {"maxpool2d",
         [](ConvCase& c) {
             c.op(OpKind::MaxPool2d, {c.distinct_input("x", Shape{2, 2, 4, 4})},
                  {{"kernel", int64_t{2}}});
         }},
        {"avgpool2d",
         [](ConvCase& c) {
             c.op(OpKind::AvgPool2d, {c.input("x", Shape{2, 2, 5, 5})},
                  {{"kernel", int64_t{3}}, {"stride", int64_t{2}}, {"padding", int64_t{1}}});
         }},
        {"global avgpool",
         [](ConvCase& c) {
             c.op(OpKind::AvgPool2d, {c.input("x", Shape{2, 2, 3, 3})}, {{"global", int64_t{1}}});
         }},
        {"batchnorm",
         [](ConvCase& c) {
             c.op(OpKind::BatchNorm, {c.input("x", Shape{3, 2, 2, 2})});
         }},
        {"upsample",
         [](ConvCase& c) {
             c.op(OpKind::UpsampleNearest2d, {c.input("x", Shape{1, 2, 2, 3})},
                  {{"scale", int64_t{2}}});
         }},
        {"concat",
         [](ConvCase& c) {
             c.op(OpKind::Concat,
                  {c.input("a", Shape{2, 2, 2, 2}), c.input("b", Shape{2, 1, 2, 2})});
         }},
        {"flatten",
         [](ConvCase& c) {
             c.op(OpKind::Flatten, {c.input("x", Shape{2, 3, 2, 2})});
         }},
        {"dropout",
         [](ConvCase& c) {
             c.op(OpKind::Dropout, {c.input("x", Shape{4, 16})}, {{"p", 0.5}});
         }},
    };
}

// accumulate=true adds to what the buffer held; false overwrites (buffers start as NaN).
// Parameter gradients are always overwritten.
TEST(ConvOps, AccumulateAddsToExistingGradient) {
    for (const auto& [name, build] : small_cases()) {
        SCOPED_TRACE(name);
        ConvCase c;
        build(c);
        ASSERT_NO_FATAL_FAILURE(check_accumulate(c));
    }
}

// At 2 threads, at sizes where the parallel paths and Eigen's threaded GEMM are taken, the
// results are bitwise the same run after run.
TEST(ConvOps, RepeatedRunsAreBitwiseIdenticalAtTwoThreads) {
    set_cpu_threads(2);
    const std::vector<Build> builds = {
        [](ConvCase& c) {  // the direct kernel, its tiles in parallel
            c.op(OpKind::Conv2d, {c.input("x", Shape{4, 32, 20, 20})},
                 {{"out_channels", int64_t{48}}, {"kernel", int64_t{3}}, {"padding", int64_t{1}}});
        },
        [](ConvCase& c) {  // im2col, the GEMM, and dX as a correlation of dY
            c.op(OpKind::Conv2d, {c.input("x", Shape{4, 40, 20, 20})},
                 {{"out_channels", int64_t{72}}, {"kernel", int64_t{3}}, {"padding", int64_t{1}}});
        },
        [](ConvCase& c) {
            c.op(OpKind::Conv2d, {c.input("x", Shape{4, 32, 20, 20})},
                 {{"out_channels", int64_t{64}},
                  {"kernel", int64_t{3}},
                  {"stride", int64_t{2}},
                  {"padding", int64_t{1}},
                  {"groups", int64_t{4}}});
        },
        [](ConvCase& c) {
            c.op(OpKind::Conv2d, {c.input("x", Shape{4, 64, 16, 16})},
                 {{"out_channels", int64_t{64}}, {"kernel", int64_t{1}}});
        },
        [](ConvCase& c) {
            c.op(OpKind::Conv2d, {c.input("x", Shape{4, 64, 20, 20})},
                 {{"out_channels", int64_t{64}},
                  {"kernel", int64_t{3}},
                  {"padding", int64_t{1}},
                  {"groups", int64_t{64}}});
        },
        [](ConvCase& c) {
            c.op(OpKind::MaxPool2d, {c.input("x", Shape{4, 32, 32, 32})},
                 {{"kernel", int64_t{3}}, {"stride", int64_t{2}}, {"padding", int64_t{1}}});
        },
        [](ConvCase& c) {
            c.op(OpKind::AvgPool2d, {c.input("x", Shape{4, 32, 32, 32})}, {{"global", int64_t{1}}});
        },
        [](ConvCase& c) {
            c.op(OpKind::BatchNorm, {c.input("x", Shape{8, 32, 16, 16})});
        },
        [](ConvCase& c) {
            c.op(OpKind::UpsampleNearest2d, {c.input("x", Shape{4, 32, 16, 16})},
                 {{"scale", int64_t{2}}});
        },
        [](ConvCase& c) {
            c.op(OpKind::Concat,
                 {c.input("a", Shape{4, 32, 16, 16}), c.input("b", Shape{4, 16, 16, 16})});
        },
        [](ConvCase& c) {
            c.op(OpKind::Dropout, {c.input("x", Shape{100000})}, {{"p", 0.3}});
        },
    };
    for (const auto& build : builds) {
        ConvCase c;
        build(c);
        SCOPED_TRACE(std::string(op_name(c.n().op)));
        ASSERT_NO_FATAL_FAILURE(check_repeatable(c));
    }
    set_cpu_threads(1);
}

// ---------------------------------------------------------------------------------------------
// attribute and shape errors name the attribute and the shapes

using testing::expect_error;

ValueId image(Graph& g, Shape s = Shape{2, 4, 8, 8}) {
    return g.add_input("x", DType::F32, s);
}

TEST(ConvOps, ErrorsNameTheProblem) {
    expect_error(
        [](Graph& g) {
            g.add_node("c", OpKind::Conv2d, Ids{image(g, Shape{4, 8, 8})},
                       {{"out_channels", int64_t{2}}, {"kernel", int64_t{3}}});
        },
        {"node 'c' (conv2d)", "[4,8,8]", "rank 4 [N, C, H, W]"});
    expect_error(
        [](Graph& g) {
            g.add_node(
                "c", OpKind::Conv2d, Ids{image(g)},
                {{"out_channels", int64_t{6}}, {"kernel", int64_t{3}}, {"groups", int64_t{4}}});
        },
        {"'groups' is 4", "input channels (4", "out_channels (6)"});
    expect_error(
        [](Graph& g) {
            g.add_node("c", OpKind::Conv2d, Ids{image(g)},
                       {{"out_channels", int64_t{2}}, {"kernel", int64_t{11}}});
        },
        {"window along H spans 11", "only 8"});
    expect_error(
        [](Graph& g) {
            g.add_node("c", OpKind::Conv2d, Ids{image(g)},
                       {{"out_channels", int64_t{2}}, {"kernel", Ints{3, 3, 3}}});
        },
        {"'kernel' is [3,3,3]", "[kh, kw]"});
    expect_error(
        [](Graph& g) {
            g.add_node(
                "c", OpKind::Conv2d, Ids{image(g)},
                {{"out_channels", int64_t{2}}, {"kernel", int64_t{3}}, {"padding", Ints{1, 1, 1}}});
        },
        {"'padding' is [1,1,1]", "[top, left, bottom, right]"});
    expect_error(
        [](Graph& g) {
            g.add_node(
                "c", OpKind::Conv2d, Ids{image(g)},
                {{"out_channels", int64_t{2}}, {"kernel", int64_t{3}}, {"stride", int64_t{0}}});
        },
        {"'stride' has 0", ">= 1"});
    expect_error(
        [](Graph& g) {
            g.add_node("c", OpKind::Conv2d, Ids{image(g)}, {{"kernel", int64_t{3}}});
        },
        {"'out_channels' is required"});
    expect_error(
        [](Graph& g) {
            g.add_node("c", OpKind::Conv2d, Ids{image(g)},
                       {{"out_channels", int64_t{2}}, {"kernel", std::string("3")}});
        },
        {"'kernel' must be an integer or a list"});
    expect_error(
        [](Graph& g) {
            g.add_node("p", OpKind::MaxPool2d, Ids{image(g)},
                       {{"kernel", int64_t{2}}, {"padding", int64_t{2}}});
        },
        {"'padding' must be smaller than the window"});
    expect_error(
        [](Graph& g) {
            g.add_node("p", OpKind::AvgPool2d, Ids{image(g)},
                       {{"global", int64_t{1}}, {"kernel", int64_t{2}}});
        },
        {"'kernel' does not apply with global=1"});
    expect_error(
        [](Graph& g) {
            g.add_node("u", OpKind::UpsampleNearest2d, Ids{image(g)}, {{"scale", int64_t{0}}});
        },
        {"'scale' has 0"});
    expect_error(
        [](Graph& g) {
            g.add_node("cat", OpKind::Concat,
                       Ids{image(g), g.add_input("y", DType::F32, Shape{2, 4, 8, 9})});
        },
        {"input 1 has shape [2,4,8,9]", "axis 1", "[2,4,8,8]"});
    expect_error([](Graph& g) { g.add_node("cat", OpKind::Concat, Ids{image(g)}); },
                 {"takes 2-1024 inputs, got 1"});
    expect_error(
        [](Graph& g) {
            g.add_node("f", OpKind::Flatten, Ids{image(g)}, {{"axis", int64_t{5}}});
        },
        {"'axis' is 5", "[-4, 4]"});
    expect_error(
        [](Graph& g) {
            g.add_node("d", OpKind::Dropout, Ids{image(g)}, {{"p", 1.0}});
        },
        {"'p' is 1", "[0, 1)"});
    expect_error(
        [](Graph& g) {
            g.add_node("bn", OpKind::BatchNorm, Ids{g.add_input("x", DType::F32, Shape{4})});
        },
        {"at least 2 axes"});
    // An attribute the op does not know (here ONNX's spelling) is an error, not ignored.
    expect_error(
        [](Graph& g) {
            g.add_node(
                "c", OpKind::Conv2d, Ids{image(g)},
                {{"out_channels", int64_t{2}}, {"kernel", int64_t{3}}, {"strides", int64_t{2}}});
        },
        {"unknown attribute 'strides' for conv2d", "out_channels, kernel, stride, padding"});
    expect_error(
        [](Graph& g) {
            g.add_node("d", OpKind::Dropout, Ids{image(g)}, {{"ratio", 0.1}});
        },
        {"unknown attribute 'ratio' for dropout", "are p"});
}

}  // namespace
}  // namespace rl
