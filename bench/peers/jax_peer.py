#!/usr/bin/python3
"""JAX peer on the GPU: the same network and weights as a RematLab run, one jitted
training step (jax.value_and_grad of the loss) on the GPU under

  none                    no rematerialisation;
  segments                jax.checkpoint around each segment ending at one of RematLab's
                          checkpoints (--checkpoints, as torch_gpu_peer.py), the tail plain;
  policy:REGIONS:POLICY   jax.checkpoint(policy=jax.checkpoint_policies.POLICY) around each
                          region: REGIONS is `blocks` (the nodes sharing a blockN tag) or
                          `model` (every node but the loss), as RematLab's `policy` strategy
                          (policy:regions=...,policy=...).

Prints one JSON line per mode: median step time over --repeat steps after --warmup (the first
call compiles), and the peak: XLA's own plan for the compiled step (memory_analysis(): arguments
+ outputs + temporaries - aliased bytes), which is what the step needs whatever else the process
holds; the device allocator's process-wide high-water mark (memory_stats()'s peak_bytes_in_use,
XLA's preallocation turned off) is reported beside it, and used when the analysis is missing.
Several modes run in one process (--modes, or --jobs), so the weights are loaded once. Prints
{"skipped": reason} and exits 0 when JAX or a GPU is missing.
"""

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--network", required=True)
    p.add_argument("--weights", required=True)
    p.add_argument("--modes", default="none")
    p.add_argument("--checkpoints", default="")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--jobs", default="",
                   help="JSON file: a list of {strategy, mode, checkpoints} run in this one "
                        "process (the weights are loaded once); overrides --modes")
    a = p.parse_args()
    try:
        import jax
        import jax.numpy as jnp
    except Exception as e:  # noqa: BLE001 - any import failure means "no peer"
        print(json.dumps({"peer": "jax", "skipped": f"JAX is not importable: {e}"}))
        return 0
    why = ""
    try:
        gpus = jax.devices("gpu")
    except Exception as e:  # noqa: BLE001 - JAX raises RuntimeError without a GPU backend
        gpus, why = [], str(e)
    if not gpus:
        print(json.dumps({"peer": "jax", "skipped": "JAX sees no GPU" + (f": {why}" if why else "")}))
        return 0
    jax.config.update("jax_default_matmul_precision", "highest")  # float32 GEMMs, no TF32
    from peer_net import NetFile
    try:
        net = NetFile(a.network, a.weights)
    except ValueError as e:
        print(json.dumps({"peer": "jax", "skipped": str(e)}))
        return 0
    dev = gpus[0]
    inputs = {k: jax.device_put(v.astype("int32") if v.dtype.kind == "i" else v, dev)
              for k, v in net.inputs.items()}
    params = {k: jax.device_put(v, dev) for k, v in net.params.items()}

    def run_node(n, args, prm):
        op, attrs, name = n["op"], n.get("attrs", {}), n["name"]
        if op == "linear":
            y = args[0] @ prm[name + ".weight"].T
            return y + prm[name + ".bias"] if name + ".bias" in prm else y
        if op == "matmul":
            b = jnp.swapaxes(args[1], 1, 2) if attrs.get("transpose_b", 0) else args[1]
            return jnp.matmul(args[0], b) * attrs.get("alpha", 1.0)
        if op == "add":
            return args[0] + args[1]
        if op == "relu":
            return jax.nn.relu(args[0])
        if op == "gelu":
            return jax.nn.gelu(args[0], approximate=False)
        if op == "tanh":
            return jnp.tanh(args[0])
        if op == "sigmoid":
            return jax.nn.sigmoid(args[0])
        if op == "layernorm":
            x = args[0]
            mean = x.mean(-1, keepdims=True)
            var = ((x - mean) ** 2).mean(-1, keepdims=True)
            xh = (x - mean) / jnp.sqrt(var + attrs.get("eps", 1e-5))
            return xh * prm[name + ".weight"] + prm[name + ".bias"]
        if op == "softmax":
            return jax.nn.softmax(args[0], axis=-1)
        if op == "reshape":
            return args[0].reshape(attrs["shape"])
        if op == "transpose":
            return jnp.transpose(args[0], attrs["perm"])
        if op == "sum_squares":
            return 0.5 * jnp.sum(args[0] ** 2)
        if op == "cross_entropy":
            logp = jax.nn.log_softmax(args[0], axis=-1)
            return -jnp.mean(jnp.take_along_axis(logp, args[1][:, None], axis=-1))
        raise SystemExit(f"jax_peer: op '{op}' is not supported")

    def run_range(start, end, values, prm):
        for i in range(start, end):
            n = net.nodes[i]
            args = [values[x] if x in values else inputs[x] for x in n["inputs"]]
            values[n["name"]] = run_node(n, args, prm)
        return values

    def loss_fn(prm, regions, wrap):
        values, pos = {}, 0
        for start, end, ins, outs in regions:
            run_range(pos, start, values, prm)

            def segment(prm, *ts, start=start, end=end, ins=ins, outs=outs):
                local = run_range(start, end, dict(zip(ins, ts)), prm)
                return tuple(local[o] for o in outs)

            values.update(zip(outs, wrap(segment)(prm, *[values[i] for i in ins])))
            pos = end
        run_range(pos, len(net.nodes), values, prm)
        return values[net.nodes[-1]["name"]]

    def block_ranges():
        blocks = {}
        for i, n in enumerate(net.nodes):
            tag = next((t for t in n.get("tags", []) if t.startswith("block")), None)
            if tag is not None:
                lo, hi = blocks.get(tag, (i, i))
                blocks[tag] = (min(lo, i), max(hi, i))
        return sorted((lo, hi + 1) for lo, hi in blocks.values())

    if a.jobs:
        with open(a.jobs) as f:
            jobs = [(j.get("strategy", ""), j["mode"], j.get("checkpoints", [])) for j in json.load(f)]
    else:
        cps = [c for c in a.checkpoints.split(",") if c]
        jobs = [("", m, cps) for m in a.modes.split(",") if m]
    for strategy, mode, checkpoints in jobs:
        wrap = jax.checkpoint
        if mode == "none":
            ranges = []
        elif mode == "segments":
            ranges = net.segments(checkpoints)
        elif mode.startswith("policy:"):
            _, regions, policy = (mode.split(":") + ["", ""])[:3]
            pol = getattr(jax.checkpoint_policies, policy, None)
            if pol is None:
                raise SystemExit(f"jax_peer: unknown policy '{policy}'")
            wrap = lambda f, pol=pol: jax.checkpoint(f, policy=pol)  # noqa: E731
            ranges = block_ranges() if regions == "blocks" else [(0, len(net.nodes) - 1)]
        else:
            raise SystemExit(f"jax_peer: unknown mode '{mode}'")
        regions = [(s, e) + net.crossing(s, e) for s, e in ranges]
        step = jax.jit(jax.value_and_grad(lambda prm: loss_fn(prm, regions, wrap)))
        planned = None
        try:  # XLA's buffer assignment: what the compiled step needs at its peak
            ma = step.lower(params).compile().memory_analysis()
            planned = (ma.argument_size_in_bytes + ma.output_size_in_bytes +
                       ma.temp_size_in_bytes - ma.alias_size_in_bytes)
        except Exception:  # noqa: BLE001 - older JAX or a backend without the analysis
            pass
        times, loss = [], 0.0
        for r in range(a.warmup + max(1, a.repeat)):
            t0 = time.perf_counter()
            loss, grads = step(params)
            jax.block_until_ready(grads)
            if r >= a.warmup:
                times.append((time.perf_counter() - t0) * 1e3)
            del grads
        stats = dev.memory_stats() or {}
        print(json.dumps({"peer": "jax", "mode": mode, "strategy": strategy, "network": net.name,
                          "step_ms": statistics.median(times), "step_ms_all": times,
                          "peak_bytes": planned if planned else stats.get("peak_bytes_in_use"),
                          "compiled_peak_bytes": planned,
                          "process_peak_bytes": stats.get("peak_bytes_in_use"), "loss": float(loss),
                          "regions": len(regions), "jax": jax.__version__,
                          "device": dev.device_kind}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
