// Every op's CUDA kernels against its CPU kernels: one small node at a time, on random
// inputs, forward values and every gradient (overwrite and accumulate) within a relative bound,
// bitwise where both backends compute the same operations in the same order (copies, dropout's
// mask, max/avg pooling), and every GPU result bitwise repeatable. Skipped, with the reason,
// where no GPU can be used.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "cuda/gpu_util.h"
#include "engine/backend.h"
#include "engine/op_harness.h"
#include "engine/ops/op.h"

namespace rl {
namespace {

using Ids = std::vector<ValueId>;
using Ints = std::vector<int64_t>;
using testing::Floats;
using testing::Grads;
using testing::OpHarness;

struct OpCaseSpec {
    std::string name;
    std::function<void(OpHarness&)> build;
    double rtol = 1e-4;
    bool exact = false;  // the GPU must give the CPU's bits
};

void PrintTo(const OpCaseSpec& c, std::ostream* os) {
    *os << c.name;
}

Attrs conv(int64_t out, Ints kernel, Ints stride, Ints pad, Ints dil, int64_t groups, bool bias) {
    Attrs a{{"out_channels", out}, {"kernel", kernel}};
    a.set("stride", stride);
    a.set("padding", pad);
    a.set("dilation", dil);
    a.set("groups", groups);
    if (!bias) a.set("bias", int64_t{0});
    return a;
}

std::vector<OpCaseSpec> op_cases() {
    std::vector<OpCaseSpec> c;
    c.push_back(
        {"linear", [](OpHarness& h) {
             h.op(OpKind::Linear, {h.input("x", Shape{3, 5, 37})}, {{"out_features", int64_t{19}}});
         }});
    c.push_back({"linear_no_bias", [](OpHarness& h) {
                     h.op(OpKind::Linear, {h.input("x", Shape{64, 48})},
                          {{"out_features", int64_t{33}}, {"bias", int64_t{0}}});
                 }});
    c.push_back(
        {"matmul", [](OpHarness& h) {
             h.op(OpKind::MatMul, {h.input("a", Shape{3, 7, 9}), h.input("b", Shape{3, 9, 5})});
         }});
    c.push_back({"matmul_transpose_b_alpha", [](OpHarness& h) {
                     h.op(OpKind::MatMul,
                          {h.input("a", Shape{2, 6, 8}), h.input("b", Shape{2, 5, 8})},
                          {{"transpose_b", int64_t{1}}, {"alpha", 0.25}});
                 }});
    c.push_back({"matmul_same_input", [](OpHarness& h) {
                     const ValueId x = h.input("x", Shape{2, 6, 6});
                     h.op(OpKind::MatMul, {x, x});
                 }});
    c.push_back({"add",
                 [](OpHarness& h) {
                     h.op(OpKind::Add, {h.input("a", Shape{5, 77}), h.input("b", Shape{5, 77})});
                 },
                 0, true});
    c.push_back({"add_same_input",
                 [](OpHarness& h) {
                     const ValueId x = h.input("x", Shape{3, 50});
                     h.op(OpKind::Add, {x, x});
                 },
                 0, true});
    c.push_back({"relu",
                 [](OpHarness& h) {
                     h.op(OpKind::Relu, {h.input("x", Shape{7, 301}, 0.01f)});
                 },
                 0, true});
    c.push_back({"gelu", [](OpHarness& h) { h.op(OpKind::Gelu, {h.input("x", Shape{7, 301})}); }});
    c.push_back({"tanh", [](OpHarness& h) { h.op(OpKind::Tanh, {h.input("x", Shape{7, 301})}); }});
    c.push_back({"sigmoid", [](OpHarness& h) {
                     h.op(OpKind::Sigmoid, {h.input("x", Shape{7, 301})});
                 }});
    c.push_back({"sin", [](OpHarness& h) { h.op(OpKind::Sin, {h.input("x", Shape{7, 301})}); }});
    c.push_back({"cos", [](OpHarness& h) { h.op(OpKind::Cos, {h.input("x", Shape{7, 301})}); }});
    // With a derivative input (JAX's sin(x, cos x)): the backward reads input 1.
    c.push_back({"sin_derivative", [](OpHarness& h) {
                     h.op(OpKind::Sin, {h.input("x", Shape{7, 301}), h.input("d", Shape{7, 301})});
                 }});
    c.push_back({"cos_derivative", [](OpHarness& h) {
                     h.op(OpKind::Cos, {h.input("x", Shape{7, 301}), h.input("d", Shape{7, 301})});
                 }});
    c.push_back({"layernorm", [](OpHarness& h) {
                     h.op(OpKind::LayerNorm, {h.input("x", Shape{6, 3, 300})}, {{"eps", 1e-5}});
                 }});
    c.push_back({"softmax", [](OpHarness& h) {
                     h.op(OpKind::Softmax, {h.input("x", Shape{4, 5, 513})});
                 }});
    c.push_back(
        {"reshape",
         [](OpHarness& h) {
             h.op(OpKind::Reshape, {h.input("x", Shape{2, 3, 4})}, {{"shape", Ints{4, -1}}});
         },
         0, true});
    c.push_back(
        {"transpose_3d",
         [](OpHarness& h) {
             h.op(OpKind::Transpose, {h.input("x", Shape{2, 3, 4})}, {{"perm", Ints{2, 0, 1}}});
         },
         0, true});
    c.push_back({"transpose_4d",
                 [](OpHarness& h) {
                     h.op(OpKind::Transpose, {h.input("x", Shape{2, 3, 4, 5})},
                          {{"perm", Ints{3, 1, 0, 2}}});
                 },
                 0, true});
    c.push_back({"sum_squares", [](OpHarness& h) {
                     h.op(OpKind::SumSquares, {h.input("x", Shape{9, 1000})});
                 }});
    c.push_back({"cross_entropy", [](OpHarness& h) {
                     const ValueId x = h.input("logits", Shape{37, 29});
                     h.op(OpKind::CrossEntropy, {x, h.labels("labels", Shape{37}, 29)});
                 }});
    c.push_back({"conv2d_3x3_pad",
                 [](OpHarness& h) {
                     h.op(OpKind::Conv2d, {h.input("x", Shape{2, 3, 9, 8})},
                          conv(5, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true));
                 },
                 2e-4});
    c.push_back({"conv2d_stride_dilation_asym_pad",
                 [](OpHarness& h) {
                     h.op(OpKind::Conv2d, {h.input("x", Shape{2, 4, 11, 10})},
                          conv(6, {3, 2}, {2, 3}, {1, 0, 2, 1}, {2, 1}, 1, false));
                 },
                 2e-4});
    c.push_back({"conv2d_groups",
                 [](OpHarness& h) {
                     h.op(OpKind::Conv2d, {h.input("x", Shape{2, 4, 7, 7})},
                          conv(6, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2, true));
                 },
                 2e-4});
    // 16 channels a group: the CPU's direct channels-last kernel against the GPU's im2col.
    c.push_back({"conv2d_groups_direct",
                 [](OpHarness& h) {
                     h.op(OpKind::Conv2d, {h.input("x", Shape{2, 32, 9, 9})},
                          conv(32, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 2, true));
                 },
                 2e-4});
    c.push_back({"conv2d_depthwise",
                 [](OpHarness& h) {
                     h.op(OpKind::Conv2d, {h.input("x", Shape{2, 3, 8, 9})},
                          conv(6, {3, 3}, {2, 1}, {1, 1, 1, 1}, {1, 1}, 3, true));
                 },
                 2e-4});
    c.push_back({"conv2d_pointwise",
                 [](OpHarness& h) {
                     h.op(OpKind::Conv2d, {h.input("x", Shape{3, 8, 5, 5})},
                          conv(4, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, true));
                 },
                 2e-4});
    c.push_back({"maxpool2d_overlapping",
                 [](OpHarness& h) {
                     h.op(
                         OpKind::MaxPool2d, {h.distinct_input("x", Shape{2, 3, 9, 8})},
                         {{"kernel", Ints{3, 3}}, {"stride", Ints{2, 2}}, {"padding", Ints{1, 1}}});
                 },
                 0, true});
    c.push_back(
        {"maxpool2d_ceil",
         [](OpHarness& h) {
             h.op(OpKind::MaxPool2d, {h.distinct_input("x", Shape{1, 2, 7, 7})},
                  {{"kernel", Ints{2, 2}}, {"stride", Ints{2, 2}}, {"ceil_mode", int64_t{1}}});
         },
         0, true});
    // Rows over 170 columns: the CPU's row path rather than its 16-plane blocks.
    c.push_back({"maxpool2d_wide",
                 [](OpHarness& h) {
                     h.op(
                         OpKind::MaxPool2d, {h.distinct_input("x", Shape{1, 2, 5, 185})},
                         {{"kernel", Ints{3, 3}}, {"stride", Ints{2, 2}}, {"padding", Ints{1, 1}}});
                 },
                 0, true});
    c.push_back({"avgpool2d_wide",
                 [](OpHarness& h) {
                     h.op(
                         OpKind::AvgPool2d, {h.input("x", Shape{1, 2, 5, 185})},
                         {{"kernel", Ints{3, 3}}, {"stride", Ints{2, 2}}, {"padding", Ints{1, 1}}});
                 },
                 0, true});
    c.push_back({"avgpool2d_include_pad",
                 [](OpHarness& h) {
                     h.op(OpKind::AvgPool2d, {h.input("x", Shape{2, 3, 7, 6})},
                          {{"kernel", Ints{3, 3}},
                           {"stride", Ints{2, 2}},
                           {"padding", Ints{1, 1}},
                           {"count_include_pad", int64_t{1}}});
                 },
                 0, true});
    c.push_back(
        {"avgpool2d_global", [](OpHarness& h) {
             h.op(OpKind::AvgPool2d, {h.input("x", Shape{2, 5, 9, 9})}, {{"global", int64_t{1}}});
         }});
    c.push_back({"batchnorm", [](OpHarness& h) {
                     h.op(OpKind::BatchNorm, {h.input("x", Shape{4, 3, 5, 6})}, {{"eps", 1e-3}});
                 }});
    c.push_back({"upsample_nearest2d",
                 [](OpHarness& h) {
                     h.op(OpKind::UpsampleNearest2d, {h.input("x", Shape{2, 3, 4, 5})},
                          {{"scale", Ints{2, 3}}});
                 },
                 0, true});
    c.push_back({"concat",
                 [](OpHarness& h) {
                     h.op(OpKind::Concat,
                          {h.input("a", Shape{2, 3, 4}), h.input("b", Shape{2, 1, 4}),
                           h.input("c", Shape{2, 2, 4})});
                 },
                 0, true});
    c.push_back({"concat_same_input_last_axis",
                 [](OpHarness& h) {
                     const ValueId x = h.input("x", Shape{3, 5});
                     h.op(OpKind::Concat, {x, x}, {{"axis", int64_t{-1}}});
                 },
                 0, true});
    c.push_back({"flatten",
                 [](OpHarness& h) {
                     h.op(OpKind::Flatten, {h.input("x", Shape{2, 3, 4, 5})});
                 },
                 0, true});
    c.push_back({"dropout",
                 [](OpHarness& h) {
                     h.op(OpKind::Dropout, {h.input("x", Shape{17, 301})}, {{"p", 0.3}});
                 },
                 0, true});
    // broadcasting binary ops, activations, reduce_mean.
    for (OpKind k : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div}) {
        const std::string name(op_name(k));
        const bool div = k == OpKind::Div;
        c.push_back({name + "_squeeze_excitation", [k, div](OpHarness& h) {
                         h.op(k, {h.input("x", Shape{2, 5, 7, 9}),
                                  h.input("s", Shape{2, 5, 1, 1}, div ? 0.3f : 0.0f)});
                     }});
        c.push_back({name + "_both_repeat", [k, div](OpHarness& h) {
                         h.op(k, {h.input("a", Shape{37, 1}),
                                  h.input("b", Shape{1, 41}, div ? 0.3f : 0.0f)});
                     }});
        c.push_back({name + "_layer_scale_param", [k, div](OpHarness& h) {
                         h.op(k, {h.input("x", Shape{2, 3, 5, 33})}, {{"param_shape", Ints{33}}});
                         if (div)
                             for (float& v : h.params[0]) v = v < 0 ? v - 0.3f : v + 0.3f;
                     }});
        c.push_back({name + "_window_mask_constant", [k](OpHarness& h) {
                         Ints bits;
                         for (int j = 0; j < 3 * 49 * 49; ++j) {
                             const float v = j % 7 == 0 ? -100.0f : 0.5f + 0.01f * (j % 13);
                             uint32_t u;
                             std::memcpy(&u, &v, sizeof(u));
                             bits.push_back(u);
                         }
                         h.op(k, {h.input("x", Shape{2, 3, 4, 49, 49})},
                              {{"constant_shape", Ints{1, 3, 1, 49, 49}}, {"constant_bits", bits}});
                     }});
        c.push_back({name + "_reversed_scalar", [k, div](OpHarness& h) {
                         h.op(k, {h.input("x", Shape{7, 301}, div ? 0.3f : 0.0f)},
                              {{"scalar", 1.5}, {"reversed", int64_t{1}}});
                     }});
    }
    c.push_back(
        {"clip", [](OpHarness& h) {
             h.op(OpKind::Clip, {h.input("x", Shape{7, 301})}, {{"min", -0.5}, {"max", 0.5}});
         }});
    c.push_back({"hard_sigmoid", [](OpHarness& h) {
                     h.op(OpKind::HardSigmoid, {h.input("x", Shape{7, 301})}, {{"alpha", 2.0}});
                 }});
    c.push_back({"hard_swish", [](OpHarness& h) {
                     h.op(OpKind::HardSwish, {h.input("x", Shape{7, 301})});
                     for (float& v : h.values.begin()->second.f) v *= 5.0f;
                 }});
    c.push_back({"gelu_tanh", [](OpHarness& h) {
                     h.op(OpKind::GeluTanh, {h.input("x", Shape{7, 301})});
                 }});
    c.push_back(
        {"reduce_mean_spatial", [](OpHarness& h) {
             h.op(OpKind::ReduceMean, {h.input("x", Shape{2, 5, 9, 11})}, {{"axes", Ints{2, 3}}});
         }});
    c.push_back({"reduce_mean_middle", [](OpHarness& h) {
                     h.op(OpKind::ReduceMean, {h.input("x", Shape{3, 40, 7})},
                          {{"axes", Ints{1}}, {"keepdims", int64_t{0}}});
                 }});
    // indexing: embeddings (by token ids, by constant positions), slice, causal mask; all
    // copies or sums in the CPU's order, so bitwise.
    c.push_back({"embedding_tokens",
                 [](OpHarness& h) {
                     h.op(OpKind::Embedding, {h.labels("ids", Shape{3, 37}, 50)},
                          {{"num_embeddings", int64_t{50}}, {"dim", int64_t{67}}});
                 },
                 0, true});
    c.push_back({"embedding_positions",
                 [](OpHarness& h) {
                     h.op(OpKind::Embedding, {},
                          {{"num_embeddings", int64_t{9}},
                           {"dim", int64_t{33}},
                           {"first", int64_t{1}},
                           {"period", int64_t{5}},
                           {"index_shape", Ints{3, 5}}});
                 },
                 0, true});
    c.push_back({"embedding_constant_indices",
                 [](OpHarness& h) {
                     Ints ind;
                     for (int k = 0; k < 7 * 49; ++k) ind.push_back((k * 31 + k / 7) % 169);
                     h.op(OpKind::Embedding, {},
                          {{"num_embeddings", int64_t{169}},
                           {"dim", int64_t{3}},
                           {"index_shape", Ints{7, 49}},
                           {"indices", ind}});
                 },
                 0, true});
    // Swin V2: exp; a parameter read as a value and a constant (copies: bitwise).
    c.push_back({"exp", [](OpHarness& h) { h.op(OpKind::Exp, {h.input("x", Shape{7, 33})}); }});
    c.push_back({"parameter",
                 [](OpHarness& h) {
                     h.op(OpKind::Parameter, {}, {{"shape", Ints{3, 1, 5}}});
                 },
                 0, true});
    c.push_back(
        {"constant",
         [](OpHarness& h) {
             Ints bits;
             for (int k = 0; k < 12; ++k) {
                 const float v = 0.25f * static_cast<float>(k) - 1.0f;
                 uint32_t u;
                 std::memcpy(&u, &v, 4);
                 bits.push_back(u);
             }
             h.op(OpKind::Constant, {}, {{"constant_shape", Ints{3, 4}}, {"constant_bits", bits}});
         },
         0, true});
    c.push_back({"slice_middle_axis",
                 [](OpHarness& h) {
                     h.op(OpKind::Slice, {h.input("x", Shape{3, 17, 29})},
                          {{"axis", int64_t{1}}, {"start", int64_t{2}}, {"end", int64_t{11}}});
                 },
                 0, true});
    // Swin V2's two: a gather of rows by constant indices (repeated, so its backward adds several
    // rows into one) and l2_normalize, with a row below eps.
    c.push_back({"gather",
                 [](OpHarness& h) {
                     h.op(OpKind::Gather, {h.input("x", Shape{5, 3, 4})},
                          {{"indices", Ints{4, 0, 4, 2, 2, 2, 1}}, {"index_shape", Ints{7}}});
                 },
                 0, true});
    c.push_back({"l2_normalize",
                 [](OpHarness& h) {
                     const ValueId x = h.input("x", Shape{6, 37});
                     for (size_t k = 37; k < 74; ++k) h.values.at(x).f[k] *= 1e-3f;  // row 1
                     h.op(OpKind::L2Normalize, {x}, {{"eps", 0.01}});
                 },
                 1e-5});  // the norm summed in another order than the CPU's
    c.push_back({"causal_mask",
                 [](OpHarness& h) {
                     h.op(OpKind::CausalMask, {h.input("x", Shape{2, 3, 9, 9})});
                 },
                 0, true});
    c.push_back({"pad_nchw",
                 [](OpHarness& h) {
                     h.op(OpKind::Pad, {h.input("x", Shape{2, 3, 7, 9})},
                          {{"pads", Ints{0, 0, 1, 2, 0, 1, 3, 0}}});
                 },
                 0, true});
    c.push_back({"pad_every_axis",
                 [](OpHarness& h) {
                     h.op(OpKind::Pad, {h.input("x", Shape{3, 5, 4, 6})},
                          {{"pads", Ints{1, 2, 0, 0, 1, 0, 3, 1}}});
                 },
                 0, true});
    // The u8 keep-mask (one byte per element; the rest of the harness's float buffer stays NaN
    // on both backends).
    c.push_back({"dropout_mask",
                 [](OpHarness& h) {
                     h.op(OpKind::DropoutMask, {h.input("x", Shape{17, 301})}, {{"p", 0.3}});
                 },
                 0, true});
    for (const char* kind : {"all_reduce_grad", "all_reduce", "all_gather", "reduce_scatter"})
        c.push_back({std::string("collective_") + kind,
                     [kind](OpHarness& h) {
                         h.op(OpKind::Collective, {h.input("x", Shape{6, 7})},
                              {{"kind", std::string(kind)}, {"ranks", int64_t{3}}});
                     },
                     0, true});
    return c;
}

// Device copies of one case's buffers, released at the end of the scope.
class DeviceBuffers {
  public:
    explicit DeviceBuffers(Backend& b) : b_(b) {}
    ~DeviceBuffers() {
        for (void* p : owned_) b_.release(p);
    }
    DeviceBuffers(const DeviceBuffers&) = delete;
    DeviceBuffers& operator=(const DeviceBuffers&) = delete;

