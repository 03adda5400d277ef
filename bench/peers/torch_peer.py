#!/usr/bin/python3
"""PyTorch peer of rematlab-cli: the same network, the same weights, one training step.

Builds the network of a RematLab network file (written by `rematlab-cli network`) op by op in
PyTorch, loads the parameters and inputs that `rematlab-cli run --dump-weights DIR` wrote, and
runs one training step (forward, loss, backward) under:

  none        plain autograd, nothing recomputed;
  segments    checkpoint_sequential at the segments RematLab chose (--checkpoints: the node names
              in `rematlab-cli run --json`'s "checkpoints"): every segment but the last runs
              under torch.utils.checkpoint, the last one plainly;
  per-block   torch.utils.checkpoint(use_reentrant=False) around each block (the nodes tagged
              blockN), everything outside the blocks plain.

Both checkpointed modes use the non-reentrant checkpoint (use_reentrant=False). PyTorch 1.13's
own checkpoint_sequential() only has the reentrant form, which drops the gradients of the first
segment's parameters unless the network input requires a gradient (a documented pitfall), and
cuts segments at equal module counts; the loop here is what it does, at RematLab's boundaries.

It reports, per mode, one JSON line: the median step time over --repeat steps (after --warmup;
wall time, and the process's CPU time, which does not grow when other jobs take the CPU),
the peak bytes of tensors held for the backward (see SavedTracker), the process's peak RSS, the
loss, and which BLAS PyTorch loaded; with --grads-out it writes every parameter's gradient as
DIR/<parameter>.npy, the names RematLab uses. With --count-flops, one more untimed step runs
under PyTorch's profiler, which counts the FLOPs of the step's matrix products and convolutions
(mm, addmm, bmm, baddbmm, conv2d), recomputation included.

Run it with Debian's interpreter (/usr/bin/python3), which sees python3-torch and python3-numpy.
"""

import argparse
import json
import os
import resource
import statistics
import sys
import time
import weakref


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--network", required=True, help="RematLab network .json file")
    p.add_argument("--weights", required=True, help="directory written by --dump-weights")
    p.add_argument("--modes", default="none", help="comma list of none, segments, per-block")
    p.add_argument("--checkpoints", default="",
                   help="comma list of node names: the segment boundaries for `segments`")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeat", type=int, default=5, help="timed steps (the median is reported)")
    p.add_argument("--warmup", type=int, default=1, help="untimed steps first")
    p.add_argument("--grads-out", default="",
                   help="directory for the gradients (of the first mode); created if missing")
    p.add_argument("--count-flops", action="store_true",
                   help="count the FLOPs of the step's matrix products (one more, untimed step)")
    p.add_argument("--dropout-draw", choices=("torch", "none"), default="torch",
                   help="torch: each dropout draws PyTorch's own mask every step (bernoulli_, as "
                        "F.dropout) before computing with RematLab's; none: no draw, PyTorch's "
                        "step without its RNG (see torch_ops.py)")
    p.add_argument("--grads64-out", default="",
                   help="also run the step in float64 (no checkpointing) and write its "
                        "gradients here: the reference that shows float32's own error")
    return p.parse_args(argv)


ARGS = parse_args(sys.argv[1:])
# Thread pools read these when they start: set them before torch is imported. The machine's
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are left as they are.
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(ARGS.threads)

# What this process has mapped (its BLAS, its allocator): zoo-check's tests, one reading of
# /proc/self/maps.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from zoo_check import loaded_malloc, mapped_files  # noqa: E402  (stdlib imports only)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.utils.checkpoint as tcp  # noqa: E402


# --- which BLAS ------------------------------------------------------------------------------

def blas_info():
    """The BLAS libraries mapped into this process (resolved paths), PyTorch's build config."""
    libs = set()
    try:
        libs = {os.path.realpath(p) for p in mapped_files()
                if any(k in os.path.basename(p) for k in ("blas", "mkl_rt", "lapack"))}
    except OSError:
        pass
    config = torch.__config__.show()
    blas_lines = [l.strip() for l in config.splitlines() if "BLAS" in l or "LAPACK" in l]
    info = {"loaded": sorted(libs), "torch_config": blas_lines, "malloc": loaded_malloc()}
    try:
        from threadpoolctl import threadpool_info  # optional
        info["threadpoolctl"] = [{k: d.get(k) for k in ("internal_api", "filepath",
                                                        "num_threads", "architecture")}
                                 for d in threadpool_info()]
    except Exception:  # noqa: BLE001 - not installed, or too old to know this BLAS
        pass
    return info


