"""zoo-check: real models through rematlab-cli, against PyTorch (run by scripts/zoo-check).

For every classification builder that torchvision.models.list_models(module=torchvision.models)
lists (Debian's torchvision 0.14) and two language models written in plain PyTorch (GPT-2-style
and BERT-style), it
  1. exports the model with torch.onnx.export (opset 13, TrainingMode.TRAINING,
     do_constant_folding=False, weights=None, num_classes=10, dropout and stochastic depth 0) at
     the smallest input size it accepts, batch 2;
  2. has PyTorch compute the gradients of ½·Σ y² on the first output in float64 (the reference) and
     in float32 twice (with oneDNN, PyTorch's default CPU convolutions, and without it), and times
     PyTorch's float32 step;
  3. runs `rematlab-cli run --strategy none --dump-grads` and compares every parameter's gradient
     with the float64 one, beside PyTorch's own float32 errors;
  4. runs every strategy under `rematlab-cli compare` and checks both invariants (predicted peak ==
     measured peak; gradients bitwise equal to none's);
and prints one row per model.

The error of a gradient is max|g - g64| / max|g64| over the tensor. A parameter is within the
allowance when its error is at most max(10 x PyTorch's float32 error, 1e-4), PyTorch's float32
error being the larger of its two CPU paths: a ReLU or max-pool decision that lies closer to its
kink than float32's rounding noise flips with the order of a sum, in PyTorch as in RematLab, and
the gradients downstream of it then differ from float64 by far more than rounding (DenseNet-121,
docs/onnx.md). The two PyTorch paths show how far float32 itself can land from float64.

Everything expensive is cached under --cache (default .cache/zoo-check): the export, the input
and the references per model, and our results (redone when rematlab-cli is newer). Interrupt it
and run it again to resume.
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The language models: GPT-2-style and BERT-style, small.
LMS = ["gpt2_tiny", "bert_tiny"]
QUICK = ["squeezenet1_1", "resnet18", "mobilenet_v3_small", "shufflenet_v2_x0_5", "mnasnet0_5",
         "efficientnet_b0", "regnet_x_400mf", "densenet121", "googlenet", "convnext_tiny",
         "gpt2_tiny", "bert_tiny"]
# From 64 px: at 32 px most nets end in 1x1 maps, and batch norm over 2 values (batch 2) has a
# gradient that is 0 in exact arithmetic, so every error against float64 is noise.
SIZES = [64, 96, 128, 160, 224, 299]

# Approximate parameter counts (millions, torchvision's documentation) to run small models
# first; models not listed sort last.
APPROX_M = {
    "squeezenet1_0": 1.2, "squeezenet1_1": 1.2, "shufflenet_v2_x0_5": 1.4,
    "shufflenet_v2_x1_0": 2.3, "shufflenet_v2_x1_5": 3.5, "shufflenet_v2_x2_0": 7.4,
    "mnasnet0_5": 2.2, "mnasnet0_75": 3.2, "mnasnet1_0": 4.4, "mnasnet1_3": 6.3,
    "mobilenet_v3_small": 2.5, "mobilenet_v2": 3.5, "mobilenet_v3_large": 5.5,
    "regnet_y_400mf": 4.3, "regnet_x_400mf": 5.5, "efficientnet_b0": 5.3,
    "regnet_y_800mf": 6.4, "googlenet": 6.6, "regnet_x_800mf": 7.3, "efficientnet_b1": 7.8,
    "densenet121": 8.0, "efficientnet_b2": 9.1, "regnet_x_1_6gf": 9.2, "regnet_y_1_6gf": 11.2,
    "resnet18": 11.7, "efficientnet_b3": 12.2, "densenet169": 14.1, "regnet_x_3_2gf": 15.3,
    "efficientnet_b4": 19.3, "regnet_y_3_2gf": 19.4, "densenet201": 20.0, "resnet34": 21.8,
    "efficientnet_v2_s": 21.5, "resnext50_32x4d": 25.0, "resnet50": 25.6,
    "inception_v3": 27.2, "swin_t": 28.3, "swin_v2_t": 28.4, "convnext_tiny": 28.6,
    "densenet161": 28.7, "efficientnet_b5": 30.4, "maxvit_t": 30.9, "regnet_y_8gf": 39.4,
    "regnet_x_8gf": 39.6, "efficientnet_b6": 43.0, "resnet101": 44.5, "swin_s": 49.6,
    "swin_v2_s": 49.7, "convnext_small": 50.2, "efficientnet_v2_m": 54.1,
    "regnet_x_16gf": 54.3, "resnet152": 60.2, "alexnet": 61.1, "efficientnet_b7": 66.3,
    "wide_resnet50_2": 68.9, "resnext101_64x4d": 83.5, "regnet_y_16gf": 83.6,
    "vit_b_16": 86.6, "swin_b": 87.8, "swin_v2_b": 87.9, "vit_b_32": 88.2,
    "convnext_base": 88.6, "resnext101_32x8d": 88.8, "regnet_x_32gf": 107.8,
    "efficientnet_v2_l": 118.5, "wide_resnet101_2": 126.9, "vgg11": 132.9,
    "vgg11_bn": 132.9, "vgg13": 133.0, "vgg13_bn": 133.1, "vgg16": 138.4, "vgg16_bn": 138.4,
    "vgg19": 143.7, "vgg19_bn": 143.7, "regnet_y_32gf": 145.0, "convnext_large": 197.8,
    "vit_l_16": 304.3, "vit_l_32": 306.5, "regnet_y_128gf": 644.8, "vit_h_14": 632.0,
}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# --- the PyTorch side (runs in a child process per model) ---------------------------------------

def lm_models():
    import math
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class GPT2Block(nn.Module):
        def __init__(self, d, heads, t):
            super().__init__()
            self.heads = heads
            self.ln_1 = nn.LayerNorm(d)
            self.c_attn = nn.Linear(d, 3 * d)
            self.c_proj = nn.Linear(d, d)
            self.ln_2 = nn.LayerNorm(d)
            self.fc = nn.Linear(d, 4 * d)
            self.proj = nn.Linear(4 * d, d)
            self.register_buffer("bias", torch.tril(torch.ones(t, t)).view(1, 1, t, t))

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
            q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(b, t, d)
            x = x + self.c_proj(y)
            return x + self.proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))

    class GPT2(nn.Module):
        """GPT-2 as people write it: token and position embeddings, pre-norm blocks with a causal
        mask from a tril buffer, tanh GELU, a final LayerNorm and a head tied to the token
        embedding."""

        def __init__(self, vocab=256, t=32, d=64, heads=4, layers=2):
            super().__init__()
            self.wte = nn.Embedding(vocab, d)
            self.wpe = nn.Embedding(t, d)
            self.h = nn.ModuleList(GPT2Block(d, heads, t) for _ in range(layers))
            self.ln_f = nn.LayerNorm(d)
            self.lm_head = nn.Linear(d, vocab, bias=False)
            self.lm_head.weight = self.wte.weight  # tied

        def forward(self, ids):
            pos = torch.arange(ids.size(1), dtype=torch.long).unsqueeze(0)
            x = self.wte(ids) + self.wpe(pos)
            for blk in self.h:
                x = blk(x)
            return self.lm_head(self.ln_f(x))

    class BertLayer(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.heads = heads
            self.query, self.key, self.value = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
            self.attn_out = nn.Linear(d, d)
            self.ln1 = nn.LayerNorm(d)
            self.inter = nn.Linear(d, 4 * d)
            self.out = nn.Linear(4 * d, d)
            self.ln2 = nn.LayerNorm(d)

        def forward(self, x, add_mask):
            b, t, d = x.shape

            def split(z):
                return z.view(b, t, self.heads, d // self.heads).transpose(1, 2)

            q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
            att = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads) + add_mask
            y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(b, t, d)
            x = self.ln1(x + self.attn_out(y))  # post-norm
            return self.ln2(x + self.out(F.gelu(self.inter(x))))  # exact GELU

    class Bert(nn.Module):
        """A BERT-style encoder: token + position + segment embeddings, an attention mask input
        (1 = attend, 0 = padding), post-norm blocks with exact GELU."""

        def __init__(self, vocab=256, t=32, d=64, heads=4, layers=2):
            super().__init__()
            self.word = nn.Embedding(vocab, d)
            self.position = nn.Embedding(t, d)
            self.segment = nn.Embedding(2, d)
            self.ln = nn.LayerNorm(d)
            self.layers = nn.ModuleList(BertLayer(d, heads) for _ in range(layers))

        def forward(self, ids, segments, mask):
            pos = torch.arange(ids.size(1), dtype=torch.long).unsqueeze(0)
            x = self.ln(self.word(ids) + self.position(pos) + self.segment(segments))
            add_mask = (1.0 - mask[:, None, None, :].to(x.dtype)) * -10000.0
            for layer in self.layers:
                x = layer(x, add_mask)
            return x

    def gpt2_inputs(g):
        return {"ids": torch.randint(0, 256, (2, 32), generator=g)}

    def bert_inputs(g):
        ids = torch.randint(0, 256, (2, 32), generator=g)
        seg = torch.zeros(2, 32, dtype=torch.long)
        seg[:, 16:] = 1
        mask = torch.ones(2, 32, dtype=torch.long)
        mask[1, 24:] = 0  # the second sequence is padded
        return {"ids": ids, "segments": seg, "mask": mask}

    return {"gpt2_tiny": (GPT2, gpt2_inputs), "bert_tiny": (Bert, bert_inputs)}


def prepare_torchvision(name, torch):
    import torchvision
    kwargs = {"weights": None, "num_classes": 10}
    m = torchvision.models.get_model(name, **kwargs)
    return m


def zero_stochastic(m, torch):
    """Dropout and stochastic depth off, so that the float64 reference is reproducible."""
    import torchvision
    for mod in m.modules():
        if isinstance(mod, (torch.nn.Dropout, torch.nn.Dropout2d, torch.nn.AlphaDropout)):
            mod.p = 0.0
        if isinstance(mod, torchvision.ops.StochasticDepth):
            mod.p = 0.0
        for attr in ("dropout", "attention_dropout"):  # Swin/MaxViT pass these to F.dropout
            if isinstance(getattr(mod, attr, None), float):
                setattr(mod, attr, 0.0)


def reinit_zero_weights(m, torch):
    """torchvision's ViT starts its head at zero (then every other gradient is 0 too)."""
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for _, p in m.named_parameters():
            if p.dim() >= 2 and not p.any():
                p.copy_(0.02 * torch.randn(p.shape, generator=g))