    void* upload(const void* host, uint64_t bytes) {
        void* p = b_.allocate(bytes);
        owned_.push_back(p);
        b_.copy_from_host(p, host, bytes);
        return p;
    }
    // A buffer of NaNs: kernels must not read what an output or workspace held before.
    void* garbage(uint64_t bytes) {
        const Floats f = testing::workspace_for(bytes);
        return upload(f.data(), f.size() * sizeof(float));
    }
    Floats download(const void* p, size_t floats) {
        Floats f(floats);
        b_.copy_to_host(f.data(), p, floats * sizeof(float));
        return f;
    }

  private:
    Backend& b_;
    std::vector<void*> owned_;
};

const void* upload_value(DeviceBuffers& d, const testing::Buffer& b) {
    return b.dtype == DType::F32 ? d.upload(b.f.data(), b.f.size() * sizeof(float))
                                 : d.upload(b.i.data(), b.i.size() * sizeof(int32_t));
}

struct DeviceCase {
    std::vector<const void*> inputs;
    std::vector<float*> params;
};

DeviceCase upload_case(DeviceBuffers& d, const OpHarness& h) {
    DeviceCase dc;
    for (ValueId v : h.n().inputs) dc.inputs.push_back(upload_value(d, h.values.at(v)));
    for (const Floats& p : h.params)
        dc.params.push_back(static_cast<float*>(d.upload(p.data(), p.size() * sizeof(float))));
    return dc;
}

void* run_forward(Backend& b, DeviceBuffers& d, const OpHarness& h, const DeviceCase& dc) {
    const uint64_t out_bytes = static_cast<uint64_t>(h.out_shape().numel()) * sizeof(float);
    void* out = d.garbage(out_bytes);
    const uint64_t ws = h.def().fwd_workspace ? h.def().fwd_workspace(h.g, h.n()) : 0;
    b.forward({h.g, h.n(), dc.inputs.data(), dc.params.data(), out, ws ? d.garbage(ws) : nullptr});
    return out;
}

Floats gpu_forward(Backend& b, const OpHarness& h) {
    DeviceBuffers d(b);
    const DeviceCase dc = upload_case(d, h);
    void* out = run_forward(b, d, h, dc);
    return d.download(out, static_cast<size_t>(h.out_shape().numel()));
}

// As OpHarness::backward, on the device: residuals only where declared, input gradients from
// `initial` (accumulate) or NaN (overwrite), a value in two slots accumulating in its second.
Grads gpu_backward(Backend& b, const OpHarness& h, const Floats& dy, const Grads* initial) {
    DeviceBuffers d(b);
    const DeviceCase dc = upload_case(d, h);
    const Residuals res = h.def().residuals(h.g, h.n());
    const size_t k = h.n().inputs.size();
    std::vector<const void*> ins(k, nullptr);
    for (size_t i = 0; i < k; ++i)
        if (res.reads_input(static_cast<int>(i))) ins[i] = dc.inputs[i];
    const void* out = res.output ? run_forward(b, d, h, dc) : nullptr;
    std::map<ValueId, void*> dev_grad;
    std::vector<float*> gi(k, nullptr);
    std::unique_ptr<bool[]> acc(new bool[k]());
    std::set<ValueId> seen;
    for (size_t i = 0; i < k; ++i) {
        const ValueId v = h.n().inputs[i];
        if (h.g.value(v).dtype != DType::F32) continue;
        if (!dev_grad.count(v)) {
            const size_t n = h.values.at(v).f.size();
            dev_grad[v] = initial ? d.upload(initial->inputs.at(v).data(), n * sizeof(float))
                                  : d.garbage(n * sizeof(float));
        }
        gi[i] = static_cast<float*>(dev_grad[v]);
        acc[i] = seen.count(v) ? true : initial != nullptr;
        seen.insert(v);
    }
    std::vector<float*> gp;
    for (const Floats& p : h.params)
        gp.push_back(static_cast<float*>(d.garbage(p.size() * sizeof(float))));
    const uint64_t ws = h.def().bwd_workspace ? h.def().bwd_workspace(h.g, h.n()) : 0;
    const float* ddy = static_cast<const float*>(d.upload(dy.data(), dy.size() * sizeof(float)));
    b.backward({h.g, h.n(), ins.data(), out, dc.params.data(), ddy, gi.data(), acc.get(), gp.data(),
                ws ? d.garbage(ws) : nullptr});
    Grads g;
    for (auto& [v, p] : dev_grad) g.inputs[v] = d.download(p, h.values.at(v).f.size());
    for (size_t i = 0; i < h.params.size(); ++i)
        g.params.push_back(d.download(gp[i], h.params[i].size()));
    return g;
}

bool bitwise_equal(const Floats& a, const Floats& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void compare(const Floats& gpu, const Floats& cpu, const OpCaseSpec& spec,
             const std::string& what) {
    if (spec.exact)
        EXPECT_TRUE(bitwise_equal(gpu, cpu)) << what << " is not bitwise the CPU's";
    else
        testing::expect_close(gpu, cpu, spec.rtol, what);
}

// The values that receive no gradient: those only in the op's derivative-input slots (sin's
// cos(x), dropout's mask). Their buffers are left as they were, by both backends.
std::set<ValueId> gradient_free_inputs(const OpHarness& h) {
    std::set<ValueId> free, taking;
    for (size_t i = 0; i < h.n().inputs.size(); ++i)
        ((h.def().derivative_inputs >> i) & 1u ? free : taking).insert(h.n().inputs[i]);
    for (ValueId v : taking) free.erase(v);
    return free;
}

void compare(const Grads& gpu, const Grads& cpu, const OpCaseSpec& spec, const std::string& what,
             const std::set<ValueId>& skip) {
    ASSERT_EQ(gpu.inputs.size(), cpu.inputs.size());
    for (const auto& [v, g] : cpu.inputs)
        if (!skip.count(v)) compare(gpu.inputs.at(v), g, spec, what + " d" + std::to_string(v));
    ASSERT_EQ(gpu.params.size(), cpu.params.size());
    for (size_t p = 0; p < cpu.params.size(); ++p)
        compare(gpu.params[p], cpu.params[p], spec, what + " dparam" + std::to_string(p));
}

bool same(const Grads& a, const Grads& b) {
    if (a.inputs.size() != b.inputs.size() || a.params.size() != b.params.size()) return false;
    for (const auto& [v, g] : a.inputs)
        if (!bitwise_equal(g, b.inputs.at(v))) return false;
    for (size_t p = 0; p < a.params.size(); ++p)
        if (!bitwise_equal(a.params[p], b.params[p])) return false;
    return true;
}

class CudaOps : public ::testing::TestWithParam<OpCaseSpec> {};

TEST_P(CudaOps, MatchCpuForwardBackwardAccumulateAndRepeat) {
    RL_REQUIRE_GPU(gpu);
    const OpCaseSpec& spec = GetParam();
    OpHarness h(11, "gpu_ops");
    spec.build(h);

    const Floats y_cpu = h.forward();
    const Floats y_gpu = gpu_forward(*gpu, h);
    compare(y_gpu, y_cpu, spec, "forward");
    EXPECT_TRUE(bitwise_equal(y_gpu, gpu_forward(*gpu, h))) << "forward is not repeatable";

    const Floats dy = h.random(y_cpu.size());
    const std::set<ValueId> no_grad = gradient_free_inputs(h);
    const Grads g_cpu = h.backward(dy);
    const Grads g_gpu = gpu_backward(*gpu, h, dy, nullptr);
    compare(g_gpu, g_cpu, spec, "backward", no_grad);
    EXPECT_TRUE(same(g_gpu, gpu_backward(*gpu, h, dy, nullptr))) << "backward is not repeatable";

    // Accumulate: gradients added onto existing values.
    Grads initial;
    for (const auto& [v, g] : g_cpu.inputs) initial.inputs[v] = h.random(g.size());
    const Grads a_cpu = h.backward(dy, &initial);
    const Grads a_gpu = gpu_backward(*gpu, h, dy, &initial);
    compare(a_gpu, a_cpu, spec, "accumulating backward", no_grad);
    for (ValueId v : no_grad)
        EXPECT_TRUE(bitwise_equal(a_gpu.inputs.at(v), initial.inputs.at(v)))
            << "the GPU wrote a gradient into derivative input d" << v;
}

INSTANTIATE_TEST_SUITE_P(EveryOp, CudaOps, ::testing::ValuesIn(op_cases()),
                         [](const ::testing::TestParamInfo<OpCaseSpec>& info) {
                             return info.param.name;
                         });

// Runs without a GPU: the cases above cover every op the engine has.
TEST(CudaOpCases, CoverEveryOpKind) {
    std::set<OpKind> covered;
    for (const OpCaseSpec& c : op_cases()) {
        OpHarness h(11, "cover");
        c.build(h);
        covered.insert(h.n().op);
    }
    // opaque (plan-only abstract graphs) has no kernels on any backend.
    const std::set<OpKind> without = {OpKind::Opaque};
    for (int k = 0; k < kNumOpKinds; ++k)
        EXPECT_TRUE(without.count(static_cast<OpKind>(k)) || covered.count(static_cast<OpKind>(k)))
            << "no CUDA test case for op " << op_name(static_cast<OpKind>(k));
}

// Labels outside the logits' columns are refused with the CPU's message, not read out of bounds.
TEST(CudaOpErrors, CrossEntropyRejectsLabelOutOfRange) {
    RL_REQUIRE_GPU(gpu);
    OpHarness h(11, "gpu_ops");
    const ValueId x = h.input("logits", Shape{4, 3});
    const ValueId l = h.labels("labels", Shape{4}, 3);
    h.values.at(l).i[2] = 3;
    h.op(OpKind::CrossEntropy, {x, l});
    try {
        gpu_forward(*gpu, h);
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("row 2 has label 3, outside [0, 3)"),
                  std::string::npos)
            << e.what();
    }
}

}  // namespace
}  // namespace rl