# --- saved-tensor accounting -------------------------------------------------------------------

class SavedTracker:
    """Live bytes of the tensors autograd holds for the backward, counted once per storage.

    Parameters and the graph inputs are excluded (RematLab counts them in their own categories,
    not as activations). A tensor is charged from the moment it is saved until autograd drops
    it (its SavedVariable is cleared after its node's backward). Under torch.utils.checkpoint
    (use_reentrant=False) the forward saves nothing but a placeholder; what the checkpoint keeps
    instead is charged here too: its inputs, until the last of its placeholders is dropped, and
    the tensors its recomputation stores, each until its placeholder is dropped.
    """

    def __init__(self, excluded_tensors):
        self.excluded = {self.key(t)[0] for t in excluded_tensors}
        self.count = {}
        self.live = 0
        self.peak = 0

    @staticmethod
    def key(t):
        s = t.storage()
        return s.data_ptr(), s.size() * s.element_size()

    def add(self, t):
        ptr, nbytes = self.key(t)
        if ptr in self.excluded or nbytes == 0:
            return None
        n = self.count.get(ptr, 0)
        self.count[ptr] = n + 1
        if n == 0:
            self.live += nbytes
            self.peak = max(self.peak, self.live)
        return ptr, nbytes

    def release(self, k):
        if k is None:
            return
        ptr, nbytes = k
        n = self.count[ptr] - 1
        if n == 0:
            del self.count[ptr]
            self.live -= nbytes
        else:
            self.count[ptr] = n


TRACKER = None  # the SavedTracker of the step being measured (None: count nothing)


class _Saved:
    """What our pack hook returns: the tensor, charged while autograd keeps this object."""
    __slots__ = ("t", "k", "tracker")

    def __init__(self, t, tracker):
        self.t = t
        self.tracker = tracker
        self.k = tracker.add(t) if tracker else None

    def __del__(self):
        if self.tracker:
            self.tracker.release(self.k)


class _CheckpointCall:
    """One torch.utils.checkpoint call: its placeholders and the inputs it keeps."""

    def __init__(self, tracker):
        self.tracker = tracker
        self.holders = []  # weak references to _Holder, in save order
        self.alive = 0
        self.input_keys = []

    def keep_inputs(self, tensors):
        if self.tracker and self.alive > 0:
            self.input_keys = [self.tracker.add(t) for t in tensors]

    def placeholder_dropped(self):
        self.alive -= 1
        if self.alive == 0 and self.tracker:
            for k in self.input_keys:
                self.tracker.release(k)
            self.input_keys = []


class _Holder:
    """Wraps the checkpoint's placeholder; charged with the tensor its recomputation stores."""
    __slots__ = ("inner", "call", "k", "__weakref__")

    def __init__(self, inner, call):
        self.inner = inner
        self.call = call
        self.k = None
        call.alive += 1

    def charge(self, t):
        if self.call.tracker and self.k is None:
            self.k = self.call.tracker.add(t)

    def __del__(self):
        if self.call.tracker:
            self.call.tracker.release(self.k)
        self.call.placeholder_dropped()


_UNPACKING = []  # the checkpoint calls whose placeholders are being unpacked (recomputing)
_LAST_CALL = [None]
_OriginalHooks = torch.autograd.graph.saved_tensors_hooks


