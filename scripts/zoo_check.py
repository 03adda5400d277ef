"""zoo-check: real models through rematlab-cli, against PyTorch (run by scripts/zoo-check).

For every classification builder that torchvision.models.list_models(module=torchvision.models)
lists (Debian's torchvision 0.14) and two language models written in plain PyTorch (GPT-2-style
and BERT-style), it
  1. exports the model with torch.onnx.export (opset 13, TrainingMode.TRAINING,
     do_constant_folding=False, weights=None, num_classes=10, dropout and stochastic depth 0) at
     the smallest input size it accepts, batch 2;
  2. has PyTorch compute the gradients of ½·Σ y² on the first output in float64 (the reference) and
     in float32 twice (with oneDNN, PyTorch's default CPU convolutions, and without it);
  3. runs `rematlab-cli run --strategy none --dump-grads --dump-activations` and compares every
     parameter's gradient with the float64 one, beside PyTorch's own float32 errors, and with a
     decision-matched float64 reference: PyTorch in float64 again, but every kinked op takes its
     discrete decisions from our float32 run: each ReLU its on/off mask (our dumped ReLU outputs
     > 0), each max-pool window our float32 choice of element (whatever its input), each clip
     (ReLU6), hardsigmoid and hardswish element the linear piece (below, between or above the
     kinks) our kernel put it on; it counts the decisions that differ from float64's own and how
     close to a kink (distance / rms of that tensor, in float64) each was;
  4. runs every strategy under `rematlab-cli compare` and checks both invariants (predicted peak ==
     measured peak; gradients bitwise equal to none's);
  5. times our step and PyTorch's float32 step, with oneDNN and without, in wall-clock and in
     process CPU time (same threads; PyTorch on OpenBLAS by default, --torch-blas), alternated
     over --time-rounds rounds;
and prints one row per model.

The error of a gradient is max|g - g64| / max|g64| over the tensor. A parameter is within the
allowance when its error is at most max(10 x PyTorch's float32 error, 1e-4), PyTorch's float32
error being the larger of its two CPU paths: a ReLU or max-pool decision that lies closer to its
kink than float32's rounding noise flips with the order of a sum, in PyTorch as in RematLab, and
the gradients downstream of it then differ from float64 by far more than rounding (DenseNet-121,
docs/onnx.md). The two PyTorch paths show how far float32 itself can land from float64. The same
allowance is applied against the decision-matched reference, where such a flipped decision no
longer separates the two (ReLU, max-pool, clip/ReLU6, hardsigmoid and hardswish are matched;
other kinked ops, e.g. abs, and the smooth ones are not).

PyTorch's children run on OpenBLAS by default: Debian's PyTorch calls libblas.so.3, the
reference BLAS on a machine without libopenblas0, so zoo-check fetches libopenblas0-openmp's
package file (the build on PyTorch's own libgomp threads; apt-get download, nothing installed)
into --cache, unpacks it there and puts it first on the children's LD_LIBRARY_PATH; the table
header names the BLAS the timing process found loaded. They run on tcmalloc by default
(libtcmalloc-minimal4, fetched the same way and preloaded), as PyTorch's own CPU launcher runs
them: on glibc's malloc a PyTorch step faults its pages in again every step
(TORCH_MALLOCS below); `--torch-malloc glibc` times PyTorch as installed. The header names the
allocator too.

Swin V2 is patched, for the export and the PyTorch references alike: its attention zeroes part
of the qkv bias in place (`qkv_bias[length : 2 * length].zero_()`), which PyTorch 1.13 cannot
export (aten::zero); zoo-check replaces that one statement by an out-of-place torch.cat that gives
the same values and gradients bit for bit (patch_swin_v2_bias_zeroing).

--time-only does only step 5 (exporting without references when nothing is cached), and
--isa avx2 holds both sides to AVX2 kernels (an x86-64-v3 build of rematlab-cli, BLIS's and
OpenBLAS's Haswell kernels, oneDNN capped at AVX2), as on an AVX2-only CPU.

Everything expensive is cached under --cache (default .cache/zoo-check): the export, the input
and the references per model, and our results (redone when rematlab-cli is newer). Interrupt it
and run it again to resume.
"""
import argparse
import datetime
import glob
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


# The environment of PyTorch's child processes (torch_env): which BLAS they load.
TORCH_ENV = None


def env_like(meta):
    """The environment for a model's decision-matched child: the BLAS its cached references were
    computed with (meta's torch_blas; exports from before it was recorded used the reference
    BLAS), so that with no decision flipped the matched step is the plain float64 step, bitwise."""
    kind = meta.get("torch_blas", {}).get("kind", "reference")
    return TORCH_ENV if kind == "openblas" else dict(os.environ)


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


SWIN_V2_ZEROING = "qkv_bias[length : 2 * length].zero_()"
SWIN_V2_OUT_OF_PLACE = ("qkv_bias = torch.cat((qkv_bias[:length], "
                        "torch.zeros_like(qkv_bias[length : 2 * length]), "
                        "qkv_bias[2 * length :]))")


def patch_swin_v2_bias_zeroing(torch):
    """Swin V2's attention zeroes the key part of (a clone of) the qkv bias in place,
    `qkv_bias[length : 2 * length].zero_()`, and aten::zero has no ONNX export (PyTorch 1.13, any
    opset). Replace that one statement, in torchvision's shifted_window_attention, by the
    out-of-place torch.cat of the query part, zeros and the value part: the same bias bit for bit
    (zeros_like gives +0.0 as zero_() does), the same forward, and the same gradients (no gradient
    reaches the key part either way). Used for the export and every PyTorch reference of
    zoo-check, so both sides run the same model. Fails loudly if torchvision's source changed."""
    import inspect
    import textwrap
    import torchvision.models.swin_transformer as st
    f = st.shifted_window_attention
    if getattr(f, "_zoo_check_patched", False):
        return
    src = textwrap.dedent(inspect.getsource(f))
    if src.count(SWIN_V2_ZEROING) != 1:
        raise RuntimeError("zoo-check: torchvision's shifted_window_attention no longer holds "
                           f"'{SWIN_V2_ZEROING}' once; update patch_swin_v2_bias_zeroing")
    src = src.replace(SWIN_V2_ZEROING, SWIN_V2_OUT_OF_PLACE)
    ns = {}
    exec(compile(src, inspect.getsourcefile(f) + " (zoo-check patch)", "exec"), st.__dict__, ns)
    patched = ns["shifted_window_attention"]
    patched._zoo_check_patched = True
    st.shifted_window_attention = patched


def prepare_torchvision(name, torch):
    import torchvision
    if name.startswith("swin_v2"):
        patch_swin_v2_bias_zeroing(torch)
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
    # Each gradient is taken out and the copy's parameter and gradient freed as we go, so the
    # float64 copy of a 632 M-parameter model (vit_h_14) does not hold its parameters, its
    # gradients and their converted copies at once (21 GB: killed for memory on a 23 GiB
    # machine).
    out = {}
    for n, p in mm.named_parameters():
        out[n] = (p.grad if p.grad is not None else torch.zeros_like(p)).double().numpy()
        p.grad = None
        p.data = torch.empty(0, dtype=p.dtype)
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


def mapped_files():
    """The files mapped into this process (/proc/self/maps' paths); raises OSError where there
    is no /proc."""
    files = set()
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6:
                files.add(parts[5])
    return files


def loaded_blas():
    """Which BLAS this process has loaded (after `import torch`), from /proc/self/maps: the
    libblas / liblapack / libopenblas files mapped, "openblas" or "reference" (Debian's libblas3
    alone), and OpenBLAS's own openblas_get_config() and core name where it is OpenBLAS."""
    libs = {p for p in mapped_files()
            if os.path.basename(p).startswith(("libblas", "liblapack", "libopenblas"))}
    open_ = sorted(p for p in libs if "openblas" in p)
    ref = sorted(p for p in libs if "openblas" not in p and "libblas" in os.path.basename(p))
    kind = ("mixed" if open_ and ref else "openblas" if open_ else "reference" if ref
            else "unknown")
    info = {"kind": kind, "libs": sorted(libs)}
    if open_:
        import ctypes
        for p in open_:
            try:
                lib = ctypes.CDLL(p)
                lib.openblas_get_config.restype = ctypes.c_char_p
                lib.openblas_get_corename.restype = ctypes.c_char_p
                info["config"] = lib.openblas_get_config().decode()
                info["core"] = lib.openblas_get_corename().decode()
                break
            except (OSError, AttributeError):
                continue
    return info


def blas_text(info):
    if not info:
        return "unknown BLAS"
    if info["kind"] == "openblas":
        return (f"OpenBLAS ({info.get('config', '?').split(' DYNAMIC')[0]}, "
                f"{info.get('core', '?')} kernels, from {os.path.dirname(info['libs'][0])})")
    if info["kind"] == "reference":
        return "the reference BLAS (Debian's libblas3)"
    return info["kind"] + " BLAS: " + ", ".join(info["libs"])


