"""plan-check: the plans `rematlab-cli export-plan --format torch` writes, applied in PyTorch.

For ResNet-18 and MobileNetV3-small (torchvision 0.14, weights=None, num_classes=10, 64 px,
batch 2), the GPT-2-style model of scripts/zoo_check.py and our presets (built as PyTorch modules
from `rematlab-cli network` and the weights `rematlab-cli run --dump-weights` writes), and for
each strategy:
  1. `rematlab-cli export-plan --format json` (our predicted activation peaks: the plan's and the
     wrapping's) and `--format torch` (the module with apply(model));
  2. one training step of the plain model and one of a copy with the plan applied, in Debian's
     PyTorch (float32, CPU), measuring what autograd holds for the backward with
     bench/peers/torch_peer.py's accounting (saved tensors, each storage once; a checkpoint's
     inputs and what its recomputation stores; parameters, buffers and inputs excluded);
  3. the gradients of the wrapped step against the plain step's.
It prints one row per (model, strategy) and, with --write-doc, writes the table into
docs/plans.md with the date and the machine.

The ONNX models get ½·Σy² on their first output as their loss, as `rematlab-cli` gives them.
Run with Debian's interpreter (/usr/bin/python3): it sees python3-torch and python3-torchvision.
"""
import argparse
import copy
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PRESETS = ["mlp:depth=16,width=256,batch=64", "resmlp:depth=8,width=128,batch=64",
           "transformer:layers=4,d_model=64,heads=4,seq=32,batch=4,vocab=128"]
ZOO = ["resnet18", "mobilenet_v3_small", "gpt2_tiny"]
STRATEGIES = ["none", "sqrt-n", "sqrt-n:segments=2", "periodic:k=4",
              "policy:regions=blocks,policy=nothing_saveable",
              "policy:regions=blocks,policy=dots_saveable", "revolve", "optimal"]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cli", default=os.path.join(ROOT, "build", "app", "rematlab-cli"))
    p.add_argument("--models", default=";".join(PRESETS + ZOO),
                   help="';'-separated presets and zoo models (zoo names may also be ','-separated): "
                        + ", ".join(ZOO))
    p.add_argument("--strategies", default=";".join(STRATEGIES), help="';'-separated specs")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--work", default="", help="folder for exports (default: a temporary one)")
    p.add_argument("--write-doc", action="store_true", help="write the table into docs/plans.md")
    return p.parse_args()


ARGS = parse_args()
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(ARGS.threads)

# torch_peer.py installs its saved-tensor accounting when imported; it reads a command line at
# import, so it gets a placeholder one (only its accounting is used here).
sys.path.insert(0, os.path.join(ROOT, "bench", "peers"))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
_argv = sys.argv
sys.argv = ["torch_peer", "--network", "-", "--weights", "-", "--threads", str(ARGS.threads)]
import torch_peer as tp  # noqa: E402
sys.argv = _argv
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.utils.checkpoint as tcp  # noqa: E402
import torch_ops  # noqa: E402
from peer_net import NetFile, param_suffixes  # noqa: E402

# The exported plans call torch.utils.checkpoint.checkpoint; charge each call's inputs as
# torch_peer's own checkpointed() does.
_original_checkpoint = tcp.checkpoint


def _tracked_checkpoint(fn, *args, **kwargs):
    out = _original_checkpoint(fn, *args, **kwargs)
    call = tp._LAST_CALL[0]
    if call is not None:
        call.keep_inputs([a for a in args if torch.is_tensor(a)])
        tp._LAST_CALL[0] = None
    return out


