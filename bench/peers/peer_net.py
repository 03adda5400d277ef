"""Shared by the peers (torch_peer.py, torch_gpu_peer.py, jax_peer.py): a RematLab network file (written
by `rematlab-cli network`) and the parameters and inputs `rematlab-cli run --dump-weights DIR`
wrote, as plain numpy arrays and a node list; and the segment ranges for checkpointing at
RematLab's checkpoints (the node names in `rematlab-cli run --json`'s "checkpoints")."""

import json
import os

import numpy as np

SUPPORTED = {"linear", "matmul", "add", "relu", "gelu", "tanh", "sigmoid", "layernorm", "softmax",
             "reshape", "transpose", "sum_squares", "cross_entropy"}


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
    def __init__(self, network_json, weights):
        """`network_json`: the file's path, or its already parsed contents."""
        if isinstance(network_json, dict):
            net = network_json
        else:
            with open(network_json) as f:
                net = json.load(f)
        self.name = net.get("name", "")
        self.nodes = net["nodes"]
        bad = sorted({n["op"] for n in self.nodes} - SUPPORTED)
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
