#pragma once
// Field-by-field graph equality for tests (Graph has no operator==: it is not needed outside).
#include <gtest/gtest.h>

#include "engine/graph.h"

namespace rl::testing {

inline void expect_same_graph(const Graph& a, const Graph& b) {
    EXPECT_EQ(a.name(), b.name());
    EXPECT_EQ(a.seed(), b.seed());
    EXPECT_EQ(a.finalized(), b.finalized());
    EXPECT_EQ(a.inputs(), b.inputs());
    ASSERT_EQ(a.num_nodes(), b.num_nodes());
    ASSERT_EQ(a.num_values(), b.num_values());
    ASSERT_EQ(a.num_params(), b.num_params());
    for (NodeId n = 0; n < a.num_nodes(); ++n) {
        const Node& x = a.node(n);
        const Node& y = b.node(n);
        SCOPED_TRACE("node " + x.name);
        EXPECT_EQ(x.name, y.name);
        EXPECT_EQ(x.op, y.op);
        EXPECT_TRUE(x.attrs == y.attrs);
        EXPECT_EQ(x.inputs, y.inputs);
        EXPECT_EQ(x.output, y.output);
        EXPECT_EQ(x.params, y.params);
        EXPECT_EQ(x.tags, y.tags);
    }
    for (ValueId v = 0; v < a.num_values(); ++v) {
        const Value& x = a.value(v);
        const Value& y = b.value(v);
        SCOPED_TRACE("value " + x.name);
        EXPECT_EQ(x.name, y.name);
        EXPECT_EQ(x.dtype, y.dtype);
        EXPECT_EQ(x.shape, y.shape);
        EXPECT_EQ(x.bytes, y.bytes);
        EXPECT_EQ(x.producer, y.producer);
        EXPECT_EQ(x.requires_grad, y.requires_grad);
        EXPECT_EQ(x.label_classes, y.label_classes);
        EXPECT_EQ(x.consumers, y.consumers);
    }
    for (ParamId p = 0; p < a.num_params(); ++p) {
        const Param& x = a.param(p);
        const Param& y = b.param(p);
        SCOPED_TRACE("param " + x.name);
        EXPECT_EQ(x.name, y.name);
        EXPECT_EQ(x.shape, y.shape);
        EXPECT_EQ(x.bytes, y.bytes);
        EXPECT_EQ(x.init, y.init);
        EXPECT_EQ(x.fan_in, y.fan_in);
        EXPECT_EQ(x.owner, y.owner);
    }
}

}  // namespace rl::testing