def first_output(y):
    if isinstance(y, (tuple, list)):
        return y[0]
    if hasattr(y, "logits"):
        return y.logits
    return y


def grads_of(m, inputs, dtype, torch, mkldnn=True):
    import copy
    mm = copy.deepcopy(m).to(dtype).train()
    args = [v.to(dtype) if v.is_floating_point() else v for v in inputs.values()]
    with torch.backends.mkldnn.flags(enabled=mkldnn):
        y = first_output(mm(*args))
        loss = 0.5 * (y * y).sum()
        loss.backward()
    out = {}
    for n, p in mm.named_parameters():
        out[n] = (p.grad if p.grad is not None else torch.zeros_like(p)).double().numpy()
    return out, float(loss.item())


def time_step(m, inputs, torch, repeat=3):
    mm = m.float().train()
    args = list(inputs.values())
    ts = []
    for i in range(repeat + 1):
        mm.zero_grad()
        t0 = time.perf_counter()
        y = first_output(mm(*args))
        (0.5 * (y * y).sum()).backward()
        if i:
            ts.append((time.perf_counter() - t0) * 1e3)
    ts.sort()
    return ts[len(ts) // 2]


def torch_phase(name, d, threads, load_only=False):
    """Exports `name` into directory d with its input(s) and PyTorch's reference gradients (only
    the export and the inputs with load_only)."""
    import numpy as np
    import torch
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    lms = lm_models()
    meta = {"model": name, "torch": torch.__version__}
    g = torch.Generator().manual_seed(0)
    if name in lms:
        cls, make_inputs = lms[name]
        m = cls()
        inputs = make_inputs(g)
        sizes = [None]
    else:
        m = prepare_torchvision(name, torch)
        sizes = SIZES
    zero_stochastic(m, torch)
    reinit_zero_weights(m, torch)
    m.train()
    t_start = time.time()
    errors = []
    for s in sizes:
        if s is not None:
            inputs = {"x": torch.randn(2, 3, s, s, generator=g)}
            try:
                with torch.no_grad():
                    first_output(m(*inputs.values()))
            except Exception as e:  # too small for this model: the next size
                errors.append(f"{s}px: {str(e).splitlines()[0][:160]}")
                continue
        path = os.path.join(d, "model.onnx")
        try:
            torch.onnx.export(m, tuple(inputs.values()), path, opset_version=13,
                              training=torch.onnx.TrainingMode.TRAINING,
                              do_constant_folding=False, input_names=list(inputs.keys()),
                              output_names=["y"])
        except Exception as e:
            errors.append(f"{s}px export: {str(e).splitlines()[0][:160]}")
            continue
        meta["input"] = "x".join(str(v) for v in inputs[next(iter(inputs))].shape)
        break
    else:
        meta["export_error"] = "; ".join(errors[-3:]) or "no size worked"
        with open(os.path.join(d, "meta.json"), "w") as f:
            json.dump(meta, f)
        return
    meta["export_s"] = time.time() - t_start
    m.train()
    for k, v in inputs.items():
        np.save(os.path.join(d, k + ".npy"), v.numpy() if not v.is_floating_point()
                else v.numpy().astype(np.float32))
    meta["inputs"] = list(inputs.keys())
    meta["references"] = not load_only
    if load_only:
        with open(os.path.join(d, "meta.json"), "w") as f:
            json.dump(meta, f)
        return
    g64, meta["loss64"] = grads_of(m, inputs, torch.float64, torch)
    g32, meta["loss32"] = grads_of(m, inputs, torch.float32, torch)
    g32n, _ = grads_of(m, inputs, torch.float32, torch, mkldnn=False)
    np.savez(os.path.join(d, "grads64.npz"), **g64)
    np.savez(os.path.join(d, "grads32.npz"), **g32)
    np.savez(os.path.join(d, "grads32_no_onednn.npz"), **g32n)
    meta["torch_ms"] = time_step(m, inputs, torch)
    meta["torch_threads"] = threads
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f)