def fetched_package(cache, package, subdir, pattern):
    """A file of a Debian package, fetched without installing it: the package file is downloaded
    (`apt-get download`) into CACHE/SUBDIR and unpacked there (`dpkg -x`) once; returns the last
    path under it matching PATTERN (relative to CACHE/SUBDIR), or raises OSError saying why
    not."""
    root = os.path.join(cache, subdir)
    full = os.path.join(root, pattern)
    if not glob.glob(full):
        os.makedirs(root, exist_ok=True)
        try:
            p = subprocess.run(["apt-get", "download", package], cwd=root, capture_output=True,
                               text=True, timeout=600)
        except (OSError, subprocess.SubprocessError) as e:
            raise OSError(f"apt-get download {package}: {e}") from e
        debs = sorted(glob.glob(os.path.join(root, package + "_*.deb")))
        if p.returncode != 0 or not debs:
            raise OSError(f"apt-get download {package}: " +
                          (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1])
        x = subprocess.run(["dpkg", "-x", debs[-1], root], capture_output=True, text=True)
        if x.returncode != 0:
            raise OSError("dpkg -x: " + x.stderr.strip())
        if not glob.glob(full):
            raise OSError(f"the unpacked {package} has no {pattern}")
    return sorted(glob.glob(full))[-1]


def torch_env(cache, choice, threads):
    """The environment of PyTorch's child processes and the BLAS it asks for. Debian's PyTorch
    links libblas.so.3, which may be the reference BLAS (libblas3); installing libopenblas
    would switch that for the whole system (CBC's LP solver too), so for "openblas" the package
    file of libopenblas0-openmp is fetched (fetched_package) into CACHE/_openblas_openmp and put
    first on the children's LD_LIBRARY_PATH, its threads pinned to --threads
    (OPENBLAS_NUM_THREADS; OPENBLAS_CORETYPE and the like are left as they are). The OpenMP
    build, not the pthread one: PyTorch's own threads are libgomp's, and the pthread build keeps a
    second pool of spinning threads beside them. At 2 threads on 2 cores that made PyTorch's
    ViT-B/32 step 840-1170 ms against 330 on the OpenMP build (docs/benchmarks.md, 2026-12-07);
    at 1 thread the two builds time the same. When that is impossible it says so and falls back
    to the reference BLAS."""
    env = dict(os.environ)
    if choice == "reference":
        return env, "reference"
    try:
        lib = fetched_package(cache, "libopenblas0-openmp", "_openblas_openmp",
                              os.path.join("usr", "lib", "*", "openblas-openmp", "libblas.so.3"))
    except OSError as e:
        log(f"zoo-check: WARNING: cannot get OpenBLAS for PyTorch ({e}); PyTorch runs on the "
            "reference BLAS (if apt-get cannot locate the package, `apt-get update` first)")
        return env, "reference"
    libdir = os.path.dirname(lib)
    env["LD_LIBRARY_PATH"] = libdir + (":" + env["LD_LIBRARY_PATH"]
                                       if env.get("LD_LIBRARY_PATH") else "")
    env["OPENBLAS_NUM_THREADS"] = str(threads)
    return env, "openblas"


# PyTorch's allocator (--torch-malloc). On the CPU PyTorch has no caching allocator: a step's
# tensors come from malloc and go back to it, and glibc's malloc returns large blocks to the
# kernel, so every step touches fresh pages again (mlp:depth=16,width=1024,batch=512: ~22,500
# page faults a step, against none for RematLab, whose buffers stay between steps; on the VMs of
# the pool a fault costs ~12 us, docs/benchmarks.md 2026-12-06). PyTorch's own CPU launcher
# (torch.backends.xeon.run_cpu, in Debian's 1.13 too) preloads tcmalloc by default for that
# reason ("better memory reuse and reduce page fault"), and so do the children here: Debian's
# libtcmalloc-minimal4, fetched, not installed. "glibc" times PyTorch as installed.
TORCH_MALLOCS = ("tcmalloc", "glibc")


def with_torch_malloc(env, cache, choice, who):
    """ENV with PyTorch's allocator CHOICE (TORCH_MALLOCS; None: tcmalloc where it can be
    fetched, else glibc with a warning from WHO) preloaded. Raises OSError when a CHOICE of
    tcmalloc cannot be fetched."""
    if choice == "glibc":
        return env
    try:
        lib = fetched_package(cache, "libtcmalloc-minimal4", "_tcmalloc",
                              os.path.join("usr", "lib", "*", "libtcmalloc_minimal.so.4"))
    except OSError as e:
        if choice:
            raise
        log(f"{who}: WARNING: cannot get tcmalloc for PyTorch ({e}); PyTorch runs on glibc's "
            "malloc, faulting its pages in every step (if apt-get cannot locate the package, "
            "`apt-get update` first)")
        return env
    env = dict(env)
    env["LD_PRELOAD"] = lib + (" " + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    return env


def loaded_malloc():
    """The allocator this process runs on: a preloaded tcmalloc or jemalloc mapped into it (its
    file name), else glibc's malloc."""
    try:
        names = sorted(os.path.basename(p) for p in mapped_files())
    except OSError:
        names = []
    return next((n for n in names if "tcmalloc" in n or "jemalloc" in n), "glibc malloc")


def time_phase(name, d, threads):
    """PyTorch's float32 step time (time_step) on the exported model's input, in this process's
    BLAS, with oneDNN (PyTorch's default CPU convolutions, which do not call the BLAS) and
    without (im2col + the BLAS's GEMM); writes DIR/torch_time.json with the BLAS it found
    loaded."""
    import numpy as np
    import torch
    torch.set_num_threads(threads)
    with open(os.path.join(d, "meta.json")) as f:
        meta = json.load(f)
    m, _, _ = build_model(name, torch)
    inputs = {k: torch.from_numpy(np.load(os.path.join(d, k + ".npy"))) for k in meta["inputs"]}
    ms, cpu = time_step_cpu(m, inputs, torch)
    with torch.backends.mkldnn.flags(enabled=False):
        ms_n, cpu_n = time_step_cpu(m, inputs, torch)
    with open(os.path.join(d, "torch_time.json"), "w") as f:
        json.dump({"torch_ms": ms, "torch_no_onednn_ms": ms_n, "torch_cpu_ms": cpu,
                   "torch_no_onednn_cpu_ms": cpu_n, "threads": threads,
                   "blas": loaded_blas(), "malloc": loaded_malloc()}, f)


def time_step_cpu(m, inputs, torch, repeat=3):
    """time_step's medians, wall-clock and this process's CPU time (what RematLab's cpu_ms
    measures), in ms."""
    mm = m.float().train()
    args = list(inputs.values())
    walls, cpus = [], []
    for i in range(repeat + 1):
        mm.zero_grad()
        t0, c0 = time.perf_counter(), time.process_time()
        y = first_output(mm(*args))
        (0.5 * (y * y).sum()).backward()
        if i:
            walls.append((time.perf_counter() - t0) * 1e3)
            cpus.append((time.process_time() - c0) * 1e3)
    return median(walls), median(cpus)


def build_model(name, torch):
    """The model of `name` as zoo-check exports it (seeded, so that a later process rebuilds the
    same weights); for a language model also its inputs. Returns (model, inputs or None, the
    generator the image inputs are drawn from)."""
    torch.manual_seed(0)
    lms = lm_models()
    g = torch.Generator().manual_seed(0)
    inputs = None
    if name in lms:
        cls, make_inputs = lms[name]
        m = cls()
        inputs = make_inputs(g)
    else:
        m = prepare_torchvision(name, torch)
    zero_stochastic(m, torch)
    reinit_zero_weights(m, torch)
    m.train()
    return m, inputs, g


def torch_phase(name, d, threads, load_only=False):
    """Exports `name` into directory d with its input(s) and PyTorch's reference gradients (only
    the export and the inputs with load_only)."""
    import numpy as np
    import torch
    torch.set_num_threads(threads)
    meta = {"model": name, "torch": torch.__version__}
    m, inputs, g = build_model(name, torch)
    sizes = [None] if inputs is not None else SIZES
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
    # One reference in memory at a time: each is written out and dropped before the next.
    for file, dtype, mkldnn, loss_key in (("grads64.npz", torch.float64, True, "loss64"),
                                          ("grads32.npz", torch.float32, True, "loss32"),
                                          ("grads32_no_onednn.npz", torch.float32, False, None)):
        grads, loss = grads_of(m, inputs, dtype, torch, mkldnn=mkldnn)
        if loss_key:
            meta[loss_key] = loss
        np.savez(os.path.join(d, file), **grads)
        del grads
    meta["torch_ms"] = time_step(m, inputs, torch)
    meta["torch_threads"] = threads
    meta["torch_blas"] = loaded_blas()
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f)


# --- the decision-matched float64 reference (runs in a child process per model) ----------------

class Refused(Exception):
    pass


# The kinked elementwise ops matched besides ReLU, by our op name (rematlab-cli's dump): the
# torch.nn.functional functions PyTorch 1.13 / torchvision 0.14 reach them through (nn.ReLU6 and
# nn.Hardtanh call F.hardtanh; F.relu6 is patched too in case a model calls it; nn.Hardsigmoid
# calls F.hardsigmoid, nn.Hardswish F.hardswish), and the kinks in x. Each element is on one of
# three linear pieces, 0 below the lower kink, 1 between, 2 above; a decision is that piece.
KINK_FNS = {"clip": ("hardtanh", "relu6"), "hard_sigmoid": ("hardsigmoid",),
            "hard_swish": ("hardswish",)}