tcp.checkpoint = _tracked_checkpoint


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def cli(*args):
    r = subprocess.run([ARGS.cli, *args], capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr.strip()


# --- presets as PyTorch modules ----------------------------------------------------------------

class Leaf(nn.Module):
    """One node of a RematLab network, its parameters named as ours ("<node>.weight")."""

    def __init__(self, node, arrays):
        super().__init__()
        self.node = node
        self.suffixes = param_suffixes(node)
        for s in self.suffixes:
            self.register_parameter(s, nn.Parameter(torch.from_numpy(arrays[node["name"] + "." + s])))

    def forward(self, *args):
        name = self.node["name"]
        return torch_ops.run_node(self.node, args,
                                  {name + "." + s: getattr(self, s) for s in self.suffixes})


class Graph(nn.Module):
    """A container that runs its children in order over named values."""

    def __init__(self, children, inputs, outputs):
        super().__init__()
        self.order = []
        for name, module, ins, outs in children:
            self.add_module(name, module)
            self.order.append((name, ins, outs))
        self.inputs, self.outputs = inputs, outputs

    def forward(self, *args):
        values = dict(zip(self.inputs, args))
        for name, ins, outs in self.order:
            y = getattr(self, name)(*[values[v] for v in ins])
            values.update(zip(outs, y if len(outs) > 1 else (y,)))
        out = tuple(values[o] for o in self.outputs)
        return out if len(out) > 1 else out[0]


def build_preset(net, arrays):
    """The module tree of a network file: a node "a.b" is module b inside a. A container whose
    children pass one value each to the next, and nothing else, is an nn.Sequential (what
    export-plan wraps runs of); others run their children by name."""
    nodes = net["nodes"][:-1]  # the loss is applied outside the model
    producer = {n["name"]: i for i, n in enumerate(nodes)}
    readers = {}
    for i, n in enumerate(net["nodes"]):
        for v in n["inputs"]:
            readers.setdefault(v, []).append(i)

    def inside(i, path):
        name = nodes[i]["name"]
        return not path or name == path or name.startswith(path + ".")

    def crossing(members):
        ins, outs = [], []
        for i in members:
            for v in nodes[i]["inputs"]:
                if (v not in producer or producer[v] not in members) and v not in ins:
                    ins.append(v)
        for i in members:
            v = nodes[i]["name"]
            if any(r not in members for r in readers.get(v, [])):
                outs.append(v)
        return ins, outs

    def build(path):
        members = {i for i in range(len(nodes)) if inside(i, path)}
        depth = len(path.split(".")) if path else 0
        if len(members) == 1 and nodes[next(iter(members))]["name"] == path:
            return Leaf(nodes[next(iter(members))], arrays)
        kids = []
        for i in sorted(members):
            k = ".".join(nodes[i]["name"].split(".")[:depth + 1])
            if k not in kids:
                kids.append(k)
        parts = []
        for k in kids:
            km = {i for i in members if inside(i, k)}
            parts.append((k, km) + crossing(km))
        chain = len(parts) > 1 and all(len(p[2]) == 1 for p in parts) and all(
            len(a[3]) == 1 and b[2] == a[3] and all(r in b[1] for r in readers[a[3][0]])
            for a, b in zip(parts, parts[1:]))
        if chain:
            return _sequential([(k.split(".")[-1], build(k)) for k, *_ in parts])
        ins, outs = crossing(members)
        return Graph([(k.split(".")[-1], build(k), i, o) for k, _, i, o in parts], ins, outs)

    return (build(""),) + crossing(set(range(len(nodes))))


def _sequential(named):
    from collections import OrderedDict
    return nn.Sequential(OrderedDict(named))


def preset_case(spec, work):
    d = os.path.join(work, spec.replace(":", "_").replace(",", "_").replace("=", ""))
    os.makedirs(d, exist_ok=True)
    net_file = os.path.join(d, "net.json")
    for args in (["network", "--network", spec, "--out", net_file],
                 ["run", "--network", spec, "--strategy", "none", "--repeat", "1",
                  "--dump-weights", os.path.join(d, "w")]):
        rc, _, err = cli(*args)
        if rc:
            raise SystemExit(f"plan-check: rematlab-cli {' '.join(args)}: {err}")
    with open(net_file) as f:
        net = json.load(f)
    data = NetFile(net, os.path.join(d, "w"))
    model, root_inputs, root_outputs = build_preset(net, data.params)
    loss_node = net["nodes"][-1]
    inputs = [torch.from_numpy(data.inputs[v]) for v in root_inputs]

    def loss_of(y):
        outs = dict(zip(root_outputs, y if isinstance(y, tuple) else (y,)))
        args = [outs[v] if v in outs else torch.from_numpy(data.inputs[v])
                for v in loss_node["inputs"]]
        return torch_ops.run_node(loss_node, args, {})

    return spec, model, inputs, loss_of


# --- zoo models --------------------------------------------------------------------------------

def zoo_case(name, work):
    import zoo_check
    torch.manual_seed(0)
    if name in ("gpt2_tiny",):
        cls, make_inputs = zoo_check.lm_models()[name]
        model = cls(layers=4)  # enough blocks for runs of the ModuleList `h`
        inputs = list(make_inputs(torch.Generator().manual_seed(0)).values())
    else:
        import torchvision
        model = torchvision.models.get_model(name, weights=None, num_classes=10)
        zoo_check.zero_stochastic(model, torch)
        inputs = [torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(0))]
    model.train()
    path = os.path.join(work, name + "-4.onnx" if name == "gpt2_tiny" else name + ".onnx")
    if not os.path.exists(path):
        torch.onnx.export(copy.deepcopy(model), tuple(inputs), path, opset_version=13,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)

    def loss_of(y):
        y = zoo_check.first_output(y)
        return 0.5 * (y * y).sum()

    return path, model, inputs, loss_of