class _TrackedHooks(_OriginalHooks):
    """Wraps the hooks torch.utils.checkpoint (non-reentrant, 1.13) installs, to see what it
    keeps: `pack`/`unpack` around the forward, `inner_pack` around the recomputation."""

    def __init__(self, pack_hook, unpack_hook):
        name = getattr(pack_hook, "__qualname__", "") if TRACKER else ""
        if "_checkpoint_without_reentrant" in name and name.endswith(".inner_pack"):
            call = _UNPACKING[-1] if _UNPACKING else None
            counter = [0]

            def pack(t):
                i = counter[0]
                counter[0] += 1
                if call is not None and i < len(call.holders):
                    h = call.holders[i]()
                    if h is not None:
                        h.charge(t)
                return pack_hook(t)

            super().__init__(pack, unpack_hook)
        elif "_checkpoint_without_reentrant" in name and name.endswith(".pack"):
            call = _CheckpointCall(TRACKER)
            _LAST_CALL[0] = call

            def pack(t):
                h = _Holder(pack_hook(t), call)
                call.holders.append(weakref.ref(h))
                return h

            def unpack(h):
                _UNPACKING.append(h.call)
                try:
                    return unpack_hook(h.inner)
                finally:
                    _UNPACKING.pop()

            super().__init__(pack, unpack)
        else:
            super().__init__(pack_hook, unpack_hook)


torch.autograd.graph.saved_tensors_hooks = _TrackedHooks


def checkpointed(fn, *args):
    out = tcp.checkpoint(fn, *args, use_reentrant=False)
    if _LAST_CALL[0] is not None:
        _LAST_CALL[0].keep_inputs([a for a in args if torch.is_tensor(a)])
        _LAST_CALL[0] = None
    return out


# --- the network -------------------------------------------------------------------------------

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_net import TORCH_SUPPORTED, NetFile  # noqa: E402
import torch_ops  # noqa: E402  (imports torch: after the thread settings above)


class Network(NetFile):
    """A RematLab network file run op by op with torch functions, parameters from the dump."""

    def __init__(self, net, weights):
        try:
            super().__init__(net, weights, TORCH_SUPPORTED)
        except ValueError as e:
            raise SystemExit(f"torch_peer: {e}")
        self.inputs = {k: torch.from_numpy(v) for k, v in self.inputs.items()}
        self.params = {k: torch.from_numpy(v).requires_grad_(True)
                       for k, v in self.params.items()}

    def run_node(self, n, args):
        return torch_ops.run_node(n, args, self.params, self)

    def run_range(self, start, end, values):
        """Runs nodes [start, end) reading `values` (name -> tensor, changed in place), dropping
        each value after its last reader, as a hand-written forward would."""
        for i in range(start, end):
            n = self.nodes[i]
            args = [values[a] if a in values else self.inputs[a] for a in n["inputs"]]
            values[n["name"]] = self.run_node(n, args)
            for a in n["inputs"]:
                if self.last_use.get(a) == i:
                    values.pop(a, None)
        return values

    def step(self, regions):
        """One forward + backward. `regions`: sorted, disjoint (start, end, ins, outs) node ranges
        run under checkpoint; the rest runs plainly. Returns the loss."""
        values = {}
        pos = 0
        for start, end, ins, outs in regions:
            self.run_range(pos, start, values)

            def segment(*tensors, start=start, end=end, ins=ins, outs=outs):
                local = self.run_range(start, end, dict(zip(ins, tensors)))
                return tuple(local[o] for o in outs)

            # The checkpoint keeps what it needs; drop our references to what ends here.
            args = [values.pop(i) if self.last_use.get(i, -1) < end else values[i] for i in ins]
            values.update(zip(outs, checkpointed(segment, *args)))
            del args
            pos = end
        self.run_range(pos, len(self.nodes), values)
        loss = values[self.nodes[-1]["name"]]
        loss.backward()
        return loss

    def regions_for(self, mode, checkpoints):
        return [(a, b) + self.crossing(a, b) for a, b in self.ranges_for(mode, checkpoints)]

    def ranges_for(self, mode, checkpoints):
        if mode == "none":
            return []
        if mode == "segments":  # segment i = (b_{i-1}, b_i]; the last segment runs plainly
            return self.segments(checkpoints)
        if mode == "per-block":
            blocks = {}
            for i, n in enumerate(self.nodes):
                tag = next((t for t in n.get("tags", []) if t.startswith("block")), None)
                if tag is not None:
                    lo, hi = blocks.get(tag, (i, i))
                    blocks[tag] = (min(lo, i), max(hi, i))
            regions = sorted((lo, hi + 1) for lo, hi in blocks.values())
            for (a0, a1), (b0, _) in zip(regions, regions[1:]):
                if a1 > b0:
                    raise SystemExit("torch_peer: blocks are not contiguous ranges of nodes")
            return regions
        raise SystemExit(f"torch_peer: unknown mode '{mode}' (none, segments, per-block)")


