#pragma once
// Geometry of the 2-D windowed ops on NCHW tensors (conv2d, maxpool2d, avgpool2d), parsed and
// checked once from a node's attributes, shared by shape inference and by every backend's
// kernels.
//
// Attributes follow ONNX semantics, so an ONNX Conv/MaxPool/AveragePool maps onto them directly:
//   kernel    int or [kh, kw]                       (ONNX kernel_shape)
//   stride    int or [sh, sw]                       (ONNX strides)
//   padding   int, [ph, pw] or [top, left, bottom, right]   (ONNX pads, same order)
//   dilation  int or [dh, dw]                       (ONNX dilations)
//   ceil_mode 0/1 (pools only)
// An output axis has (in + pad_begin + pad_end - dilation·(k-1) - 1) / stride + 1 positions,
// rounded down (or up with ceil_mode, where, as in PyTorch and ONNX, a last window that would
// start in the end padding is dropped).
//
// Worked example: x [2,3,8,8], conv2d kernel=3, stride=2, padding=1 → out (8+1+1-2-1)/2+1 = 4,
// so y is [2,out_channels,4,4]; window (oh, ow) covers rows 2·oh-1 … 2·oh+1 of the input.
#include <algorithm>
#include <cstdint>

#include "engine/graph.h"

namespace rl {

// A list of widths as template arguments: a geometry's predicate asks has(), and a kernel
// dispatches on the same list with each width a compile-time constant (engine/cpu/im2col.cpp).
template <int... Ws>
struct Widths {
    static constexpr bool has(int64_t v) { return ((v == Ws) || ...); }
};

struct Window2d {
    int64_t kh = 1, kw = 1;
    int64_t sh = 1, sw = 1;
    int64_t dh = 1, dw = 1;
    int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
};

struct Conv2dGeometry {
    int64_t n = 0, c = 0, h = 0, w = 0;  // input
    int64_t out_c = 0, oh = 0, ow = 0;   // output
    int64_t groups = 1;
    Window2d win;
    bool bias = true;
    int64_t c_per_group() const { return c / groups; }
    int64_t out_per_group() const { return out_c / groups; }
    // Rows of one group's im2col matrix: (c/groups)·kh·kw.
    int64_t patch() const { return c_per_group() * win.kh * win.kw; }
    // One input channel per group (depthwise, with any channel multiplier): a direct kernel.
    bool depthwise() const { return c_per_group() == 1 && groups > 1; }
    // 1×1, stride 1, no padding: the input plane already is the im2col matrix.
    bool pointwise() const {
        return win.kh == 1 && win.kw == 1 && win.sh == 1 && win.sw == 1 && win.pad_top == 0 &&
               win.pad_left == 0 && win.pad_bottom == 0 && win.pad_right == 0;
    }
    // A 1×1 stride-1 convolution on 1×1 planes without groups (a squeeze-and-excitation block's
    // projections) is a linear layer on the [N, C] matrix the input already is: one product
    // per direction, no gathering of images, no workspace. As a gathered pointwise convolution
    // its products of 2 columns ran at 0.33 of the raw GEMM (MobileNetV3's, docs/benchmarks.md).
    bool linear_like() const {
        return pointwise() && groups == 1 && h == 1 && w == 1 && oh == 1 && ow == 1;
    }
    // Windows that tile the input without overlap (stride = kernel, no padding or dilation, one
    // group) with rows of at least kPatchMinColumns: ViT's patch embeddings. im2col would gather
    // each of its rows across the plane at the kernel's stride (ViT-B/32: every float from a
    // cache line of its own); instead the CPU kernel copies each window's rows whole into a row
    // of a [positions, C·kh·kw] matrix P, and the products take Pᵀ: Y = W·Pᵀ, dW = dY·P,
    // dP = dYᵀ·W, dP's rows copied back to their windows (engine/cpu/conv.cpp). P has im2col's
    // floats: the workspace is the same. With shorter rows the copies are too short: ConvNeXt's
    // 2×2 downsampling from 96 channels went 0.17 → 0.22 ms forward (docs/benchmarks.md).
    static constexpr int64_t kPatchMinColumns = 8;
    bool patches() const { return tiles() && groups == 1 && win.kw >= kPatchMinColumns; }
    // Windows larger than one position that tile the plane without overlap or padding (stride =
    // kernel, dilation 1): ConvNeXt's 4×4 stem and 2×2 downsampling. Each input float then lands
    // in at most one column, so im2col and col2im copy each input row once, without the
    // zero-padded plane (engine/cpu/im2col.cpp).
    bool tiles() const {
        return win.kh * win.kw > 1 && win.sh == win.kh && win.sw == win.kw && win.dh == 1 &&
               win.dw == 1 && win.pad_top == 0 && win.pad_left == 0 && win.pad_bottom == 0 &&
               win.pad_right == 0;
    }
    // Floats of one group's im2col matrix for one image; 0 when none is needed.
    int64_t im2col_floats() const { return depthwise() || pointwise() ? 0 : patch() * oh * ow; }

