// reshape and transpose: data movement only.
#include "engine/ops/op_defs.h"

namespace rl::ops {
namespace {

std::string format_list(const std::vector<int64_t>& v) {
    return format_dims(Shape(Dims(v)));
}

Inferred reshape_infer(const Graph& g, const Node& n) {
    require_f32(g, n);
    const Shape& x = in_shape(g, n, 0);
    Dims dims = n.attrs.get_ints("shape");
    int wildcard = -1;
    int64_t known = 1;
    for (size_t i = 0; i < dims.size(); ++i) {
        if (dims[i] == -1) {
            if (wildcard >= 0)
                throw Error("attribute 'shape' " + format_list(dims) +
                            " has more than one -1; at most one axis can be inferred");
            wildcard = static_cast<int>(i);
        } else if (dims[i] <= 0) {
            throw Error("attribute 'shape' " + format_list(dims) +
                        " has an axis that is neither positive nor -1");
        } else {
            if (known > (int64_t{1} << 62) / dims[i])
                throw Error("attribute 'shape' " + format_list(dims) +
                            " has more than 2^62 elements");
            known *= dims[i];
        }
    }
    const int64_t total = x.numel();
    if (wildcard >= 0) {
        if (total % known != 0)
            throw Error("input 0 has shape " + format_dims(x) + " (" + std::to_string(total) +
                        " elements), which cannot be reshaped to " + format_list(dims));
        dims[static_cast<size_t>(wildcard)] = total / known;
    } else if (known != total) {
        throw Error("input 0 has shape " + format_dims(x) + " (" + std::to_string(total) +
                    " elements) but reshape's target " + format_list(dims) + " has " +
                    std::to_string(known));
    }
    return {DType::F32, Shape(std::move(dims)), {}};
}

Residuals no_residuals(const Graph&, const Node&) {
    return {};
}

OpCost copy_cost(const Graph& g, const Node& n) {
    const double e = numel_d(in_shape(g, n, 0));
    return {0, 0, 8 * e, 8 * e};
}

Inferred transpose_infer(const Graph& g, const Node& n) {
    require_f32(g, n);
    const Shape& x = in_shape(g, n, 0);
    const std::vector<int64_t> perm = n.attrs.get_ints("perm");
    if (x.rank() > 4)
        throw Error("input 0 has shape " + format_dims(x) + " but transpose supports rank up to 4");
    if (static_cast<int>(perm.size()) != x.rank())
        throw Error("attribute 'perm' " + format_list(perm) + " has " +
                    std::to_string(perm.size()) + " entries but input 0 " + format_dims(x) +
                    " has rank " + std::to_string(x.rank()));
    std::vector<bool> seen(perm.size(), false);
    Shape out;
    for (int64_t p : perm) {
        if (p < 0 || p >= x.rank() || seen[static_cast<size_t>(p)])
            throw Error("attribute 'perm' " + format_list(perm) + " is not a permutation of 0.." +
                        std::to_string(x.rank() - 1));
        seen[static_cast<size_t>(p)] = true;
        out.dims.push_back(x[static_cast<int>(p)]);
    }
    return {DType::F32, out, {}};
}

}  // namespace

const OpDef kReshapeDef{
    .name = "reshape",
    .about = "copy into a new shape (attr: shape, one -1 allowed)",
    .min_inputs = 1,
    .max_inputs = 1,
    .is_loss = false,
    .is_dot = false,
    .infer = reshape_infer,
    .residuals = no_residuals,
    .fwd_workspace = nullptr,
    .bwd_workspace = nullptr,
    .cost = copy_cost,
};

const OpDef kTransposeDef{
    .name = "transpose",
    .about = "permute the axes, rank up to 4 (attr: perm)",
    .min_inputs = 1,
    .max_inputs = 1,
    .is_loss = false,
    .is_dot = false,
    .infer = transpose_infer,
    .residuals = no_residuals,
    .fwd_workspace = nullptr,
    .bwd_workspace = nullptr,
    .cost = copy_cost,
};

}  // namespace rl::ops