def own_piece(kind, x, lo, hi):
    """The piece of each element of x by the backward's rule (ours and PyTorch's agree for clip
    and hard_swish; for hard_sigmoid this is PyTorch's x-based rule, -3 < x < 3, which float64
    shares with ours): clip passes the gradient strictly inside (lo, hi), hard_swish is 0 below
    -3, x/3 + 1/2 on [-3, 3] and 1 above."""
    import torch
    p = torch.ones(x.shape, dtype=torch.int8)
    if kind == "hard_swish":
        p[x < -3] = 0
        p[x > 3] = 2
    else:
        p[x <= lo] = 0
        p[x >= hi] = 2
    return p


def on_piece(kind, x, p, lo, hi, own, y_own):
    """f(x) with each element on the given piece p, every value computed in x's dtype (float64):
    PyTorch's own result y_own (and its backward) where p is float64's own piece, elsewhere that
    piece's formula, clip lo / x / hi, hard_sigmoid 0 / (x + 3)/6 / 1, hard_swish 0 / x(x + 3)/6
    / x (so with no decision flipped the step is PyTorch's float64 step, bitwise)."""
    import torch
    mid, low = p == 1, p == 0
    if kind == "clip":
        alt = torch.where(mid, x, torch.where(low, x.new_tensor(lo), x.new_tensor(hi)))
    elif kind == "hard_sigmoid":
        alt = torch.where(mid, (x + 3) / 6, torch.where(low, x.new_tensor(0.0),
                                                        x.new_tensor(1.0)))
    else:
        alt = torch.where(mid, x * (x + 3) / 6, torch.where(low, x * 0, x))
    return torch.where(p == own, y_own, alt)


def with_decisions(m, inputs, dtype, torch, relu_mask, pool_index, kink_piece=None, mkldnn=True):
    """grads_of(m, inputs, dtype) with every ReLU, max-pool and other kinked-op decision taken
    from outside: the k-th call of torch.nn.functional.relu (nn.ReLU modules call it too,
    torchvision 0.14) returns x * relu_mask(k, x); the k-th torch.nn.functional.max_pool2d call
    gathers each window's element at pool_index(k, x, args); the k-th call of a KINK_FNS kind
    (clip, hard_sigmoid, hard_swish) puts each element on the piece kink_piece(kind, k, x, lo, hi)
    gives (on_piece). None from pool_index, kink_piece or relu_mask: that call's own decisions (a
    node off the first output). Calls come in the order the export traced them, the ONNX node
    order. Returns the gradients, the loss, and per call the flipped decisions: (count, largest
    |x|/rms of the flipped pre-activations, elements) for ReLUs, (count, largest gap/rms between
    float64's own maximum and the chosen element, windows) for pools, (count, largest distance
    to the nearer kink / rms, elements) per kinked kind; None for a call left alone."""
    import torch.nn.functional as F
    real_relu, real_pool = F.relu, F.max_pool2d
    real_kinks = {fn: getattr(F, fn) for fns in KINK_FNS.values() for fn in fns}
    relu_calls, pool_calls = [], []
    kink_calls = {kind: [] for kind in KINK_FNS}

    def relu(x, inplace=False):
        mask = relu_mask(len(relu_calls), x)
        if mask is None:
            relu_calls.append(None)
            return real_relu(x, inplace=inplace)
        with torch.no_grad():
            flipped = mask != (x > 0)
            n = int(flipped.sum())
            rms = float(x.pow(2).mean().sqrt())
            close = float((x.abs()[flipped] / rms).max()) if n else 0.0
        relu_calls.append((n, close, x.numel()))
        mk = mask.to(x.dtype)
        return x.mul_(mk) if inplace else x * mk

    def pool(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
             return_indices=False):
        args = dict(kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation,
                    ceil_mode=ceil_mode)
        idx = pool_index(len(pool_calls), x, args)
        if idx is None:
            pool_calls.append(None)
            return real_pool(x, return_indices=return_indices, **args)
        with torch.no_grad():
            y_own = real_pool(x, **args)
            y_at = x.flatten(2).gather(2, idx.flatten(2)).view_as(y_own)
            flipped = y_own != y_at  # float64's own maximum is another element
            n = int(flipped.sum())
            rms = float(x.pow(2).mean().sqrt())
            gap = float(((y_own - y_at)[flipped] / rms).max()) if n else 0.0
        pool_calls.append((n, gap, y_own.numel()))
        y = x.flatten(2).gather(2, idx.flatten(2)).view(idx.shape)
        return (y, idx) if return_indices else y

    def kinked(kind, x, lo, hi, real_call):
        """real_call(inplace) is the unpatched function on x."""
        calls = kink_calls[kind]
        p = kink_piece(kind, len(calls), x, lo, hi) if kink_piece else None
        if p is None:
            calls.append(None)
            return real_call(None)
        with torch.no_grad():
            own = own_piece(kind, x, lo, hi)
            flipped = p != own
            n = int(flipped.sum())
            rms = float(x.pow(2).mean().sqrt())
            dist = torch.minimum((x - lo).abs(), (x - hi).abs())
            close = float((dist[flipped] / rms).max()) if n else 0.0
        calls.append((n, close, x.numel()))
        return on_piece(kind, x, p, lo, hi, own, real_call(False))

    def hardtanh(x, min_val=-1.0, max_val=1.0, inplace=False):
        return kinked("clip", x, float(min_val), float(max_val), lambda ip: real_kinks[
            "hardtanh"](x, min_val, max_val, inplace if ip is None else ip))

    def relu6(x, inplace=False):
        return kinked("clip", x, 0.0, 6.0,
                      lambda ip: real_kinks["relu6"](x, inplace if ip is None else ip))

    def hardsigmoid(x, inplace=False):
        return kinked("hard_sigmoid", x, -3.0, 3.0,
                      lambda ip: real_kinks["hardsigmoid"](x, inplace if ip is None else ip))

    def hardswish(x, inplace=False):
        return kinked("hard_swish", x, -3.0, 3.0,
                      lambda ip: real_kinks["hardswish"](x, inplace if ip is None else ip))

    patched = {"relu": relu, "max_pool2d": pool, "hardtanh": hardtanh, "relu6": relu6,
               "hardsigmoid": hardsigmoid, "hardswish": hardswish}
    real = {fn: getattr(F, fn) for fn in patched}
    for fn, f in patched.items():
        setattr(F, fn, f)
    try:
        g, loss = grads_of(m, inputs, dtype, torch, mkldnn=mkldnn)
    finally:
        for fn, f in real.items():
            setattr(F, fn, f)
    return g, loss, relu_calls, pool_calls, kink_calls


def recording_decisions(m, inputs, torch, mkldnn):
    """PyTorch's float32 gradients with each ReLU's mask (output > 0), each max-pool's indices and
    each clip / hard_sigmoid / hard_swish call's pieces (own_piece of its float32 input: PyTorch's
    backward rules), in call order, as that run took them."""
    import torch.nn.functional as F
    masks, indices = [], []
    pieces = {kind: [] for kind in KINK_FNS}
    real = {fn: getattr(F, fn) for fn in ("relu", "max_pool2d", "hardtanh", "relu6",
                                          "hardsigmoid", "hardswish")}

    def relu(x, inplace=False):
        y = real["relu"](x, inplace=inplace)
        masks.append((y > 0).detach().clone())
        return y

    def pool(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
             return_indices=False):
        y, idx = real["max_pool2d"](x, kernel_size, stride, padding, dilation,
                                    ceil_mode=ceil_mode, return_indices=True)
        indices.append(idx.detach().clone())
        return (y, idx) if return_indices else y

    def record(kind, x, lo, hi):  # before the call: an in-place one overwrites x
        with torch.no_grad():
            pieces[kind].append(own_piece(kind, x.detach(), lo, hi))

    def hardtanh(x, min_val=-1.0, max_val=1.0, inplace=False):
        record("clip", x, float(min_val), float(max_val))
        return real["hardtanh"](x, min_val, max_val, inplace)

    def relu6(x, inplace=False):
        record("clip", x, 0.0, 6.0)
        return real["relu6"](x, inplace)

    def hardsigmoid(x, inplace=False):
        record("hard_sigmoid", x, -3.0, 3.0)
        return real["hardsigmoid"](x, inplace)

    def hardswish(x, inplace=False):
        record("hard_swish", x, -3.0, 3.0)
        return real["hardswish"](x, inplace)

    patched = {"relu": relu, "max_pool2d": pool, "hardtanh": hardtanh, "relu6": relu6,
               "hardsigmoid": hardsigmoid, "hardswish": hardswish}
    for fn, f in patched.items():
        setattr(F, fn, f)
    try:
        g, _ = grads_of(m, inputs, torch.float32, torch, mkldnn=mkldnn)
    finally:
        for fn, f in real.items():
            setattr(F, fn, f)
    return g, masks, indices, pieces