    // Small planes put several images side by side in the GEMM's columns, up to kGemmColumns,
    // so one GEMM per group serves them all: a GEMM of 4 or 16 columns (the last stages of a
    // ResNeXt or RegNet at 64 px) ran at a fifth of the GEMM rate and read the weights once per
    // image (docs/benchmarks.md). Planes of kGemmColumns or more keep one image per GEMM.
    static constexpr int64_t kGemmColumns = 256;
    int64_t images_per_gemm() const {
        if (depthwise() || n <= 1) return 1;
        const int64_t plane = std::max<int64_t>(oh * ow, 1);
        return std::clamp<int64_t>((kGemmColumns + plane - 1) / plane, 1, n);
    }
    // Floats of the GEMM path's workspace: one group's column matrix for a chunk of images and,
    // where images are batched, that group's outputs (forward) or output gradients (backward)
    // for the chunk, gathered from their image-major planes.
    int64_t gemm_workspace_floats() const {
        if (depthwise() || linear_like()) return 0;
        const int64_t nb = images_per_gemm();
        if (nb == 1) return im2col_floats();
        return (patch() + out_per_group()) * nb * oh * ow;
    }

    // The input gradient of a stride-1 convolution as a convolution of dY: the transposed
    // convolution is a correlation of dY with the flipped kernel, through the window padded by
    // (k - 1)·d - pad on each side (input_grad_geometry), so per chunk and group
    //   dX_g [C/groups, nb·H·W] (+)= W̃_g [C/groups, (O/groups)·kh·kw] · im2col(dY_g),
    // W̃_g[c, (o, t)] = W_g[o, c, kh·kw - 1 - t]. Against col = W_gᵀ·dY_g and col2im(col), its
    // product has K = (O/groups)·kh·kw instead of O/groups, writes C/groups rows instead of
    // (C/groups)·kh·kw, and nothing is folded back: DenseNet-121's 3×3 convolutions (128 → 32
    // channels) on 16×16 planes go 0.96 → 0.77 ms backward (docs/benchmarks.md). Where it does
    // not pay: more than half as many outputs as inputs a group (with as many, dY's columns are
    // X's and only the product's shape changes: on the native build 64 → 64 channels went
    // 4.66 → 5.04 ms on 56×56 planes), and fewer than kCorrelationColumnsPerOutput columns a
    // chunk per output channel (the flipping, a pass over the weights, costs more than the fold
    // saves: ResNet-18's 512-channel 3×3s on 2×2 planes went 0.79 → 1.42 ms). The padding must
    // not pass the window's extent, else the correlation's own would be negative.
    static constexpr int64_t kCorrelationColumnsPerOutput = 2;
    bool input_grad_by_correlation() const {
        if (depthwise() || grouped_direct() || pointwise() || win.sh != 1 || win.sw != 1)
            return false;
        const Window2d t = input_grad_geometry().win;
        if (t.pad_top < 0 || t.pad_bottom < 0 || t.pad_left < 0 || t.pad_right < 0) return false;
        return 2 * out_per_group() <= c_per_group() &&
               images_per_gemm() * h * w >= kCorrelationColumnsPerOutput * out_per_group();
    }
    // The correlation's geometry: one group of dY (O/groups channels of oh × ow) in, a group's
    // input gradient (C/groups channels of h × w) out, stride 1, the same dilation.
    Conv2dGeometry input_grad_geometry() const {
        Conv2dGeometry t;
        t.n = n, t.c = out_per_group(), t.h = oh, t.w = ow;
        t.out_c = c_per_group(), t.oh = h, t.ow = w;
        t.groups = 1, t.bias = false;
        const int64_t eh = (win.kh - 1) * win.dh, ew = (win.kw - 1) * win.dw;
        t.win = {win.kh,
                 win.kw,
                 1,
                 1,
                 win.dh,
                 win.dw,
                 eh - win.pad_top,
                 ew - win.pad_left,
                 eh - win.pad_bottom,
                 ew - win.pad_right};
        return t;
    }
    // Floats of the backward's GEMM-path workspace: the forward's, or, when the input gradient
    // is a correlation, the larger of that (dW's columns and gathered dY come first) and dY's
    // columns for the chunk, the flipped weights and, with images batched, the chunk's dX.
    int64_t backward_gemm_workspace_floats() const {
        if (!input_grad_by_correlation()) return gemm_workspace_floats();
        const int64_t nb = images_per_gemm(), cg = c_per_group(), og = out_per_group();
        const int64_t kt = og * win.kh * win.kw;
        const int64_t dual = kt * nb * h * w + cg * kt + (nb > 1 ? cg * nb * h * w : 0);
        return std::max(gemm_workspace_floats(), dual);
    }

