// add, sub, mul, div with numpy broadcasting, and reduce_mean (engine/ops/binary.cpp,
// engine/ops/reduce.cpp). Same-shape operands keep the flat chunked loops (add's in-place forward
// and its speed are unchanged); a scalar operand is a flat loop too; anything else walks the
// output row by row through the BroadcastPlan. Gradients of a repeated operand are sums over the
// repeated axes (reduce_repeats: an order fixed by the shapes), in double, each element's sum in
// one task: the same bits for any thread count.
#include <cstring>
#include <type_traits>

#include "engine/cpu/kernels.h"
#include "engine/ops/layout.h"

namespace rl::cpu {
namespace {

enum class Bin { Add, Sub, Mul, Div };

template <Bin B>
inline float apply(float a, float b) {
    if constexpr (B == Bin::Add) return a + b;
    if constexpr (B == Bin::Sub) return a - b;
    if constexpr (B == Bin::Mul) return a * b;
    return a / b;
}

// dL/d(operand k) for one output element: dy, and the operands a, b at offsets ia, ib. add and
// sub read neither (their operands are not residuals, so the pointers may be null).
template <Bin B>
inline float partial(int k, float dy, const float* a, int64_t ia, const float* b, int64_t ib) {
    if constexpr (B == Bin::Add) return dy;
    if constexpr (B == Bin::Sub) return k == 0 ? dy : -dy;
    if constexpr (B == Bin::Mul) return k == 0 ? dy * b[ib] : dy * a[ia];
    if constexpr (B == Bin::Div) return k == 0 ? dy / b[ib] : -dy * a[ia] / (b[ib] * b[ib]);
}

// The operands' data: node inputs, the node's parameter, or the scalar (a one-element operand
// with stride 0 everywhere).
struct Operands {
    BinaryForm form;
    const float* data[2] = {nullptr, nullptr};
};

Operands operands(const Node& n, const void* const* inputs, float* const* params, void* workspace) {
    Operands o;
    o.form = binary_form(n);
    for (int k = 0; k < 2; ++k) {
        switch (o.form.source[k]) {
            case BinaryForm::Source::Input:
                o.data[k] = as_f32(inputs[o.form.input[k]]);
                break;
            case BinaryForm::Source::Param:
                o.data[k] = params[0];
                break;
            case BinaryForm::Source::Scalar:
                o.data[k] = &o.form.scalar;
                break;
            case BinaryForm::Source::Constant:
                binary_constant_values(n, static_cast<float*>(workspace));
                o.data[k] = static_cast<const float*>(workspace);
                break;
        }
    }
    return o;
}

// A stride of the plan's innermost axis as a compile-time 0 or 1 where it is one, so that the
// run's loop vectorises: an operand that walks the run (1) or stays on one element of it (0:
// squeeze-excitation's scale, a per-channel parameter under an NCHW plane). Other strides stay
// run-time values.
using Stride0 = std::integral_constant<int64_t, 0>;
using Stride1 = std::integral_constant<int64_t, 1>;

template <class F>
void with_unit_strides(int64_t s1, int64_t s2, F&& f) {
    if (s1 == 1 && s2 == 0) return f(Stride1{}, Stride0{});
    if (s1 == 0 && s2 == 1) return f(Stride0{}, Stride1{});
    if (s1 == 1 && s2 == 1) return f(Stride1{}, Stride1{});
    f(s1, s2);
}

// f(len, s1, s2) for the plan's innermost axis: its length, and the operands' strides along it
// (with_unit_strides). A length of 4 with unit strides (a squeeze-excitation scale on 2×2 planes)
// is a compile-time 4 too: a loop of 4 that vectorises for any length spent more on its checks
// and tails than on its 4 multiplies.
template <class F>
void with_run_shape(int64_t len, int64_t s1, int64_t s2, F&& f) {
    with_unit_strides(s1, s2, [&](auto u1, auto u2) {
        if constexpr (!std::is_same_v<decltype(u1), int64_t>)
            if (len == 4) return f(std::integral_constant<int64_t, 4>{}, u1, u2);
        f(len, u1, u2);
    });
}

// The operands' offsets at the start of each row of the plan (every axis but the innermost), row
// after row: one division per axis where a cursor starts, additions after (the rows of a
// squeeze-excitation scale are 4 to 1024 floats, and a division per axis per row cost as much as
// the row's multiplies).
struct RowCursor {
    const BroadcastPlan& p;
    int64_t off[3] = {0, 0, 0};
    int64_t count[kMaxBroadcastRank] = {};