# --- one step ----------------------------------------------------------------------------------

def step(model, inputs, loss_of):
    """One forward + backward; returns (saved peak bytes, gradients by parameter name, loss)."""
    for p in model.parameters():
        p.grad = None
    excluded = list(model.parameters()) + list(model.buffers()) + list(inputs)
    tp.TRACKER = tp.SavedTracker(excluded)
    try:
        with tp._OriginalHooks(lambda t: tp._Saved(t, tp.TRACKER), lambda s: s.t):
            loss = loss_of(model(*inputs))
            loss.backward()
        peak = tp.TRACKER.peak
    finally:
        tp.TRACKER = None
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    return peak, grads, float(loss.detach())


def load_plan(path):
    import importlib.util
    spec = importlib.util.spec_from_file_location("rematlab_plan_" + str(abs(hash(path))), path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def rel_err(a, b):
    worst = 0.0
    for k, ref in b.items():
        g = a.get(k)
        if g is None:
            return float("inf")
        scale = float(ref.abs().max()) or 1.0
        worst = max(worst, float((g - ref).abs().max()) / scale)
    return worst


def check(label, network, model, inputs, loss_of, strategies, work):
    rows = []
    state = copy.deepcopy(model.state_dict())
    plain_peak, plain_grads, plain_loss = step(model, inputs, loss_of)
    for s in strategies:
        tag = f"{len(rows)}"
        base = os.path.join(work, os.path.basename(label).replace(":", "_")[:40] + "." + tag)
        rc, _, note = cli("export-plan", "--network", network, "--strategy", s, "--format", "json",
                          "--out", base + ".json")
        row = {"model": label, "strategy": s}
        if rc:
            row["error"] = note.replace("rematlab-cli: error: ", "")
            rows.append(row)
            log(f"{label} {s}: {row['error']}")
            continue
        with open(base + ".json") as f:
            plan = json.load(f)
        row.update(plan_act=plan["predicted_activation_peak_bytes"],
                   wrap_act=plan["torch"]["predicted_activation_peak_bytes"],
                   selective=plan["torch"].get("selective", {}).get(
                       "predicted_activation_peak_bytes"),
                   exact=plan["torch"]["exact"], regions=len(plan["segments"]),
                   torch_none=plain_peak)
        if not plan["torch"]["exportable"]:
            row["refusal"] = plan["torch"]["refusal"]
            rows.append(row)
            log(f"{label} {s}: refused")
            continue
        rc, _, note = cli("export-plan", "--network", network, "--strategy", s, "--format",
                          "torch", "--out", base + ".py")
        if rc:
            row["error"] = note
            rows.append(row)
            continue
        wrapped = copy.deepcopy(model)
        wrapped.load_state_dict(state)
        import warnings
        try:
            with warnings.catch_warnings():  # the selective fallback's warning: in the table
                warnings.simplefilter("ignore")
                load_plan(base + ".py").apply(wrapped)
            peak, grads, loss = step(wrapped, inputs, loss_of)
        except Exception as e:  # noqa: BLE001 - a plan PyTorch rejects is a finding, not a crash
            row["error"] = f"{type(e).__name__}: {e}"
            rows.append(row)
            log(f"{label} {s}: {row['error']}")
            continue
        row.update(torch_saved=peak, grad_rel_err=rel_err(grads, plain_grads),
                   loss_diff=abs(loss - plain_loss))
        rows.append(row)
        log(f"{label} {s}: ours {row['wrap_act']} torch {peak} grads {row['grad_rel_err']:.1e}")
    return rows


def table(rows):
    out = ["| model | strategy | regions | export | plan act. peak B | wrapping act. peak B "
           "| torch saved B | torch − wrapping B | grads rel. err vs plain torch "
           "| selective (2.4+) predicted B |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            out.append(f"| `{r['model']}` | `{r['strategy']}` | - | error: {r['error'][:160]} "
                       "| - | - | - | - | - | - |")
            continue
        if "refusal" in r:
            out.append(f"| `{r['model']}` | `{r['strategy']}` | 0 | refused | {r['plan_act']} "
                       "| - | - | - | - | - |")
            continue
        export = "exact" if r["exact"] else f"approx. {r['wrap_act'] - r['plan_act']:+d} B"
        out.append(f"| `{r['model']}` | `{r['strategy']}` | {r['regions']} | {export} "
                   f"| {r['plan_act']} | {r['wrap_act']} | {r['torch_saved']} "
                   f"| {r['torch_saved'] - r['wrap_act']:+d} "
                   f"| {r['grad_rel_err']:.1e} "
                   f"| {r['selective'] if r.get('selective') else '-'} |")
    return "\n".join(out)


def machine():
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            mem = f"{int(f.readline().split()[1]) / 2**20:.0f} GiB"
    except OSError:
        pass
    return (f"{platform.machine()}, {os.cpu_count()} cores, {mem}, {platform.platform()}; "
            f"PyTorch {torch.__version__}, {ARGS.threads} thread(s)")


def main():
    if not os.access(ARGS.cli, os.X_OK):
        raise SystemExit(f"plan-check: no rematlab-cli at {ARGS.cli}; build it or pass --cli")
    torch.set_num_threads(ARGS.threads)
    work = ARGS.work or tempfile.mkdtemp(prefix="plan-check-")
    os.makedirs(work, exist_ok=True)
    strategies = [s for s in ARGS.strategies.split(";") if s]
    models = []
    for part in ARGS.models.split(";"):
        models += [part] if ":" in part else [m for m in part.split(",") if m]
    rows = []
    for m in models:
        log(f"plan-check: {m}")
        if m in ZOO:
            network, model, inputs, loss_of = zoo_case(m, work)
        else:
            network, model, inputs, loss_of = preset_case(m, work)
        rows += check(m, network, model, inputs, loss_of, strategies, work)
    text = table(rows)
    print(text)
    if ARGS.write_doc:
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        path = os.path.join(ROOT, "docs", "plans.md")
        with open(path) as f:
            doc = f.read()
        begin, end = "<!-- plan-check table -->", "<!-- end plan-check table -->"
        block = f"{begin}\n{stamp}; {machine()}.\n\n{text}\n{end}"
        if begin in doc and end in doc:
            doc = doc[:doc.index(begin)] + block + doc[doc.index(end) + len(end):]
        else:
            doc += "\n" + block + "\n"
        with open(path + ".tmp", "w") as f:
            f.write(doc)
        os.replace(path + ".tmp", path)
        log(f"plan-check: wrote {path}")


if __name__ == "__main__":
    main()
