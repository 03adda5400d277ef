#pragma once
// The column matrix of a convolution's GEMM path (conv.cpp) and its adjoint, for one image and
// one group of channels:
// col[(c·kh + i)·kw + j, oh·OW + ow] = x[c, oh·sh - pt + i·dh, ow·sw - pl + j·dw], 0 in padding;
// x points at the group's first channel plane; row r starts at col + r·ld (ld = oh·ow, or wider
// when several images' columns sit side by side). The rows are short in late layers (4 to 16
// columns), so each is written by plain loops: a memcpy/memset call per row cost more than the
// GEMM on grouped convolutions (im2col.cpp is built with -fno-tree-loop-distribute-patterns, so
// the compiler does not turn the loops back into those calls).
// Paths by geometry (im2col.cpp): windows that tile the plane (Conv2dGeometry::tiles) and strided
// 1×1s without padding (Conv2dGeometry::strided_pointwise) on loops of their own; rows of at most
// 8 floats in and out by vector permutes (Conv2dGeometry::im2col_in_vector_rows); others through
// a zero-padded copy of each channel's plane where it fits on the stack
// (Conv2dGeometry::im2col_through_padded_plane), its rows in column phases at stride 2 across; row
// by row, with bounds, otherwise. Every path sums each input gradient in the same order, so the
// bits do not depend on the path. One thread per channel.
#include <cstdint>

#include "engine/ops/window.h"

namespace rl::cpu {

void im2col(const float* x, const Conv2dGeometry& g, float* col, int64_t ld);
// dx (+)= col2im(col): with `accumulate` added to dx, else dx is written (zeros where no window
// reaches).
void col2im(const float* col, int64_t ld, const Conv2dGeometry& g, float* dx, bool accumulate);

}  // namespace rl::cpu