    RowCursor(const BroadcastPlan& plan, int64_t row) : p(plan) {
        for (int d = p.rank - 2; d >= 0; --d) {
            count[d] = row % p.dims[d];
            row /= p.dims[d];
            for (int s = 0; s < 3; ++s) off[s] += count[d] * p.stride[s][d];
        }
    }
    void next() {
        for (int d = p.rank - 2; d >= 0; --d) {
            for (int s = 0; s < 3; ++s) off[s] += p.stride[s][d];
            if (++count[d] < p.dims[d]) return;
            for (int s = 0; s < 3; ++s) off[s] -= p.dims[d] * p.stride[s][d];
            count[d] = 0;
        }
    }
};

// Calls body(o0, o1, o2) for every full element of the plan, row by row (blocks of rows in
// parallel).
template <class F>
void each_full(const BroadcastPlan& p, F&& body) {
    const int64_t inner = p.rank ? p.dims[p.rank - 1] : 1;
    const int64_t rows = p.numel() / inner;
    const int64_t rows_per_task = std::max<int64_t>(1, 4096 / inner);
    const int64_t tasks = (rows + rows_per_task - 1) / rows_per_task;
    const auto walk = [&](auto len, auto s1, auto s2) {
        parallel_for(tasks, rows_per_task * inner, [&](int64_t t) {
            const int64_t first = t * rows_per_task;
            const int64_t last = std::min(rows, first + rows_per_task);
            RowCursor cur(p, first);
            for (int64_t r = first; r < last; ++r, cur.next()) {
                const int64_t j = r * len, o1 = cur.off[1], o2 = cur.off[2];
                for (int64_t i = 0; i < len; ++i) body(j + i, o1 + i * s1, o2 + i * s2);
            }
        });
    };
    with_run_shape(inner, p.rank ? p.stride[1][p.rank - 1] : 0,
                   p.rank ? p.stride[2][p.rank - 1] : 0, walk);
}

// Adds term(t) for t < len to four interleaved partial sums, t ≡ q (mod 4) into sum[q] and the
// tail into sum[0]: independent add chains, so a run is not bound by one add's latency.
template <class T>
inline void add_run(double (&sum)[4], int64_t len, T&& term) {
    int64_t t = 0;
    for (; t + 4 <= len; t += 4) {
        sum[0] += term(t);
        sum[1] += term(t + 1);
        sum[2] += term(t + 2);
        sum[3] += term(t + 3);
    }
    for (; t < len; ++t) sum[0] += term(t);
}

// add_run's four partial sums added up, as an array or as one vector of 4 (vec8.h).
inline double total(const double (&sum)[4]) {
    return (sum[0] + sum[1]) + (sum[2] + sum[3]);
}
inline double total(const D4& sum) {
    return (sum[0] + sum[1]) + (sum[2] + sum[3]);
}

// Σ term(o0, o1, o2) over the full elements that element i of operand k stands for, in double:
// along each run of the innermost repeated axis, add_run's four partial sums, added up in a fixed
// order at the end. The order depends on the shapes only: the same bits for any thread count.
template <class T>
double repeat_sum(const BroadcastPlan& p, int k, int64_t i, T&& term) {
    double sum[4] = {0, 0, 0, 0};
    p.for_each_repeat_run(
        k, i,
        [&](int64_t o0, int64_t o1, int64_t o2, int64_t len, int64_t s0, int64_t s1, int64_t s2) {
            add_run(sum, len,
                    [&](int64_t t) { return term(o0 + t * s0, o1 + t * s1, o2 + t * s2); });
        });
    return total(sum);
}

// reduce_repeats where operand k repeats along the plan's innermost axis only (squeeze-
// excitation's scale [N,C,1,1] under [N,C,H,W]): element i sums row i of the plan, in add_run's
// order. The rows are walked by a cursor, the run's strides known at compile time, each row's
// terms first written to a buffer by a loop that vectorises, then summed as vectors of add_run's
// four partial sums, four rows interleaved: a row's four add chains alone are latency-bound.
template <class T, class W>
void sum_rows(const BroadcastPlan& p, T&& term, W&& write) {
    constexpr int kRowGroup = 4;
    constexpr int64_t kChunk = 256;  // a multiple of 4: only a run's last chunk has a tail
    const int64_t run = p.dims[p.rank - 1];
    const int64_t count = p.numel() / run;
    const int64_t rows_per_task = kRowGroup * std::max<int64_t>(1, 1024 / run);
    const int64_t tasks = (count + rows_per_task - 1) / rows_per_task;
    const auto walk = [&](auto inner, auto s1, auto s2) {
        // Rows [i, i + g) from the cursor's position.
        const auto group = [&](int64_t i, auto rows, RowCursor& cur) {
            constexpr int g = decltype(rows)::value;
            int64_t o1[g], o2[g];
            for (int q = 0; q < g; ++q, cur.next()) {
                o1[q] = cur.off[1];
                o2[q] = cur.off[2];
            }
            D4 sum[g] = {};
            alignas(64) float v[g][kChunk];
            for (int64_t c = 0; c < inner; c += kChunk) {
                const int64_t len = std::min(kChunk, inner - c);
                for (int q = 0; q < g; ++q) {
                    const int64_t j = (i + q) * inner + c, b1 = o1[q] + c * s1, b2 = o2[q] + c * s2;
                    for (int64_t t = 0; t < len; ++t)
                        v[q][t] = term(j + t, b1 + t * s1, b2 + t * s2);
                }
                const int64_t len4 = len / 4 * 4;
                for (int64_t t = 0; t < len4; t += 4)
                    for (int q = 0; q < g; ++q) {
                        F4 f;
                        std::memcpy(&f, &v[q][t], sizeof(f));
                        sum[q] += __builtin_convertvector(f, D4);
                    }
                for (int q = 0; q < g; ++q)
                    for (int64_t t = len4; t < len; ++t) sum[q][0] += v[q][t];
            }
            for (int q = 0; q < g; ++q) write(i + q, total(sum[q]));
        };
        parallel_for(tasks, rows_per_task * run, [&](int64_t task) {
            const int64_t first = task * rows_per_task;
            const int64_t last = std::min(count, first + rows_per_task);
            RowCursor cur(p, first);
            int64_t i = first;
            for (; i + kRowGroup <= last; i += kRowGroup)
                group(i, std::integral_constant<int, kRowGroup>{}, cur);
            for (; i < last; ++i) group(i, std::integral_constant<int, 1>{}, cur);
        });
    };
    with_run_shape(run, p.stride[1][p.rank - 1], p.stride[2][p.rank - 1], walk);
}

// For every element i of operand k (which the plan repeats), write(i, Σ term over its repeats),
// split over threads by element; the order of each sum is fixed by the shapes. When operand k
// keeps the innermost axis (layer scale γ [C] under x [N,H,W,C], a mean over a middle axis), a
// task sums a block of up to 64 neighbouring elements together, walking the repeats once for the
// block (each element's sum in row-major order of the repeats) rather than once per element with
// a stride; otherwise each element's repeats are summed by repeat_sum.
template <class T, class W>
void reduce_repeats(const BroadcastPlan& p, int k, T&& term, W&& write) {
    const int64_t count = p.operand_numel(k), repeats = p.repeats(k);
    const int r = p.rank;
    if (r > 0 && p.stride[k][r - 1] == 0 && repeats == p.dims[r - 1]) {
        sum_rows(p, term, write);
        return;
    }
    if (r == 0 || p.stride[k][r - 1] == 0) {
        parallel_for(count, repeats, [&](int64_t i) { write(i, repeat_sum(p, k, i, term)); });
        return;
    }
    constexpr int64_t kBlock = 64;
    const int64_t inner = p.dims[r - 1];
    const int64_t blocks = (inner + kBlock - 1) / kBlock;
    const int64_t s0 = p.stride[0][r - 1], s1 = p.stride[1][r - 1], s2 = p.stride[2][r - 1];
    parallel_for(count / inner * blocks, repeats * kBlock, [&](int64_t task) {
        const int64_t first = task / blocks * inner + task % blocks * kBlock;
        const int64_t width = std::min(kBlock, inner - task % blocks * kBlock);
        double sum[kBlock] = {};
        p.for_each_repeat(k, first, [&](int64_t o0, int64_t o1, int64_t o2) {
            for (int64_t t = 0; t < width; ++t)
                sum[t] += term(o0 + t * s0, o1 + t * s1, o2 + t * s2);
        });
        for (int64_t t = 0; t < width; ++t) write(first + t, sum[t]);
    });
}

template <Bin B>
void binary_forward(const ForwardCall& c) {
    const Operands o = operands(c.node, c.inputs, c.params, c.workspace);
    const BroadcastPlan p = binary_plan(c.graph, c.node);
    const int64_t n = p.numel();
    const float* a = o.data[0];
    const float* b = o.data[1];
    float* y = as_f32(c.output);
    const int64_t na = p.operand_numel(1), nb = p.operand_numel(2);
    if (na == n && nb == n) {
        for_chunks(n, [&](int64_t s, int64_t len) {
            ConstArrMap x(a + s, len), z(b + s, len);
            if constexpr (B == Bin::Add) ArrMap(y + s, len) = x + z;
            if constexpr (B == Bin::Sub) ArrMap(y + s, len) = x - z;
            if constexpr (B == Bin::Mul) ArrMap(y + s, len) = x * z;
            if constexpr (B == Bin::Div) ArrMap(y + s, len) = x / z;
        });
    } else if (na == n && nb == 1) {
        const float k = b[0];
        for_chunks(n, [&](int64_t s, int64_t len) {
            for (int64_t i = s; i < s + len; ++i) y[i] = apply<B>(a[i], k);
        });
    } else if (na == 1 && nb == n) {
        const float k = a[0];
        for_chunks(n, [&](int64_t s, int64_t len) {
            for (int64_t i = s; i < s + len; ++i) y[i] = apply<B>(k, b[i]);
        });
    } else {
        each_full(p, [&](int64_t j, int64_t ia, int64_t ib) { y[j] = apply<B>(a[ia], b[ib]); });
    }
}

template <Bin B>
void binary_backward(const BackwardCall& c) {
    const Operands o = operands(c.node, c.inputs, c.params, c.workspace);
    const BroadcastPlan p = binary_plan(c.graph, c.node);
    const int64_t n = p.numel();
    const float* a = o.data[0];
    const float* b = o.data[1];
    const float* dy = c.grad_output;
    // Operand 0 before operand 1: x - x or x · x pass one buffer in both slots, and slot 1
    // accumulates onto slot 0's result.
    for (int k = 0; k < 2; ++k) {
        float* dst = nullptr;
        bool acc = false;
        switch (o.form.source[k]) {
            case BinaryForm::Source::Input:
                dst = c.grad_inputs[o.form.input[k]];
                acc = c.accumulate[o.form.input[k]];
                break;
            case BinaryForm::Source::Param:
                dst = c.grad_params[0];  // parameter gradients are always fresh
                break;
            case BinaryForm::Source::Scalar:
            case BinaryForm::Source::Constant:
                break;
        }
        if (!dst) continue;
        if (p.operand_numel(k + 1) == n) {
            each_full(p, [&](int64_t j, int64_t ia, int64_t ib) {
                const float g = partial<B>(k, dy[j], a, ia, b, ib);
                dst[j] = acc ? dst[j] + g : g;
            });
        } else {
            // Each element of a repeated operand sums its repeats in a fixed order.
            reduce_repeats(
                p, k + 1,
                [&](int64_t j, int64_t ia, int64_t ib) {
                    return partial<B>(k, dy[j], a, ia, b, ib);
                },
                [&](int64_t i, double sum) {
                    const auto g = static_cast<float>(sum);
                    dst[i] = acc ? dst[i] + g : g;
                });
        }
    }
}

}  // namespace

void add_forward(const ForwardCall& c) {
    if (c.node.inputs.size() == 2 &&
        c.graph.value(c.node.inputs[0]).shape == c.graph.value(c.node.inputs[1]).shape) {
        // The same-shape sum of residual blocks: a flat loop, in place when the output is an
        // input's buffer.
        const float* a = as_f32(c.inputs[0]);
        const float* b = as_f32(c.inputs[1]);
        float* y = as_f32(c.output);
        for_chunks(output_shape(c.graph, c.node).numel(), [&](int64_t s, int64_t n) {
            ArrMap(y + s, n) = ConstArrMap(a + s, n) + ConstArrMap(b + s, n);
        });
        return;
    }
    binary_forward<Bin::Add>(c);
}

void add_backward(const BackwardCall& c) {
    if (c.node.inputs.size() == 2 &&
        c.graph.value(c.node.inputs[0]).shape == c.graph.value(c.node.inputs[1]).shape) {
        // add(x, x) passes one buffer in both slots; slot 0 is finished before slot 1 adds to it.
        for (int i = 0; i < 2; ++i) {
            float* dx = c.grad_inputs[i];
            if (!dx) continue;
            const bool acc = c.accumulate[i];
            for_chunks(output_shape(c.graph, c.node).numel(), [&](int64_t s, int64_t n) {
                store(ArrMap(dx + s, n), ConstArrMap(c.grad_output + s, n), acc);
            });
        }
        return;
    }
    binary_backward<Bin::Add>(c);
}

void sub_forward(const ForwardCall& c) {
    binary_forward<Bin::Sub>(c);
}
void sub_backward(const BackwardCall& c) {
    binary_backward<Bin::Sub>(c);
}
void mul_forward(const ForwardCall& c) {
    binary_forward<Bin::Mul>(c);
}
void mul_backward(const BackwardCall& c) {
    binary_backward<Bin::Mul>(c);
}
void div_forward(const ForwardCall& c) {
    binary_forward<Bin::Div>(c);
}
void div_backward(const BackwardCall& c) {
    binary_backward<Bin::Div>(c);
}

// The plan's full tensor is the input; slot 1 is the output with the reduced axes kept.
void reduce_mean_forward(const ForwardCall& c) {
    const BroadcastPlan p = reduce_mean_plan(c.graph, c.node);
    const float* x = as_f32(c.inputs[0]);
    float* y = as_f32(c.output);
    const double count = static_cast<double>(p.repeats(1));
    reduce_repeats(
        p, 1, [&](int64_t j, int64_t, int64_t) { return x[j]; },
        [&](int64_t i, double sum) { y[i] = static_cast<float>(sum / count); });
}

void reduce_mean_backward(const BackwardCall& c) {
    float* dx = c.grad_inputs[0];
    if (!dx) return;
    const BroadcastPlan p = reduce_mean_plan(c.graph, c.node);
    const auto count = static_cast<float>(p.repeats(1));
    const float* dy = c.grad_output;
    const bool acc = c.accumulate[0];
    each_full(p, [&](int64_t j, int64_t i, int64_t) {
        const float g = dy[i] / count;
        dx[j] = acc ? dx[j] + g : g;
    });
}

}  // namespace rl::cpu