def onnx_calls(model):
    """Per kind (relu, maxpool2d, clip, hard_sigmoid, hard_swish), the ONNX nodes in file order
    whose export is one call of the matching torch.nn.functional function, and the names of the
    nodes the first graph output depends on (RematLab imports only those), by first output. PyTorch 1.13 exports
    F.hardswish at opset 13 as HardSigmoid(alpha 1/6, beta 1/2) whose only consumer is Mul(x,
    that), which RematLab imports as one hard_swish (onnx_import.cpp); any other HardSigmoid is an
    F.hardsigmoid. A Clip is an F.hardtanh/F.relu6 call only where its input depends on the
    graph's input and is not a ReduceL2's output: F.normalize's clamp_min is part of RematLab's
    l2_normalize, and a clamp of a value computed from parameters alone (Swin V2's logit scale)
    is torch.clamp; those are returned in `other` (by kind, their names), not as calls. Nodes
    are told apart by their first output (names may be empty)."""
    g = model.graph
    consumers = {}
    for n in g.node:
        for v in n.input:
            consumers.setdefault(v, []).append(n)
    producer = {o: n for n in g.node for o in n.output}
    needed, todo = set(), [g.output[0].name]
    while todo:
        n = producer.get(todo.pop())
        if n is None or n.output[0] in needed:
            continue
        needed.add(n.output[0])
        todo.extend(n.input)

    def attr(n, key, default):
        for a in n.attribute:
            if a.name == key:
                return a.f
        return default

    inits = {t.name for t in g.initializer}
    dynamic = {i.name for i in g.input if i.name not in inits}
    for n in g.node:  # ONNX lists nodes in topological order
        if any(v in dynamic for v in n.input):
            dynamic.update(n.output)

    calls = {"relu": [], "maxpool2d": [], "clip": [], "hard_sigmoid": [], "hard_swish": []}
    other = {k: [] for k in calls}
    for n in g.node:
        if n.op_type == "Relu":
            calls["relu"].append(n)
        elif n.op_type == "MaxPool":
            calls["maxpool2d"].append(n)
        elif n.op_type == "Clip":
            src = producer.get(n.input[0])
            fused = src is not None and src.op_type == "ReduceL2"
            if fused or n.input[0] not in dynamic:
                other["clip"].append(n.name or n.output[0])
            else:
                calls["clip"].append(n)
        elif n.op_type == "HardSigmoid":
            use = consumers.get(n.output[0], [])
            hsw = (abs(attr(n, "alpha", 0.2) - 1 / 6) < 1e-6 and abs(attr(n, "beta", 0.5) - 0.5)
                   < 1e-6 and len(use) == 1 and use[0].op_type == "Mul"
                   and sorted(use[0].input) == sorted([n.input[0], n.output[0]]))
            calls["hard_swish" if hsw else "hard_sigmoid"].append(n)
    return calls, needed, other


def our_name_fits(kind, ours, onnx_name):
    """Whether our node `ours` is the import of ONNX node `onnx_name`: the same name, except for
    hard_swish, which RematLab names after the module of the HardSigmoid + Mul pair
    ("/features/features.0/features.0.2/HardSigmoid" → "/features/features.0/features.0.2/
    HardSwish"; onnx_import.cpp, module_of and hard_sigmoid), with "_2", … where taken."""
    import re
    if kind != "hard_swish":
        return ours == onnx_name
    slash = onnx_name.rfind("/")
    module = onnx_name if slash <= 0 else onnx_name[:slash]
    base = ("" if module == onnx_name else module) + "/HardSwish"
    return ours == base or re.fullmatch(re.escape(base) + r"_\d+", ours) is not None


def our_kink_piece(kind, x, y, lo, hi, alpha=None, beta=None):
    """The piece our float32 kernels (engine/cpu/activations.cpp) put each element on, from our
    dumped input x and output y (numpy float32), checked against y: clip is min(max(x, lo), hi),
    its backward passes strictly inside (lo, hi); hard_swish is x·min(max(x + 3, 0), 6)/6, 0
    below -3, x/3 + 1/2 on [-3, 3]; hard_sigmoid is min(max(a·x + b, 0), 1) with v = a·x + b
    possibly contracted to one FMA by the compiler, so y itself decides (v ≤ 0, 0 < v < 1,
    v ≥ 1: the forward's and the backward's test on the same v). Returns (pieces, None) or
    (None, why the dump does not fit)."""
    import numpy as np
    f32 = np.float32
    with np.errstate(all="ignore"):
        if kind == "clip":
            lo32, hi32 = f32(lo), f32(hi)
            if not np.array_equal(np.minimum(np.maximum(x, lo32), hi32), y):
                return None, f"is not min(max(x, {lo}), {hi}) of our dumped input"
            p = np.ones(x.shape, np.int8)
            p[x <= lo32] = 0
            p[x >= hi32] = 2
            return p, None
        if kind == "hard_swish":
            if not np.array_equal(x * np.minimum(np.maximum(x + f32(3), f32(0)), f32(6)) / f32(6),
                                  y):
                return None, "is not x·min(max(x + 3, 0), 6)/6 of our dumped input"
            p = np.ones(x.shape, np.int8)
            p[x < f32(-3)] = 0
            p[x > f32(3)] = 2
            return p, None
        a, b = f32(alpha), f32(beta)
        plain = np.minimum(np.maximum(a * x + b, f32(0)), f32(1))
        fused = np.minimum(np.maximum((np.float64(a) * x.astype(np.float64) + np.float64(b))
                                      .astype(f32), f32(0)), f32(1))
        bad = int(((y != plain) & (y != fused)).sum())
        if bad:
            return None, (f"is not min(max({alpha:.6g}·x + {beta:.6g}, 0), 1) of our dumped input "
                          f"at {bad} elements (with or without FMA)")
        p = np.ones(x.shape, np.int8)
        p[y <= 0] = 0
        p[y >= 1] = 2
        return p, None


