"""Shared by the peers (torch_peer.py, torch_gpu_peer.py, jax_peer.py): a RematLab network file (written
by `rematlab-cli network`) and the parameters and inputs `rematlab-cli run --dump-weights DIR`
wrote, as plain numpy arrays and a node list; and the segment ranges for checkpointing at
RematLab's checkpoints (the node names in `rematlab-cli run --json`'s "checkpoints")."""

import json
import os

import numpy as np

SUPPORTED = {"linear", "matmul", "add", "relu", "gelu", "tanh", "sigmoid", "layernorm", "softmax",
             "reshape", "transpose", "sum_squares", "cross_entropy"}
# The torch peers also run dropout (torch_ops.py), with RematLab's own masks (dropout_noise).
TORCH_SUPPORTED = SUPPORTED | {"dropout_mask", "dropout"}

_GAMMA = np.uint64(0x9E3779B97F4A7C15)


def _mix64(z):
    """SplitMix64's output function (engine/rng.h) on numpy uint64 (wrapping multiplies)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def dropout_noise(seed, node_name, p, shape):
    """RematLab's dropout mask for the node named `node_name` of a graph seeded `seed`
    (engine/rng.h: element i is kept when the top 24 bits of counter_hash(key, i) reach
    p·2^24, key = counter_hash(seed, 0) ^ FNV-1a(name)), as PyTorch's CPU dropout holds its
    mask: float32 noise, 1/(1-p) where kept and 0 where dropped, multiplied into the input."""
    fnv = 0xcbf29ce484222325
    for c in node_name.encode():
        fnv = ((fnv ^ c) * 0x100000001b3) & ((1 << 64) - 1)
    n = int(np.prod(shape, dtype=np.int64))
    with np.errstate(over="ignore"):
        key = _mix64(np.uint64(seed) + _GAMMA) ^ np.uint64(fnv)
        z = key + np.arange(1, n + 1, dtype=np.uint64) * _GAMMA
        keep = (_mix64(z) >> np.uint64(40)) >= np.uint64(int(p * 16777216.0 + 0.5))
    scale = np.float32(1.0 / (1.0 - p))
    return np.where(keep, scale, np.float32(0)).astype(np.float32).reshape(shape)


def load_npy(weights, name):
    return np.load(os.path.join(weights, name.replace("/", "_").replace("\\", "_") + ".npy"))


def param_suffixes(n):
    attrs = n.get("attrs", {})
    if n["op"] == "linear":
        return ["weight", "bias"] if attrs.get("bias", 1) else ["weight"]
    if n["op"] == "layernorm":
        return ["weight", "bias"]
    return []


class NetFile:
    def __init__(self, network_json, weights, supported=SUPPORTED):
        """`network_json`: the file's path, or its already parsed contents; `supported`: the
        ops the peer runs (SUPPORTED, or TORCH_SUPPORTED)."""
        if isinstance(network_json, dict):
            net = network_json
        else:
            with open(network_json) as f:
                net = json.load(f)
        self.name = net.get("name", "")
        self.seed = int(net.get("seed", 1))
        # The torch peers' dropout (torch_ops.py): each dropout_mask node's noise once drawn,
        # and whether PyTorch also draws its own mask every step (torch_peer.py --dropout-draw).
        self.noise = {}
        self.draw_dropout = True
        self.nodes = net["nodes"]
        bad = sorted({n["op"] for n in self.nodes} - set(supported))
        if bad:
            raise ValueError("ops not supported by the peers: " + ", ".join(bad))
        self.inputs = {}
        for inp in net["inputs"]:
            a = load_npy(weights, inp["name"])
            self.inputs[inp["name"]] = (a.astype(np.int64) if inp["dtype"] in ("i32", "int32")
                                        else np.ascontiguousarray(a, dtype=np.float32))
        self.params = {}
        for n in self.nodes:
            for s in param_suffixes(n):
                name = n["name"] + "." + s
                self.params[name] = np.ascontiguousarray(load_npy(weights, name), dtype=np.float32)
        self.index = {n["name"]: i for i, n in enumerate(self.nodes)}
        self.last_use = {}
        for i, n in enumerate(self.nodes):
            for a in n["inputs"]:
                self.last_use[a] = i

    def segments(self, checkpoints):
        """[(start, end)] node ranges ending just after each checkpoint node (sorted); the nodes
        after the last checkpoint form the plain tail."""
        bounds = sorted(self.index[c] for c in checkpoints if c in self.index)
        out, start = [], 0
        for b in bounds:
            out.append((start, b + 1))
            start = b + 1
        return out

    def crossing(self, start, end):
        made = {n["name"] for n in self.nodes[start:end]}
        before = {n["name"] for n in self.nodes[:start]}
        ins, outs = [], []
        for n in self.nodes[start:end]:
            for i in n["inputs"]:
                if i in before and i not in ins:
                    ins.append(i)
        for n in self.nodes[end:]:
            for i in n["inputs"]:
                if i in made and i not in outs:
                    outs.append(i)
        return ins, outs