# --- our side ----------------------------------------------------------------------------------

def rel_err(a, ref):
    import numpy as np
    scale = float(np.abs(ref).max()) if ref.size else 0.0
    diff = float(np.abs(a - ref).max()) if ref.size else 0.0
    return diff / scale if scale > 0 else diff


def run_cli(cli, args, timeout):
    try:
        p = subprocess.run([cli] + args, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return None, "", f"timed out after {timeout} s"


def reason_of(stderr):
    import re
    lines = [ln.strip() for ln in stderr.strip().splitlines() if ln.strip()]
    text = " ".join(lines).replace("rematlab-cli: error: ", "")
    # "N nodes use ops RematLab cannot import: node 2 'a' (HardSigmoid), …": the op types.
    m = re.search(r"(\d+) nodes? uses? ops? RematLab cannot import", text)
    if m:
        listed = text.split("Supported ONNX ops")[0]
        ops = sorted(set(re.findall(r"'[^']*' \(([A-Za-z0-9_]+)\)", listed)))
        return f"{m.group(1)} nodes of unsupported ops: " + ", ".join(ops)
    text = re.sub(r"/\S*/model\.onnx: ", "", text)
    return text[:240] + ("…" if len(text) > 240 else "")


def our_phase(name, d, cli, threads, timeout, skip_compare, load_only=False):
    import numpy as np
    with open(os.path.join(d, "meta.json")) as f:
        meta = json.load(f)
    row = {"model": name, "input": meta.get("input", ""), "torch_ms": meta.get("torch_ms")}
    if "export_error" in meta:
        row["status"] = "not exported: " + meta["export_error"]
        return row
    net = os.path.join(d, "model.onnx")
    if load_only:
        # Only as far as the import: `network` builds the graph and writes it, nothing runs.
        rc, out, err = run_cli(cli, ["network", "--network", net, "--out", os.devnull], timeout)
        row["status"] = ("loaded" if rc == 0 else
                         "refused: " + reason_of(err) if rc is not None else err)
        return row
    inputs = []
    for k in meta["inputs"]:
        inputs += ["--input", f"{k}={os.path.join(d, k + '.npy')}"]
    gdir = os.path.join(d, "ours_grads")
    shutil.rmtree(gdir, ignore_errors=True)
    rc, out, err = run_cli(cli, ["run", "--network", net, "--strategy", "none", "--threads",
                                 str(threads), "--repeat", "3", "--json", "--dump-grads", gdir]
                           + inputs, timeout)
    if rc != 0:
        row["status"] = "refused: " + reason_of(err) if rc is not None else err
        return row
    j = json.loads(out)
    row.update(status="loaded", nodes=j.get("computes"), param_bytes=j.get("params"),
               ours_ms=j.get("total_ms"), loss=j.get("loss"), loss64=meta.get("loss64"))
    g64 = np.load(os.path.join(d, "grads64.npz"))
    g32 = np.load(os.path.join(d, "grads32.npz"))
    g32n = np.load(os.path.join(d, "grads32_no_onednn.npz"))
    worst, worst_t, worst_tn, bad, missing, n, unused = 0.0, 0.0, 0.0, [], [], 0, 0
    for p in g64.files:
        n += 1
        f = os.path.join(gdir, p.replace("/", "_") + ".npy")
        if not os.path.exists(f):
            # Not imported: only the nodes the first output needs are (GoogLeNet's and Inception's
            # auxiliary heads); fine when PyTorch's gradient is exactly zero too.
            if np.abs(g64[p]).max() == 0:
                unused += 1
            else:
                missing.append(p)
            continue
        ours = np.load(f).astype(np.float64)
        ref = g64[p]
        if ours.shape != ref.shape:
            bad.append(f"{p} shape {list(ours.shape)} vs {list(ref.shape)}")
            continue
        e, et, etn = rel_err(ours, ref), rel_err(g32[p], ref), rel_err(g32n[p], ref)
        worst, worst_t, worst_tn = max(worst, e), max(worst_t, et), max(worst_tn, etn)
        if e > max(10 * max(et, etn), 1e-4):
            bad.append(f"{p} {e:.1e} (PyTorch f32 {et:.1e}/{etn:.1e})")
    row.update(grad_err=worst, torch_err=worst_t, torch_err_no_onednn=worst_tn,
               grads_ok=n - len(bad) - len(missing) - unused, grads_n=n - unused,
               grads_unused=unused, grads_bad=bad[:5],
               grads_missing=missing[:5], grads_missing_n=len(missing))
    if skip_compare:
        return row
    rc, out, err = run_cli(cli, ["compare", "--network", net, "--threads", str(threads), "--json"]
                           + inputs, timeout)
    if rc != 0 and not out.strip():
        row["compare"] = "failed: " + (reason_of(err) if rc is not None else err)
        return row
    peak_ok = bitwise_ok = total = 0
    failures = []
    for line in out.splitlines():
        if not line.startswith("{"):
            continue
        s = json.loads(line)
        total += 1
        pk = s.get("predicted_peak_bytes") == s.get("measured_peak_bytes")
        bw = bool(s.get("grads_bitwise_equal_to_none"))
        peak_ok += pk
        bitwise_ok += bw
        if not (pk and bw):
            failures.append(s.get("strategy"))
    row.update(strategies=total, peak_ok=peak_ok, bitwise_ok=bitwise_ok,
               strategy_failures=failures)
    if rc != 0:
        row["compare"] = "exit " + str(rc) + ": " + reason_of(err)
    return row


# --- the table ---------------------------------------------------------------------------------

def fmt_e(v):
    return "–" if v is None else f"{v:.1e}"


def fmt_ms(v):
    return "–" if v is None else (f"{v:.0f}" if v >= 100 else f"{v:.1f}")


def table(rows):
    head = ("| model | input | status | nodes | params | worst grad error (ours) | PyTorch f32 "
            "(oneDNN / without) | params within allowance | peak == (strategies) | bitwise "
            "(strategies) | step ms ours | step ms PyTorch |")
    lines = [head, "|" + "---|" * 12]
    for r in rows:
        st = r["status"]
        if st != "loaded":
            lines.append(f"| {r['model']} | {r.get('input', '')} | {st.replace('|', '/')} "
                         f"| | | | | | | | | {fmt_ms(r.get('torch_ms'))} |")
            continue
        within = f"{r['grads_ok']}/{r['grads_n']}"
        if r.get("grads_missing_n"):
            within += f" ({r['grads_missing_n']} missing)"
        if r.get("grads_unused"):
            within += f" (+{r['grads_unused']} off the first output)"
        if "strategies" in r:
            peak = f"{r['peak_ok']}/{r['strategies']}"
            bit = f"{r['bitwise_ok']}/{r['strategies']}"
        else:
            peak = bit = r.get("compare", "not run")
        lines.append(
            f"| {r['model']} | {r['input']} | loaded | {r['nodes']} | "
            f"{r['param_bytes'] / 2**20:.1f} MiB | "
            f"{fmt_e(r['grad_err'])} | {fmt_e(r['torch_err'])} / "
            f"{fmt_e(r['torch_err_no_onednn'])} | {within} | {peak} | {bit} | "
            f"{fmt_ms(r.get('ours_ms'))} | {fmt_ms(r.get('torch_ms'))} |")
    return "\n".join(lines)


def census_table(rows):
    lines = ["| model | input | load |", "|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r.get('input', '')} | {r['status'].replace('|', '/')} |")
    return "\n".join(lines)


def machine():
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}"