def matched_phase(name, d, threads):
    """The decision-matched float64 reference: PyTorch's float64 gradients with every discrete
    decision of a kinked op taken from our float32 run (DIR/ours_acts, `rematlab-cli run
    --dump-activations`; see dump_ops_for): ReLU mask_k = (our k-th ReLU output > 0); a max-pool
    window's element is the first maximum of our float32 input (our kernel's rule and PyTorch's),
    found from the dump of that input (any producer's output, or a graph input); a clip (ReLU6),
    hard_sigmoid or hard_swish element's linear piece is the one our kernel put it on
    (our_kink_piece, from our dumped input and output). k runs over the ONNX nodes of each kind in
    file order (the order PyTorch traced the calls); nodes off the first output, which RematLab
    does not import (GoogLeNet's and Inception's auxiliary heads), keep float64's own decisions
    and are counted. Everything else is computed in float64 by PyTorch. The same is done for
    PyTorch's own two float32 paths (the float64 step with their decisions): their errors against
    that are what float32 rounding alone does. Writes grads_matched.npz and matched.json (flipped
    decisions per kind: where ours differ from float64's own, and how close to a kink each was),
    or matched.json with "refused" and why (no reference then)."""
    import numpy as np
    import onnx
    import onnx.numpy_helper
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(threads)
    out_path = os.path.join(d, "matched.json")
    adir = os.path.join(d, "ours_acts")
    try:
        with open(os.path.join(adir, "index.json")) as f:
            dumped = json.load(f)["nodes"]
        model = onnx.load(os.path.join(d, "model.onnx"))
        calls, needed, other = onnx_calls(model)
        # For each kind, call k → our dumped node (None: off the first output, not imported).
        ours, off = {}, {}
        for kind, nodes in calls.items():
            mine = [n for n in dumped if n["op"] == kind and
                    not any(our_name_fits(kind, n["node"], o) for o in other[kind])]
            theirs = [n for n in nodes if n.output[0] in needed]
            same = len(mine) == len(theirs) and all(
                our_name_fits(kind, a["node"], b.name or b.output[0])  # as onnx_import names it
                for a, b in zip(mine, theirs))
            if not same:
                raise Refused(f"our {len(mine)} dumped {kind} outputs are not the ONNX file's "
                              f"{len(theirs)} {kind} nodes on the first output's path, in the "
                              "same order")
            it = iter(mine)
            ours[kind] = [next(it) if n.output[0] in needed else None for n in nodes]
            off[kind] = len(nodes) - len(theirs)
        by_output = {n["output"]: n for n in dumped}
        hs_attrs = {}
        for n in calls["hard_sigmoid"]:
            a = {x.name: x.f for x in n.attribute}
            hs_attrs[n.output[0]] = (a.get("alpha", 0.2), a.get("beta", 0.5))
        m, _, _ = build_model(name, torch)
        # The rebuilt model must be the exported one: its parameters are the file's initializers.
        inits = {t.name: t for t in model.graph.initializer}
        checked = 0
        for pname, p in m.named_parameters():
            if pname in inits:
                if not np.array_equal(onnx.numpy_helper.to_array(inits[pname]),
                                      p.detach().numpy()):
                    raise Refused(f"the rebuilt model's {pname} is not the exported one")
                checked += 1
        if checked == 0:
            raise Refused("no parameter of the rebuilt model is an initializer of the ONNX file")
        with open(os.path.join(d, "meta.json")) as f:
            meta = json.load(f)
        inputs = {k: torch.from_numpy(np.load(os.path.join(d, k + ".npy")))
                  for k in meta["inputs"]}

        def our_input(node, what):
            """Our float32 input of a dumped node: its producer's dumped output or a graph
            input."""
            v = node["inputs"][0]
            src = by_output.get(v)
            if src is not None:
                return np.load(os.path.join(adir, src["file"]))
            if v in meta["inputs"]:
                return np.load(os.path.join(d, v + ".npy"))
            raise Refused(f"{what} ({node['node']}): its input '{v}' was not dumped")

        def check_count(got, what, n):
            if len(got) != n:
                raise Refused(f"the float64 forward called {what} {len(got)} times, but "
                              f"{n} were recorded")

        def mask_from(masks, who):
            def f(k, x):
                if k >= len(masks):
                    raise Refused(f"the float64 forward calls relu more than the {len(masks)} "
                                  f"times {who} did")
                if masks[k] is None:
                    return None
                if tuple(x.shape) != tuple(masks[k].shape):
                    raise Refused(f"ReLU call {k} has shape {list(x.shape)}, {who} "
                                  f"{list(masks[k].shape)}")
                return masks[k]
            return f

        def pieces_from(pieces, who):
            def f(kind, k, x, lo, hi):
                got = pieces[kind]
                if k >= len(got):
                    raise Refused(f"the float64 forward calls {kind} more than the {len(got)} "
                                  f"times {who} did")
                p = got[k]
                if callable(p):
                    p = p(x, lo, hi)
                if p is None:
                    return None
                if tuple(x.shape) != tuple(p.shape):
                    raise Refused(f"{kind} call {k} has shape {list(x.shape)}, {who} "
                                  f"{list(p.shape)}")
                return p
            return f

        # Ours, from the dump.
        real_pool = F.max_pool2d
        masks = [None if n is None else
                 torch.from_numpy(np.load(os.path.join(adir, n["file"])) > 0)
                 for n in ours["relu"]]

        def our_pool(k, x, args):
            if k >= len(ours["maxpool2d"]):
                raise Refused(f"the float64 forward calls max_pool2d more than the ONNX file's "
                              f"{len(ours['maxpool2d'])} MaxPool nodes")
            node = ours["maxpool2d"][k]
            if node is None:
                return None
            x32 = torch.from_numpy(our_input(node, f"max-pool call {k}"))
            if tuple(x.shape) != tuple(x32.shape):
                raise Refused(f"max-pool call {k} ({node['node']}) has input shape "
                              f"{list(x.shape)}, our dump {list(x32.shape)}")
            y32, idx = real_pool(x32, return_indices=True, **args)  # F's is patched now
            if not np.array_equal(y32.numpy(), np.load(os.path.join(adir, node["file"]))):
                raise Refused(f"max-pool call {k} ({node['node']}): PyTorch's max-pool of "
                              "our dumped input is not our dumped output")
            return idx

        def our_piece_of(kind, k, node):
            def f(x, lo, hi):
                x32 = our_input(node, f"{kind} call {k}")
                y32 = np.load(os.path.join(adir, node["file"]))
                if tuple(x.shape) != x32.shape or x32.shape != y32.shape:
                    raise Refused(f"{kind} call {k} ({node['node']}) has input shape "
                                  f"{list(x.shape)}, our dump {list(x32.shape)} → "
                                  f"{list(y32.shape)}")
                alpha = beta = None
                if kind == "hard_sigmoid":
                    alpha, beta = hs_attrs[calls["hard_sigmoid"][k].output[0]]
                    if abs(alpha - 1 / 6) > 1e-6 or abs(beta - 0.5) > 1e-6:
                        raise Refused(f"hard_sigmoid call {k} ({node['node']}) has alpha "
                                      f"{alpha}, beta {beta}; F.hardsigmoid's are 1/6, 1/2")
                p, why = our_kink_piece(kind, x32, y32, lo, hi, alpha, beta)
                if p is None:
                    raise Refused(f"{kind} call {k} ({node['node']}): our dumped output {why}")
                return torch.from_numpy(p)
            return f

        our_pieces = {kind: [None if n is None else our_piece_of(kind, k, n)
                             for k, n in enumerate(ours[kind])] for kind in KINK_FNS}
        g, loss, rc, pc, kc = with_decisions(m, inputs, torch.float64, torch,
                                             mask_from(masks, "we"), our_pool,
                                             pieces_from(our_pieces, "the ONNX file"))
        check_count(rc, "relu", len(masks))
        check_count(pc, "max_pool2d", len(ours["maxpool2d"]))
        for kind, fns in KINK_FNS.items():
            check_count(kc[kind], "/".join(fns), len(ours[kind]))
        np.savez(os.path.join(d, "grads_matched.npz"), **g)
        res = {"relus": sum(c is not None for c in rc),
               "relus_off_path": off["relu"],
               "elements": sum(c[2] for c in rc if c),
               "flipped": sum(c[0] for c in rc if c),
               "flip_max_rel": max([c[1] for c in rc if c and c[0]], default=None),
               "flipped_tensors": [{"node": ours["relu"][k]["node"], "op": "relu",
                                    "flipped": c[0], "closest": c[1]}
                                   for k, c in enumerate(rc) if c and c[0]],
               "loss_matched": loss,
               "pools": len(pc), "pools_matched": sum(c is not None for c in pc),
               "pool_windows": sum(c[2] for c in pc if c),
               "pool_flipped": sum(c[0] for c in pc if c),
               "pool_flip_max_rel": max([c[1] for c in pc if c and c[0]], default=None),
               "kinks": {}}
        res["flipped_tensors"] += [{"node": ours["maxpool2d"][k]["node"], "op": "maxpool2d",
                                    "flipped": c[0], "closest": c[1]}
                                   for k, c in enumerate(pc) if c and c[0]]
        for kind in KINK_FNS:
            cs = kc[kind]
            res["kinks"][kind] = {
                "calls": len(cs), "matched": sum(c is not None for c in cs),
                "off_path": off[kind], "elements": sum(c[2] for c in cs if c),
                "flipped": sum(c[0] for c in cs if c),
                "flip_max_rel": max([c[1] for c in cs if c and c[0]], default=None)}
            res["flipped_tensors"] += [{"node": ours[kind][k]["node"], "op": kind,
                                        "flipped": c[0], "closest": c[1]}
                                       for k, c in enumerate(cs) if c and c[0]]

        # PyTorch's float32 paths against float64 with their own decisions.
        for key, mkldnn in (("torch", True), ("torch_no_onednn", False)):
            g32, tmasks, tidx, tpieces = recording_decisions(m, inputs, torch, mkldnn)

            def their_pool(k, x, args, tidx=tidx):
                return tidx[k] if k < len(tidx) else None

            gt, _, trc, tpc, tkc = with_decisions(m, inputs, torch.float64, torch,
                                                  mask_from(tmasks, "PyTorch float32"),
                                                  their_pool,
                                                  pieces_from(tpieces, "PyTorch float32"))
            check_count(trc, "relu", len(tmasks))
            check_count(tpc, "max_pool2d", len(tidx))
            for kind, fns in KINK_FNS.items():
                check_count(tkc[kind], "/".join(fns), len(tpieces[kind]))
            res[key + "_flipped"] = (sum(c[0] for c in trc if c) + sum(c[0] for c in tpc if c)
                                     + sum(c[0] for cs in tkc.values() for c in cs if c))
            res[key + "_err"] = {p: rel_err(g32[p], gt[p]) for p in gt}
    except Refused as e:
        res = {"refused": str(e)}
    with open(out_path, "w") as f:
        json.dump(res, f)


def dump_ops_for(model_path):
    """The --dump-activations-ops the decision-matched reference needs: relu and maxpool2d
    outputs, and, where the model has clip / hard_sigmoid / hard_swish nodes or a max-pool whose
    input is not a ReLU's output, the inputs of those too: every forward output ("all": which of
    our op kinds produces those inputs is not known before the import)."""
    import onnx
    g = onnx.load(model_path, load_external_data=False).graph
    relu_out = {o for n in g.node if n.op_type == "Relu" for o in n.output}
    for n in g.node:
        if n.op_type in ("Clip", "HardSigmoid", "HardSwish"):
            return "all"
        if n.op_type == "MaxPool" and n.input[0] not in relu_out:
            return "all"
    return "relu,maxpool2d"

# --- our side ----------------------------------------------------------------------------------

def rel_err(a, ref):
    import numpy as np
    scale = float(np.abs(ref).max()) if ref.size else 0.0
    diff = float(np.abs(a - ref).max()) if ref.size else 0.0
    return diff / scale if scale > 0 else diff