PRODUCT_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::conv2d")


def count_product_flops(step):
    """The FLOPs of one step's matrix products and convolutions, as PyTorch's profiler counts
    them (with_flops: 2·m·n·k a product). It counts aten::mul and aten::add too, an element a
    FLOP; those are left out, so the figure is what a GEMM runs."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU], with_flops=True) as prof:
        step()
    return int(sum(e.flops for e in prof.key_averages() if e.key in PRODUCT_OPS and e.flops))


def save_grads(params, directory):
    os.makedirs(directory, exist_ok=True)
    for name, p in params.items():
        np.save(os.path.join(directory, name.replace("/", "_") + ".npy"), p.grad.numpy())


def write_float64_grads(model, directory):
    """The same step in float64 (no checkpointing), its gradients written as float64 .npy."""
    saved = model.params, model.inputs
    model.params = {k: v.detach().double().requires_grad_(True) for k, v in saved[0].items()}
    model.inputs = {k: v.double() if v.is_floating_point() else v for k, v in saved[1].items()}
    try:
        model.step([])
        save_grads(model.params, directory)
    finally:
        model.params, model.inputs = saved


def main():
    global TRACKER
    torch.set_num_threads(ARGS.threads)
    with open(ARGS.network) as f:
        net = json.load(f)
    model = Network(net, ARGS.weights)
    model.draw_dropout = ARGS.dropout_draw == "torch"
    checkpoints = [c for c in ARGS.checkpoints.split(",") if c]
    for c in checkpoints:
        if c not in model.index:
            raise SystemExit(f"torch_peer: checkpoint '{c}' is not a node of the network")
    excluded = list(model.params.values()) + list(model.inputs.values())
    blas = blas_info()

    def params_to_none():
        for p in model.params.values():
            p.grad = None

    for mi, mode in enumerate(m for m in ARGS.modes.split(",") if m):
        regions = model.regions_for(mode, checkpoints)
        for _ in range(ARGS.warmup):
            params_to_none()
            model.step(regions)
        times, cpu = [], []
        for _ in range(max(1, ARGS.repeat)):
            params_to_none()
            t0, c0 = time.perf_counter(), time.process_time()
            model.step(regions)
            times.append((time.perf_counter() - t0) * 1e3)
            cpu.append((time.process_time() - c0) * 1e3)
        # One more step, untimed, with the saved-tensor accounting on.
        params_to_none()
        TRACKER = SavedTracker(excluded)
        with _OriginalHooks(lambda t: _Saved(t, TRACKER), lambda s: s.t):
            loss = model.step(regions)
        saved_peak, leftover = TRACKER.peak, TRACKER.live
        TRACKER = None
        product_flops = None
        if ARGS.count_flops:
            params_to_none()
            product_flops = count_product_flops(lambda: model.step(regions))
        if ARGS.grads_out and mi == 0:
            save_grads(model.params, ARGS.grads_out)
        if ARGS.grads64_out and mi == 0:
            write_float64_grads(model, ARGS.grads64_out)
        print(json.dumps({
            "mode": mode,
            "network": net.get("name", ""),
            "threads": torch.get_num_threads(),
            "repeat": len(times),
            "step_ms": statistics.median(times),
            "step_ms_all": times,
            "step_cpu_ms": statistics.median(cpu),
            "saved_peak_bytes": saved_peak,
            "saved_bytes_after_step": leftover,
            "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "loss": float(loss.detach()),
            "checkpointed_regions": len(regions),
            "product_flops": product_flops,
            "product_ops": list(PRODUCT_OPS) if ARGS.count_flops else None,
            "torch": torch.__version__,
            "blas": blas,
        }), flush=True)


if __name__ == "__main__":
    main()