def write_doc(doc, text):
    begin, end = "<!-- zoo-check:begin -->", "<!-- zoo-check:end -->"
    with open(doc) as f:
        s = f.read()
    block = begin + "\n" + text + "\n" + end
    if begin in s and end in s:
        s = s[:s.index(begin)] + block + s[s.index(end) + len(end):]
    else:
        s = s.rstrip("\n") + "\n\n" + block + "\n"
    tmp = doc + ".tmp"
    with open(tmp, "w") as f:
        f.write(s)
    os.replace(tmp, doc)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", help="comma-separated subset (torchvision builder names, "
                    "gpt2_tiny, bert_tiny)")
    ap.add_argument("--quick", action="store_true", help="a small set: " + ",".join(QUICK))
    ap.add_argument("--list", action="store_true", help="print the model names and exit")
    ap.add_argument("--cache", default=os.path.join(ROOT, ".cache", "zoo-check"))
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "app", "rematlab-cli"))
    ap.add_argument("--threads", type=int, default=1, help="threads for both (default 1)")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per rematlab-cli command")
    ap.add_argument("--max-params-m", type=float, default=150.0,
                    help="skip models above this many million parameters (default 150)")
    ap.add_argument("--no-compare", action="store_true", help="skip the strategies")
    ap.add_argument("--load-only", action="store_true",
                    help="a census: export (no PyTorch references) and only load each model "
                    "(rematlab-cli network); prints loaded or refused with the reason")
    ap.add_argument("--redo", action="store_true", help="recompute our results (not exports)")
    ap.add_argument("--write-doc", nargs="?", const=os.path.join(ROOT, "docs", "onnx.md"),
                    help="put the table into docs/onnx.md (or the given file)")
    ap.add_argument("--torch-phase", help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.torch_phase:
        name, d = a.torch_phase.split("=", 1)
        torch_phase(name, d, a.threads, a.load_only)
        return 0

    import torchvision
    all_models = sorted(torchvision.models.list_models(module=torchvision.models),
                        key=lambda n: (APPROX_M.get(n, 1e9), n)) + LMS
    if a.list:
        print("\n".join(all_models))
        return 0
    models = all_models
    if a.quick:
        models = QUICK
    if a.models:
        models = [m.strip() for m in a.models.split(",") if m.strip()]
        unknown = [m for m in models if m not in all_models]
        if unknown:
            log("zoo-check: unknown model(s): " + ", ".join(unknown) + "; see --list")
            return 2
    if not os.access(a.cli, os.X_OK):
        log(f"zoo-check: {a.cli} not found: build rematlab-cli first (scripts/build) or pass "
            "--cli")
        return 2
    cli_mtime = os.path.getmtime(a.cli)
    rows = []
    for name in models:
        d = os.path.join(a.cache, name)
        os.makedirs(d, exist_ok=True)
        if APPROX_M.get(name, 0) > a.max_params_m:
            rows.append({"model": name, "status": f"skipped: ~{APPROX_M[name]:.0f} M parameters "
                         f"(above --max-params-m {a.max_params_m:.0f})"})
            log(f"{name}: skipped (size)")
            continue
        meta_path = os.path.join(d, "meta.json")
        if os.path.exists(meta_path) and not a.load_only:
            with open(meta_path) as f:
                if not json.load(f).get("references", True):  # a census export: redo it whole
                    os.remove(meta_path)
        if not os.path.exists(meta_path):
            log(f"{name}: exporting" + ("…" if a.load_only else
                                         " and computing PyTorch's gradients…"))
            t0 = time.time()
            p = subprocess.run([sys.executable, os.path.abspath(__file__), "--threads",
                                str(a.threads), "--torch-phase", f"{name}={d}"]
                               + (["--load-only"] if a.load_only else []),
                               capture_output=True, text=True)
            if p.returncode != 0 or not os.path.exists(os.path.join(d, "meta.json")):
                tail = reason_of(p.stderr.strip().splitlines()[-1] if p.stderr.strip() else
                                 f"exit {p.returncode}")
                rows.append({"model": name, "status": "PyTorch side failed: " + tail})
                log(f"{name}: PyTorch side failed: {tail}")
                continue
            log(f"{name}: PyTorch side done in {time.time() - t0:.0f} s")
        if a.load_only:
            row = our_phase(name, d, a.cli, a.threads, a.timeout, True, load_only=True)
            rows.append(row)
            log(f"{name}: {row['status'][:200]}")
            continue
        res = os.path.join(d, "ours.json")
        if (not a.redo and os.path.exists(res) and os.path.getmtime(res) > cli_mtime
                and (a.no_compare or "no_compare" not in json.load(open(res)))):
            with open(res) as f:
                row = json.load(f)
        else:
            log(f"{name}: running rematlab-cli…")
            row = our_phase(name, d, a.cli, a.threads, a.timeout, a.no_compare)
            if a.no_compare:
                row["no_compare"] = True
            with open(res, "w") as f:
                json.dump(row, f)
        rows.append(row)
        log(f"{name}: {row['status'][:120]}"
            + (f"; grads {row['grads_ok']}/{row['grads_n']} within, worst "
               f"{fmt_e(row['grad_err'])}" if row["status"] == "loaded" else ""))
        for b in row.get("grads_bad", []):
            log(f"    outside the allowance: {b}")

    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    cmd = "scripts/zoo-check " + " ".join(sys.argv[1:])
    head = (f"zoo-check, {when}, {machine()}; PyTorch "
            f"{__import__('torch').__version__}, torchvision {torchvision.__version__}, "
            f"{a.threads} thread(s) each; `{cmd.strip()}`")
    if a.load_only:
        text = head + "\n\n" + census_table(rows)
        print(text)
        return 0
    text = head + "\n\n" + table(rows)
    print(text)
    if a.write_doc:
        write_doc(a.write_doc, text)
        log(f"zoo-check: table written to {a.write_doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