def run_cli(cli, args, timeout):
    try:
        p = subprocess.run([cli] + args, capture_output=True, text=True, timeout=timeout,
                           env=OURS_ENV)
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
    adir = os.path.join(d, "ours_acts")
    shutil.rmtree(gdir, ignore_errors=True)
    shutil.rmtree(adir, ignore_errors=True)
    for f in ("matched.json", "grads_matched.npz"):
        if os.path.exists(os.path.join(d, f)):
            os.remove(os.path.join(d, f))
    # --dump-activations: our outputs of kinked ops (and their inputs where needed), whose
    # decisions the matched reference takes (copied in a separate step after the timed ones, so
    # the times and peaks are not affected).
    rc, out, err = run_cli(cli, ["run", "--network", net, "--strategy", "none", "--threads",
                                 str(threads), "--repeat", "3", "--json", "--dump-grads", gdir,
                                 "--dump-activations", adir, "--dump-activations-ops",
                                 dump_ops_for(net)] + inputs, timeout)
    if rc != 0:
        row["status"] = "refused: " + reason_of(err) if rc is not None else err
        return row
    j = json.loads(out)
    row.update(status="loaded", nodes=j.get("computes"), param_bytes=j.get("params"),
               ours_ms=j.get("total_ms"), ours_cpu_ms=j.get("cpu_ms"), loss=j.get("loss"), loss64=meta.get("loss64"))
    g64 = np.load(os.path.join(d, "grads64.npz"))
    g32 = np.load(os.path.join(d, "grads32.npz"))
    g32n = np.load(os.path.join(d, "grads32_no_onednn.npz"))
    # The decision-matched float64 reference, by PyTorch in a child process.
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--threads", str(threads),
                        "--matched-phase", f"{name}={d}"], capture_output=True, text=True,
                       env=env_like(meta))
    row["reference_blas"] = meta.get("torch_blas", {}).get("kind", "reference")
    mpath = os.path.join(d, "matched.json")
    if p.returncode != 0 or not os.path.exists(mpath):
        tail = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"
        matched = {"refused": "PyTorch side failed: " + tail[:200]}
    else:
        with open(mpath) as f:
            matched = json.load(f)
    gm = np.load(os.path.join(d, "grads_matched.npz")) if "refused" not in matched else None
    row["matched"] = {k: v for k, v in matched.items()
                      if k not in ("flipped_tensors", "torch_err", "torch_no_onednn_err")}
    row["matched"]["flipped_tensors"] = matched.get("flipped_tensors", [])[:20]
    # PyTorch's float32 errors against float64 with PyTorch's own decisions: float32 rounding
    # without any flipped decision, the stricter allowance.
    t_own, tn_own = matched.get("torch_err", {}), matched.get("torch_no_onednn_err", {})
    worst_m, bad_m, bad_s, worst_to, worst_ton = 0.0, [], [], 0.0, 0.0
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
        allowance = max(10 * max(et, etn), 1e-4)
        if e > allowance:
            bad.append(f"{p} {e:.1e} (PyTorch f32 {et:.1e}/{etn:.1e})")
        if gm is not None:
            em = rel_err(ours, gm[p])
            worst_m = max(worst_m, em)
            if em > allowance:
                bad_m.append(f"{p} {em:.1e} (plain f64 {e:.1e}, allowance {allowance:.1e})")
            to, ton = t_own.get(p, 0.0), tn_own.get(p, 0.0)
            worst_to, worst_ton = max(worst_to, to), max(worst_ton, ton)
            strict = max(10 * max(to, ton), 1e-4)
            if em > strict:
                bad_s.append(f"{p} {em:.1e} (PyTorch f32 vs its own decision-matched f64 "
                             f"{to:.1e}/{ton:.1e})")
    if gm is not None:
        row["matched"].update(grad_err=worst_m, grads_ok=n - len(bad_m) - len(missing) - unused,
                              grads_bad=bad_m[:10], grads_bad_n=len(bad_m),
                              torch_err=worst_to, torch_err_no_onednn=worst_ton,
                              grads_ok_strict=n - len(bad_s) - len(missing) - unused,
                              grads_bad_strict=bad_s[:10], grads_bad_strict_n=len(bad_s))
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


def export_phase(name, d, threads, load_only):
    """Runs torch_phase in a child (the export; PyTorch's references unless load_only): None
    when DIR/meta.json was written, else why not."""
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--threads", str(threads),
                        "--torch-phase", f"{name}={d}"] + (["--load-only"] if load_only else []),
                       capture_output=True, text=True, env=TORCH_ENV)
    if p.returncode != 0 or not os.path.exists(os.path.join(d, "meta.json")):
        return reason_of(p.stderr.strip().splitlines()[-1] if p.stderr.strip() else
                         f"exit {p.returncode}")
    return None


def torch_time_once(name, d, threads):
    """One PyTorch timing process (time_phase) on the model in d: its torch_time.json, or an
    error string."""
    path = os.path.join(d, "torch_time.json")
    if os.path.exists(path):
        os.remove(path)
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--threads", str(threads),
                        "--time-phase", f"{name}={d}"], capture_output=True, text=True,
                       env=TORCH_ENV)
    if p.returncode != 0 or not os.path.exists(path):
        tail = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"
        return "PyTorch timing failed: " + tail[:200]
    with open(path) as f:
        return json.load(f)


def timing(name, d, cli, threads, timeout, rounds, row):
    """Step times, ours and PyTorch's (float32, with and without oneDNN, TORCH_ENV's BLAS),
    alternated: the first of ours is the main run's (`run --repeat 3`, median), then PyTorch's
    (time_phase, in a fresh process: median of 3 steps after one warm-up each way), then for
    each further round ours again
    (`run --repeat 3`, no dumps) and PyTorch's. Returns the wall-clock medians per round
    {"ours": [...], "torch": [...], "torch_no_onednn": [...], "cpu": the same in process CPU
    time, "blas": what PyTorch's process found loaded} or {"error": why}."""
    with open(os.path.join(d, "meta.json")) as f:
        meta = json.load(f)
    inputs = []
    for k in meta["inputs"]:
        inputs += ["--input", f"{k}={os.path.join(d, k + '.npy')}"]
    ours, theirs, theirs_n, blas, malloc = [row["ours_ms"]], [], [], None, None
    cpu = {"ours": [row.get("ours_cpu_ms")], "torch": [], "torch_no_onednn": []}
    for r in range(rounds):
        if r:
            rc, out, err = run_cli(cli, ["run", "--network", os.path.join(d, "model.onnx"),
                                         "--strategy", "none", "--threads", str(threads),
                                         "--repeat", "3", "--json"] + inputs, timeout)
            if rc != 0:
                return {"error": "rematlab-cli run: " + reason_of(err)}
            ours.append(json.loads(out)["total_ms"])
            cpu["ours"].append(json.loads(out).get("cpu_ms"))
        t = torch_time_once(name, d, threads)
        if isinstance(t, str):
            return {"error": t}
        theirs.append(t["torch_ms"])
        theirs_n.append(t["torch_no_onednn_ms"])
        cpu["torch"].append(t["torch_cpu_ms"])
        cpu["torch_no_onednn"].append(t["torch_no_onednn_cpu_ms"])
        blas, malloc = t["blas"], t.get("malloc")
    return {"ours": ours, "torch": theirs, "torch_no_onednn": theirs_n, "blas": blas,
            "malloc": malloc, "threads": threads, "cpu": cpu}