    // im2col and col2im go through a zero-padded copy of each channel's plane, on the stack,
    // where the window's extent of the plane (padded_h × padded_w) fits kPaddedPlaneFloats (the
    // CPU kernel, engine/cpu/im2col.cpp); row by row, with bounds, where it does not. At 4096
    // floats the stems of 64-px inputs (69 × 69 for a 7×7 at stride 2, 65 × 65 for a 3×3) took
    // the row path: ResNet-18's ran at 0.79–0.81 of its raw products forward, 0.86–0.87
    // backward, 0.89–0.90 and 0.94–0.96 through the copy, MobileNetV3's 0.65–0.68 → 0.74–0.75
    // forward (docs/benchmarks.md).
    static constexpr int64_t kPaddedPlaneFloats = 8192;
    // A 1×1 window without padding at a stride over 1: the shortcut projection of a ResNet or
    // RegNet block. It has no taps or edges: its im2col keeps every stride-th row and column, its
    // col2im writes them back with zeros between (the CPU kernel's own loops,
    // engine/cpu/im2col.cpp); copying the whole plane first made RegNet's projections 7-9 %
    // slower (docs/benchmarks.md).
    bool strided_pointwise() const {
        return win.kh == 1 && win.kw == 1 && win.pad_top == 0 && win.pad_left == 0 &&
               win.pad_bottom == 0 && win.pad_right == 0 && !pointwise();
    }
    // im2col and col2im move whole rows in vectors where the input's rows are 2, 4, 7 or 8
    // floats and the output's 1, 2, 4, 7 or 8, or the input's 14 or 16 and the output's 7, 8,
    // 14 or 16 (the late layers' planes at 64 and 224 px), the kernel at most
    // kVectorRowMaxKernel wide: each tap's row is a permute of its input row (the CPU kernel,
    // engine/cpu/im2col.cpp), with no padded copy of the plane, whose zeroing and copy cost as
    // much as the taps' moves on ResNet-18's 8×8 planes (docs/benchmarks.md).
    static constexpr int64_t kVectorRowMaxKernel = 16;
    using VectorRowsIn = Widths<2, 4, 7, 8>;  // one register, and their output widths
    using VectorRowsOut = Widths<1, 2, 4, 7, 8>;
    using WideVectorRowsIn = Widths<14, 16>;  // two registers, and theirs
    using WideVectorRowsOut = Widths<7, 8, 14, 16>;
    bool im2col_in_vector_rows() const {
        if (strided_pointwise() || pointwise() || tiles() || win.kw > kVectorRowMaxKernel)
            return false;
        if (VectorRowsIn::has(w)) return VectorRowsOut::has(ow);
        return WideVectorRowsIn::has(w) && WideVectorRowsOut::has(ow);
    }
    bool im2col_through_padded_plane() const {
        return !strided_pointwise() && !pointwise() && !im2col_in_vector_rows() &&
               padded_h() * padded_w() <= kPaddedPlaneFloats;
    }

