#!/usr/bin/python3
"""PyTorch peer on the GPU: the same network and weights as a RematLab run, one
training step on CUDA under

  none       plain autograd (eager), nothing recomputed;
  segments   torch.utils.checkpoint (non-reentrant) around each segment that ends at one of
             RematLab's checkpoints (--checkpoints: the "checkpoints" of `rematlab-cli run
             --json` for sqrt-n or periodic), the tail plain: what checkpoint_sequential does,
             at RematLab's boundaries.

Prints one JSON line per mode: median step time over --repeat steps after --warmup (wall time,
torch.cuda.synchronize() after each step), the peak of torch.cuda.max_memory_allocated() over a
step (parameters and inputs included, as RematLab's peak), and the loss. Prints
{"skipped": reason} and exits 0 when PyTorch or a CUDA device is missing.
"""

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


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
    p.add_argument("--device", default="cuda",
                   help="cuda; cpu only to check this script on a machine without a GPU")
    a = p.parse_args()
    try:
        import torch
        import torch.utils.checkpoint as tcp
    except Exception as e:  # noqa: BLE001 - any import failure means "no peer"
        print(json.dumps({"peer": "torch", "skipped": f"PyTorch is not importable: {e}"}))
        return 0
    gpu = a.device == "cuda"
    if gpu and not torch.cuda.is_available():
        print(json.dumps({"peer": "torch", "skipped": "torch.cuda.is_available() is False"}))
        return 0
    from peer_net import TORCH_SUPPORTED, NetFile
    import torch_ops
    try:
        net = NetFile(a.network, a.weights, TORCH_SUPPORTED)
    except ValueError as e:
        print(json.dumps({"peer": "torch", "skipped": str(e)}))
        return 0
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 GEMMs, as ours
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device(a.device)
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    inputs = {k: torch.from_numpy(v).to(dev) for k, v in net.inputs.items()}
    params = {k: torch.from_numpy(v).to(dev).requires_grad_(True) for k, v in net.params.items()}

    def run_node(n, args):
        return torch_ops.run_node(n, args, params, net)

    def run_range(start, end, values):
        for i in range(start, end):
            n = net.nodes[i]
            args = [values[x] if x in values else inputs[x] for x in n["inputs"]]
            values[n["name"]] = run_node(n, args)
            for x in n["inputs"]:
                if net.last_use.get(x) == i:
                    values.pop(x, None)
        return values

    def step(regions):
        values, pos = {}, 0
        for start, end, ins, outs in regions:
            run_range(pos, start, values)

            def segment(*ts, start=start, end=end, ins=ins, outs=outs):
                local = run_range(start, end, dict(zip(ins, ts)))
                return tuple(local[o] for o in outs)

            args = [values.pop(i) if net.last_use.get(i, -1) < end else values[i] for i in ins]
            values.update(zip(outs, tcp.checkpoint(segment, *args, use_reentrant=False)))
            del args
            pos = end
        run_range(pos, len(net.nodes), values)
        loss = values[net.nodes[-1]["name"]]
        loss.backward()
        return loss

    if a.jobs:
        with open(a.jobs) as f:
            jobs = [(j.get("strategy", ""), j["mode"], j.get("checkpoints", [])) for j in json.load(f)]
    else:
        cps = [c for c in a.checkpoints.split(",") if c]
        jobs = [("", m, cps) for m in a.modes.split(",") if m]
    for strategy, mode, checkpoints in jobs:
        if mode == "none":
            regions = []
        elif mode == "segments":
            regions = [(s, e) + net.crossing(s, e) for s, e in net.segments(checkpoints)]
        else:
            raise SystemExit(f"torch_gpu_peer: unknown mode '{mode}' (none, segments)")
        times, peaks, loss = [], [], 0.0
        for r in range(a.warmup + max(1, a.repeat)):
            for t in params.values():
                t.grad = None
            sync()
            if gpu:
                torch.cuda.reset_peak_memory_stats()
            t0 = time.perf_counter()
            loss = step(regions)
            sync()
            if r >= a.warmup:
                times.append((time.perf_counter() - t0) * 1e3)
                peaks.append(torch.cuda.max_memory_allocated() if gpu else 0)
        print(json.dumps({"peer": "torch", "mode": mode, "strategy": strategy, "network": net.name,
                          "step_ms": statistics.median(times), "step_ms_all": times,
                          "peak_bytes": max(peaks), "loss": float(loss.detach()),
                          "regions": len(regions), "torch": torch.__version__,
                          "device": torch.cuda.get_device_name(0) if gpu else "cpu"}),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