def median(v):
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else 0.5 * (v[len(v) // 2 - 1] + v[len(v) // 2])


# --- the table ---------------------------------------------------------------------------------

def fmt_e(v):
    return "–" if v is None else f"{v:.1e}"


def round_range(ratios):
    """The range, as " (lo–hi)", of a ratio taken within each round (ours and PyTorch timed back
    to back, so a drift of the machine between rounds does not move it); "" for one round."""
    return f" ({min(ratios):.2f}–{max(ratios):.2f})" if len(ratios) > 1 else ""


def fmt_ms(v):
    return "–" if v is None else (f"{v:.0f}" if v >= 100 else f"{v:.1f}")


def fmt_times(r, key):
    """A step-time cell: the median over the rounds, with the range when there are several."""
    v = r.get("timing", {}).get(key)
    if not v:
        return fmt_ms(r.get(key + "_ms"))
    t = fmt_ms(median(v))
    t += f" ({fmt_ms(min(v))}–{fmt_ms(max(v))})" if len(v) > 1 else ""
    c = [x for x in r["timing"].get("cpu", {}).get(key, []) if x is not None]
    return t + (f", CPU {fmt_ms(median(c))}" if c else "")


def torch_times(r):
    if not r.get("timing", {}).get("torch_no_onednn"):
        return fmt_times(r, "torch")
    return fmt_times(r, "torch") + " / " + fmt_times(r, "torch_no_onednn")


KINK_LABELS = {"clip": "clip/ReLU6", "hard_sigmoid": "hardsigmoid", "hard_swish": "hardswish"}


def flips_text(mt):
    """The flipped decisions of a decision-matched result, per op kind: ReLU elements, max-pool
    windows, clip / hardsigmoid / hardswish elements (those the model has), each with the largest
    distance to the kink over the tensor's rms among the flipped; calls off the first output
    (left to float64's own decisions) are counted apart."""
    def off(n):
        return f", +{n} off the first output" if n else ""

    if mt["relus"] or mt.get("relus_off_path"):
        t = f"{mt['flipped']} of {mt['elements']:,} in {mt['relus']} ReLUs"
        if mt["flipped"]:
            t += f" ({mt['flip_max_rel']:.1e})"
        t += off(mt.get("relus_off_path", 0))
    else:
        t = "no ReLU"
    if mt.get("pools"):
        t += (f"; max-pool {mt['pool_flipped']} of {mt['pool_windows']:,} windows in "
              f"{mt['pools_matched']}/{mt['pools']} pools")
        if mt["pool_flipped"]:
            t += f" ({mt['pool_flip_max_rel']:.1e})"
    for kind, k in mt.get("kinks", {}).items():
        if not k["calls"]:
            continue
        t += (f"; {KINK_LABELS.get(kind, kind)} {k['flipped']} of {k['elements']:,} in "
              f"{k['matched']}")
        if k["flipped"]:
            t += f" ({k['flip_max_rel']:.1e})"
        t += off(k.get("off_path", 0))
    return t


def table(rows):
    head = ("| model | input | status | nodes | params | worst grad error (ours) | PyTorch f32 "
            "(oneDNN / without) | params within allowance | flipped decisions, ours (ReLU: largest "
            "\\|x\\|/rms; max-pool: gap/rms; others: distance to the nearer kink/rms) | worst "
            "grad error vs decision-matched f64 | PyTorch f32 vs its own decision-matched f64 "
            "(oneDNN / without) | params within allowance vs decision-matched (strict) | "
            "peak == (strategies) | bitwise "
            "(strategies) | step ms ours (wall, CPU: medians) | step ms PyTorch (oneDNN / "
            "without) |")
    lines = [head, "|" + "---|" * 16]
    for r in rows:
        st = r["status"]
        if st != "loaded":
            lines.append(f"| {r['model']} | {r.get('input', '')} | {st.replace('|', '/')} "
                         f"| | | | | | | | | | | | | {torch_times(r)} |")
            continue
        within = f"{r['grads_ok']}/{r['grads_n']}"
        if r.get("grads_missing_n"):
            within += f" ({r['grads_missing_n']} missing)"
        if r.get("grads_unused"):
            within += f" (+{r['grads_unused']} off the first output)"
        mt = r.get("matched")
        if mt is None:
            flips = m_err = m_torch = m_within = "not run"
        elif "refused" in mt:
            flips = "refused: " + mt["refused"].replace("|", "/")
            m_err = m_torch = m_within = ""
        else:
            flips = flips_text(mt)
            m_err = fmt_e(mt["grad_err"])
            m_torch = f"{fmt_e(mt['torch_err'])} / {fmt_e(mt['torch_err_no_onednn'])}"
            m_within = (f"{mt['grads_ok']}/{r['grads_n']} "
                        f"({mt['grads_ok_strict']}/{r['grads_n']})")
        if "strategies" in r:
            peak = f"{r['peak_ok']}/{r['strategies']}"
            bit = f"{r['bitwise_ok']}/{r['strategies']}"
        else:
            peak = bit = r.get("compare", "not run")
        lines.append(
            f"| {r['model']} | {r['input']} | loaded | {r['nodes']} | "
            f"{r['param_bytes'] / 2**20:.1f} MiB | "
            f"{fmt_e(r['grad_err'])} | {fmt_e(r['torch_err'])} / "
            f"{fmt_e(r['torch_err_no_onednn'])} | {within} | {flips} | {m_err} | {m_torch} | "
            f"{m_within} | "
            f"{peak} | {bit} | "
            f"{fmt_times(r, 'ours')} | {torch_times(r)} |")
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


# What an AVX2-only machine runs, reproduced on one with AVX-512 (--isa avx2), for both sides:
# BLIS's haswell kernels (arch 3 of BLIS 0.9's table; RematLab would pick skx here), OpenBLAS's
# Haswell kernels, oneDNN capped at AVX2 (PyTorch's convolutions). Debian's PyTorch 1.13 builds
# its own ATen kernels for AVX2 at most ("CPU capability usage: AVX2"), so they need no cap.
AVX2_ENV = {"BLIS_ARCH_TYPE": "3", "OPENBLAS_CORETYPE": "Haswell", "ONEDNN_MAX_CPU_ISA": "AVX2",
            "DNNL_MAX_CPU_ISA": "AVX2"}
OURS_ENV = None  # rematlab-cli's environment: this process's, plus AVX2_ENV under --isa avx2


def cli_isa(cli):
    """The instruction set rematlab-cli's kernels were built for, from its --version ("kernels
    built for AVX2"), or None."""
    import re
    try:
        out = subprocess.run([cli, "--version"], capture_output=True, text=True,
                             env=OURS_ENV, timeout=120).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"kernels built for ([\w-]+)", out)
    return m.group(1) if m else None


def time_rounds_only(name, d, cli, threads, timeout, rounds):
    """--time-only: ours (`run --repeat 3`) and PyTorch's (time_phase) alternated, ours first
    in even rounds and PyTorch first in odd ones; the same dictionary as timing()."""
    with open(os.path.join(d, "meta.json")) as f:
        meta = json.load(f)
    inputs = []
    for k in meta["inputs"]:
        inputs += ["--input", f"{k}={os.path.join(d, k + '.npy')}"]
    out = {"ours": [], "torch": [], "torch_no_onednn": [], "blas": None, "threads": threads,
           "cpu": {"ours": [], "torch": [], "torch_no_onednn": []}}

    def ours():
        rc, so, err = run_cli(cli, ["run", "--network", os.path.join(d, "model.onnx"),
                                    "--strategy", "none", "--threads", str(threads),
                                    "--repeat", "3", "--json"] + inputs, timeout)
        if rc != 0:
            return "rematlab-cli run: " + reason_of(err)
        j = json.loads(so.strip().splitlines()[-1])
        out["ours"].append(j["total_ms"])
        out["cpu"]["ours"].append(j.get("cpu_ms"))
        out["gemm"] = j.get("gemm")
        return None

    def theirs():
        t = torch_time_once(name, d, threads)
        if isinstance(t, str):
            return t
        out["torch"].append(t["torch_ms"])
        out["torch_no_onednn"].append(t["torch_no_onednn_ms"])
        out["cpu"]["torch"].append(t["torch_cpu_ms"])
        out["cpu"]["torch_no_onednn"].append(t["torch_no_onednn_cpu_ms"])
        out["blas"], out["malloc"] = t["blas"], t.get("malloc")
        return None

    for r in range(rounds):
        for step in ((ours, theirs) if r % 2 == 0 else (theirs, ours)):
            err = step()
            if err:
                return {"error": err}
    return out


def time_only(a, models):
    """--time-only: per model, the export (without references) when not cached, then the
    alternated step times; prints one table of process CPU medians with their ranges and the
    ratio to PyTorch's faster path."""
    rows = []
    for name in models:
        d = os.path.join(a.cache, name)
        os.makedirs(d, exist_ok=True)
        if APPROX_M.get(name, 0) > a.max_params_m:
            log(f"{name}: skipped (~{APPROX_M[name]:.0f} M parameters, above --max-params-m "
                f"{a.max_params_m:.0f})")
            continue
        if not os.path.exists(os.path.join(d, "meta.json")):
            log(f"{name}: exporting…")
            tail = export_phase(name, d, a.threads, True)
            if tail:
                rows.append({"model": name, "error": "PyTorch side failed: " + tail})
                log(f"{name}: PyTorch side failed: {tail}")
                continue
        with open(os.path.join(d, "meta.json")) as f:
            meta = json.load(f)
        if meta.get("export_error"):
            rows.append({"model": name, "error": "not exported: " + meta["export_error"]})
            log(f"{name}: not exported: {meta['export_error']}")
            continue
        log(f"{name}: timing ({a.time_rounds} round(s), --isa {a.isa})…")
        t = time_rounds_only(name, d, a.cli, a.threads, a.timeout, a.time_rounds)
        row = {"model": name, "input": meta.get("input", "?"), "isa": a.isa, "timing": t}
        with open(os.path.join(d, f"time-only-{a.isa}.json"), "w") as f:
            json.dump(row, f)
        if "error" in t:
            row["error"] = t["error"]
            log(f"    timing failed: {t['error']}")
        else:
            c = t["cpu"]
            row["ratio"] = median(c["ours"]) / min(median(c["torch"]),
                                                   median(c["torch_no_onednn"]))
            row["round_ratios"] = [o / min(x, y) for o, x, y in
                                   zip(c["ours"], c["torch"], c["torch_no_onednn"])
                                   if None not in (o, x, y)]
            log(f"{name}: ours / PyTorch's faster path {row['ratio']:.2f} (process CPU)")
        rows.append(row)

    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    blases = sorted({blas_text(r["timing"]["blas"]) for r in rows
                     if r.get("timing", {}).get("blas")})
    gemms = sorted({r["timing"]["gemm"] for r in rows if r.get("timing", {}).get("gemm")})
    mallocs = sorted({r["timing"]["malloc"] for r in rows if r.get("timing", {}).get("malloc")})
    print(f"zoo-check --time-only, {when}, {machine()}; rematlab-cli kernels built for "
          f"{cli_isa(a.cli)}, GEMM {', '.join(gemms) or '?'}; PyTorch "
          f"{__import__('torch').__version__} on {' / '.join(blases) or 'no BLAS measured'}, "
          f"allocator {' / '.join(mallocs) or '?'}; "
          + (f"both sides held to AVX2 ({', '.join(f'{k}={v}' for k, v in AVX2_ENV.items())}); "
             if a.isa == "avx2" else "")
          + f"{a.threads} thread(s) each, {a.time_rounds} alternating round(s); "
          f"`scripts/zoo-check {' '.join(sys.argv[1:])}`\n")

    def cell(t, key):
        v = [x for x in t["cpu"][key] if x is not None]
        return fmt_ms(median(v)) + (f" ({fmt_ms(min(v))}–{fmt_ms(max(v))})" if len(v) > 1 else "")

    print("| model | input | ours, ms CPU | PyTorch oneDNN, ms CPU | PyTorch without, ms CPU "
          "| ours / faster (per round) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['model']} | {r.get('input', '')} | {r['error']} | | | |")
            continue
        t = r["timing"]
        print(f"| {r['model']} | {r['input']} | {cell(t, 'ours')} | {cell(t, 'torch')} "
              f"| {cell(t, 'torch_no_onednn')} | {r['ratio']:.2f}{round_range(r['round_ratios'])} |")
    return 1 if any("error" in r for r in rows) else 0


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
    ap.add_argument("--torch-blas", choices=("openblas", "reference"), default="openblas",
                    help="the BLAS PyTorch's processes load (default openblas: Debian's "
                    "libopenblas0-openmp, fetched with apt-get download and unpacked under "
                    "--cache, nothing installed; the reference BLAS, with a warning, when that "
                    "fails)")
    ap.add_argument("--torch-malloc", choices=TORCH_MALLOCS,
                    help="PyTorch's allocator, named in the timing table (default tcmalloc, as "
                    "PyTorch's CPU launcher preloads it: Debian's libtcmalloc-minimal4, fetched "
                    "with apt-get download and unpacked under --cache, nothing installed; glibc "
                    "with a warning where it cannot be fetched; glibc: PyTorch as installed)")
    ap.add_argument("--time-rounds", type=int, default=1,
                    help="step-time rounds, ours and PyTorch's alternated (default 1); the "
                    "table gives the median and, for several, the range")
    ap.add_argument("--write-doc", nargs="?", const=os.path.join(ROOT, "docs", "onnx.md"),
                    help="put the table into docs/onnx.md (or the given file)")
    ap.add_argument("--keep-dumps", action="store_true",
                    help="keep our gradient and activation dumps (CACHE/MODEL/ours_grads, "
                         "ours_acts) after each model; by default they are deleted once compared "
                         "(gigabytes for the large models: vit_l_32's filled a disk)")
    ap.add_argument("--time-only", action="store_true",
                    help="only the step times: export (no references) when not cached, then "
                    "ours and PyTorch's alternated over --time-rounds rounds; no gradients, no "
                    "strategies (for timing another build, e.g. with --isa avx2)")
    ap.add_argument("--isa", choices=("native", "avx2"), default="native",
                    help="avx2: hold both sides to AVX2 kernels, as on an AVX2-only CPU (BLIS's "
                    "haswell kernels, OpenBLAS's Haswell ones, oneDNN capped at AVX2); needs a "
                    "rematlab-cli built with -DREMATLAB_NATIVE=OFF (x86-64-v3)")
    ap.add_argument("--torch-phase", help=argparse.SUPPRESS)
    ap.add_argument("--matched-phase", help=argparse.SUPPRESS)
    ap.add_argument("--time-phase", help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.time_phase:
        name, d = a.time_phase.split("=", 1)
        time_phase(name, d, a.threads)
        return 0

    if a.matched_phase:
        name, d = a.matched_phase.split("=", 1)
        matched_phase(name, d, a.threads)
        return 0

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
    if a.time_rounds < 1:
        log("zoo-check: --time-rounds must be at least 1")
        return 2
    if a.threads < 1:
        log("zoo-check: --threads must be at least 1")
        return 2
    if a.time_only and (a.load_only or a.write_doc):
        log("zoo-check: --time-only takes neither --load-only nor --write-doc (its table is "
            "printed)")
        return 2
    global TORCH_ENV, OURS_ENV
    TORCH_ENV, blas_wanted = torch_env(a.cache, a.torch_blas, a.threads)
    try:
        TORCH_ENV = with_torch_malloc(TORCH_ENV, a.cache, a.torch_malloc, "zoo-check")
    except OSError as e:
        log(f"zoo-check: --torch-malloc {a.torch_malloc}: cannot get it ({e}); if apt-get "
            "cannot locate the package, `apt-get update` first, or leave --torch-malloc out")
        return 2
    if a.isa == "avx2":
        isa = cli_isa(a.cli)
        if isa != "AVX2":
            log(f"zoo-check: --isa avx2 needs a rematlab-cli built for AVX2 (cmake -S . -B "
                f"build-avx2 -DREMATLAB_NATIVE=OFF); {a.cli} says its kernels are built for "
                f"{isa or 'an unknown instruction set (its --version does not say)'}")
            return 2
        TORCH_ENV.update(AVX2_ENV)
        OURS_ENV = dict(os.environ, **AVX2_ENV)
    if a.time_only:
        return time_only(a, models)
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
            tail = export_phase(name, d, a.threads, a.load_only)
            if tail:
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
                and (a.no_compare or "no_compare" not in json.load(open(res)))
                and {"refused", "kinks"} & set(json.load(open(res)).get("matched", {}))):
            with open(res) as f:
                row = json.load(f)
        else:
            log(f"{name}: running rematlab-cli…")
            row = our_phase(name, d, a.cli, a.threads, a.timeout, a.no_compare)
            if a.no_compare:
                row["no_compare"] = True
            with open(res, "w") as f:
                json.dump(row, f)
            if not a.keep_dumps:  # compared: the row holds what they showed
                for sub in ("ours_grads", "ours_acts"):
                    shutil.rmtree(os.path.join(d, sub), ignore_errors=True)
        tm = row.get("timing", {})
        if row["status"] == "loaded" and (a.redo or tm.get("blas_wanted") != blas_wanted
                                          or len(tm.get("torch_no_onednn", [])) < a.time_rounds
                                          or "cpu" not in tm
                                          or tm.get("threads") != a.threads):
            log(f"{name}: timing ({a.time_rounds} round(s), PyTorch on {blas_wanted})…")
            row["timing"] = timing(name, d, a.cli, a.threads, a.timeout, a.time_rounds, row)
            row["timing"]["blas_wanted"] = blas_wanted
            if "error" in row["timing"]:
                log(f"    timing failed: {row['timing']['error']}")
            else:
                got = row["timing"]["blas"]["kind"]
                if got != blas_wanted:
                    log(f"zoo-check: WARNING: {name}: PyTorch was to run on {blas_wanted} but "
                        f"loaded {blas_text(row['timing']['blas'])}")
            with open(res, "w") as f:
                json.dump(row, f)
        rows.append(row)
        log(f"{name}: {row['status'][:120]}"
            + (f"; grads {row['grads_ok']}/{row['grads_n']} within, worst "
               f"{fmt_e(row['grad_err'])}" if row["status"] == "loaded" else ""))
        for b in row.get("grads_bad", []):
            log(f"    outside the allowance: {b}")
        mt = row.get("matched", {})
        if "refused" in mt:
            log(f"    decision-matched reference refused: {mt['refused']}")
        elif mt:
            log(f"    decision-matched, flipped: {flips_text(mt)}; grads "
                f"{mt['grads_ok']}/{row['grads_n']} within, worst {fmt_e(mt['grad_err'])}")
            for t in mt.get("flipped_tensors", []):
                log(f"      {t['op']} {t['node']}: {t['flipped']} flipped (closest "
                    f"{t['closest']:.1e} of rms)")
            log(f"    strict (10 x PyTorch f32 vs its own decision-matched f64, worst "
                f"{fmt_e(mt['torch_err'])}/{fmt_e(mt['torch_err_no_onednn'])}): "
                f"{mt['grads_ok_strict']}/{row['grads_n']} within")
            for b in mt.get("grads_bad", []):
                log(f"    outside the allowance (decision-matched): {b}")
            for b in mt.get("grads_bad_strict", []):
                log(f"    outside the strict allowance (decision-matched): {b}")

    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    cmd = "scripts/zoo-check " + " ".join(sys.argv[1:])
    blases = sorted({blas_text(r["timing"]["blas"]) for r in rows
                     if r.get("timing", {}).get("blas")})
    mallocs = sorted({r["timing"]["malloc"] for r in rows if r.get("timing", {}).get("malloc")})
    head = (f"zoo-check, {when}, {machine()}; PyTorch "
            f"{__import__('torch').__version__}, torchvision {torchvision.__version__}, "
            f"{a.threads} thread(s) each; PyTorch's step times on "
            f"{' / '.join(blases) if blases else 'no BLAS measured'}"
            + (f", allocator {' / '.join(mallocs)}" if mallocs else "") + f"; `{cmd.strip()}`")
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