    // Depthwise convolutions (multiplier 1) with short rows, where a per-row kernel is mostly
    // overhead, run channels-last, 16 channels at a time (the CPU kernel, engine/cpu/conv.cpp):
    // each block's input plane transposed, its output (forward) or output gradient (backward),
    // and its weights, in the declared workspace. Measured (docs/benchmarks.md), the blocks win
    // over the row kernel up to 14 output columns, and over the zero-padded planes below as far
    // (up to 7 before the evening of 2026-12-06, when the blocks had become faster: on 8×8
    // planes, one thread, a 7×7 on 192 channels 138-139 → 96-97 µs backward, EfficientNet's
    // stride-2 5×5 to 144 channels 139-146 → 80-83; on AVX2 137-142 → 118-119 and 140 → 98;
    // from 16 columns on, the planes' 16-float vectors win on AVX-512).
    static constexpr int64_t kDepthwiseLanes = 16;
    bool depthwise_blocked() const { return depthwise() && out_per_group() == 1 && ow <= 14; }
    // The padded input plane the windows read: rows r = ih + pad_top, columns q = iw + pad_left.
    int64_t padded_h() const { return (oh - 1) * win.sh + (win.kh - 1) * win.dh + 1; }
    int64_t padded_w() const { return (ow - 1) * win.sw + (win.kw - 1) * win.dw + 1; }
    int64_t depthwise_blocks() const { return (c + kDepthwiseLanes - 1) / kDepthwiseLanes; }
    // Floats of one block's scratch: forward — input, output, weights; backward — input, output
    // gradient, weights and weight gradient.
    int64_t depthwise_block_floats(bool backward) const {
        const int64_t in = h * w, out = oh * ow, taps = win.kh * win.kw;
        return kDepthwiseLanes * (in + out + (backward ? 2 * taps : taps));
    }
    // Floats of workspace: every block of one image at once (blocks run in parallel, images
    // one after another); 0 on the other paths.
    int64_t depthwise_workspace_floats(bool backward) const {
        if (depthwise_padded()) return c * depthwise_plane_floats(backward);
        return depthwise_blocked() ? depthwise_blocks() * depthwise_block_floats(backward) : 0;
    }

    // Depthwise convolutions (multiplier 1) at dilation 1 with a 3-, 5- or 7-wide kernel and
    // rows of 8 outputs or more run on zero-padded planes (the CPU kernel,
    // engine/cpu/conv.cpp): each channel's input plane, and backward its output-gradient plane,
    // copied once into its own slice of the workspace with rows a whole number of 8-float
    // vectors, so that every output row is vector multiply-adds with no edges. A stride across
    // splits the input plane into that many column phases, so each tap still reads contiguous
    // floats.
    static constexpr int64_t kPlaneLanes = 8;
    static int64_t whole_lanes(int64_t v) {
        return (v + kPlaneLanes - 1) / kPlaneLanes * kPlaneLanes;
    }
    // Kernel rows at most: the bound of the tap-row list the input gradient once kept, kept so that
    // no geometry changed path when dx_rows replaced it (taller kernels take the row kernel).
    static constexpr int64_t kPlaneMaxRows = 16;
    // The output-gradient plane's rows at most (grad_plane_w: a plane about 4000 columns wide at
    // stride 1), so that a row of zeros of this length stands for the rows outside it.
    static constexpr int64_t kPlaneMaxGradWidth = 4096;
    bool planes_apply() const {
        return depthwise() && out_per_group() == 1 && win.dh == 1 && win.dw == 1 &&
               (win.kw == 3 || win.kw == 5 || win.kw == 7) && win.kh <= kPlaneMaxRows &&
               grad_plane_w() <= kPlaneMaxGradWidth;
    }
    bool depthwise_padded() const { return planes_apply() && !depthwise_blocked(); }

    // Grouped convolutions whose groups have whole 8-float vectors of input and of output
    // channels (RegNet's and ResNeXt's 3×3s: 8 to 64 channels a group) run a direct kernel
    // (engine/cpu/conv_grouped.cpp): with so few output channels per group, each element of an
    // im2col matrix would serve only that many products, and building it cost as much as the
    // GEMM (docs/benchmarks.md). Each group's input plane is zero-padded and made channels-last
    // in a workspace slice (grouped_slices); the windows read it in place. The same holds for
    // an ungrouped convolution (one group) with up to kDirectMaxOutputs output channels and
    // weights of up to kDirectMaxWeightFloats (each tile of positions runs down all of them, so
    // they must stay in L2), other than a 1×1 one (at stride 1 its input already is the GEMM's
    // operand; at stride 2 the kernel made the padded plane of every input for a quarter of them
    // and lost to im2col, 1.12-1.16× its time on RegNetY-400MF's projection): DenseNet-121's 3×3s
    // to 32 channels ran 0.43 → 0.33 ms forward on 16×16 planes (AVX2), while 256 → 64 channels
    // on 4×4 planes (147K floats of weights) ran 0.10 → 0.12 ms and the direct kernel lost to
    // im2col and the GEMM from 256 outputs on (docs/benchmarks.md). With AVX-512 the kernel runs
    // 16-float vectors where the channels allow (with 8-float ones it lost to Eigen's 16-float
    // products: ResNet-18's 64-channel 3×3s 0.20 → 0.32 ms forward).
    static constexpr int64_t kGroupLanes = 8;
    static constexpr int64_t kDirectMaxOutputs = 64;
    static constexpr int64_t kDirectMaxWeightFloats = int64_t{1} << 16;
    // Groups of 4 channels in and out (ResNeXt-50's first stage) go packed, a vector's worth of
    // groups at a time (conv_grouped.cpp): where their count is a multiple of 4, so that every
    // pack is whole with AVX-512's four a vector and AVX2's two.
    static constexpr int64_t kPackedChannels = 4;
    bool grouped_direct() const {
        if (groups == 1) return ungrouped_direct_fits();
        if (depthwise()) return false;
        if (c_per_group() == kPackedChannels && out_per_group() == kPackedChannels)
            return groups % kPackedChannels == 0;
        return c_per_group() % kGroupLanes == 0 && out_per_group() % kGroupLanes == 0;
    }
    // Whether an ungrouped convolution is one the direct kernel takes.
    bool ungrouped_direct_fits() const {
        return groups == 1 && c % kGroupLanes == 0 && out_c % kGroupLanes == 0 &&
               win.kh * win.kw > 1 && out_c <= kDirectMaxOutputs &&
               patch() * out_c <= kDirectMaxWeightFloats;
    }
    // The output gradient's padded plane for the input gradient's gather: dy (oh, ow) at row
    // oh + (kh - 1)·dh / sh, column ow + (kw - 1)·dw / sw, with rows (columns) down to the last
    // input's; zero elsewhere.
    int64_t grouped_grad_h() const {
        return std::max((h - 1 + win.pad_top) / win.sh + 1, oh) + (win.kh - 1) * win.dh / win.sh;
    }
    int64_t grouped_grad_w() const {
        return std::max((w - 1 + win.pad_left) / win.sw + 1, ow) + (win.kw - 1) * win.dw / win.sw;
    }
    // Images a group takes at once: as many as make images_per_gemm()'s columns, so that the
    // positions of small planes (2×2 to 8×8 in a RegNet at 64 px) fill the kernel's tiles and
    // amortise its weight reordering.
    int64_t grouped_images() const { return images_per_gemm(); }
    // Floats of one group's slice: per image of a chunk, the padded channels-last input, the
    // outputs (forward) or output gradients (backward) channels-last and, backward, the input
    // gradient channels-last and the output gradient's padded plane; once, the group's weights
    // reordered and, backward, the weight gradient's sums.
    int64_t grouped_slice_floats(bool backward) const {
        const int64_t in = padded_h() * padded_w() * c_per_group();
        const int64_t out = oh * ow * out_per_group();
        const int64_t weights = win.kh * win.kw * c_per_group() * out_per_group();
        const int64_t nb = grouped_images();
        if (!backward) return nb * (in + out) + weights;
        return nb * (in + out + h * w * c_per_group() +
                     grouped_grad_h() * grouped_grad_w() * out_per_group()) +
               2 * weights;
    }
    // Slices of the workspace: one a group up to kGroupedSlices. The groups run in parallel
    // lanes, one lane a thread (up to the slices there are), each lane's groups one after
    // another in its own slice: with a slice a group, ResNeXt-101's last stage (32 groups of
    // 64 channels on 2×2 planes) wrote 9.4 MB of reordered weights and weight-gradient sums a
    // backward pass that no later group read back, and ran at 0.70 of its raw products; one
    // slice reused by a thread's groups stays in its L2 (docs/benchmarks.md). Each group is
    // computed whole in whichever slice, so the slice count changes no bit.
    static constexpr int64_t kGroupedSlices = 16;
    int64_t grouped_slices() const { return std::min(groups, kGroupedSlices); }
    // The slices' floats (images one after another); 0 on other paths.
    int64_t grouped_workspace_floats(bool backward) const {
        return grouped_direct() ? grouped_slices() * grouped_slice_floats(backward) : 0;
    }
    // The input plane, padded: x[ih, iw] at row ih + pad_top, column q = iw + pad_left, held in
    // phase q mod sw at column q / sw. Output (oh, ow) reads tap (i, j) at row oh·sh + i, in
    // phase j mod sw at column ow + j / sw, for ow up to a whole vector past the last output.
    int64_t input_plane_h() const { return (oh - 1) * win.sh + win.kh; }
    int64_t input_plane_w() const { return whole_lanes(ow) + (win.kw - 1) / win.sw; }
    int64_t input_planes_floats() const { return win.sw * input_plane_h() * input_plane_w(); }
    // The output-gradient plane: dy[oh, ow] at row oh, column ow + (kw - 1) / sw. dW reads rows
    // a whole vector at a time from there; dX reads, for input columns iw with
    // (iw + pad_left) mod sw = p, the columns u - m + (kw - 1) / sw, u = (iw + pad_left) / sw,
    // for the taps j = p + m·sw, a whole vector at a time.
    int64_t grad_plane_w() const {
        return std::max(whole_lanes(ow), (w - 1 + win.pad_left) / win.sw + kPlaneLanes) +
               (win.kw - 1) / win.sw;
    }
    // Floats of one channel's slice: the input planes; backward also the output-gradient plane
    // and the weight gradient's kPlaneLanes partial sums per tap.
    int64_t depthwise_plane_floats(bool backward) const {
        const int64_t in = input_planes_floats();
        if (!backward) return in;
        return in + oh * grad_plane_w() + win.kh * win.kw * kPlaneLanes;
    }
};

struct Pool2dGeometry {
    int64_t n = 0, c = 0, h = 0, w = 0;
    int64_t oh = 0, ow = 0;
    Window2d win;
    bool count_include_pad = false;  // avgpool: divide by the whole window, padding included
};

// Throw rl::Error naming the attribute and the input shape when something does not fit.
Conv2dGeometry conv2d_geometry(const Graph& g, const Node& n);
Pool2dGeometry pool2d_geometry(const Graph& g, const Node& n);

}  // namespace rl
