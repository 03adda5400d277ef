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
  3. runs `rematlab-cli run --strategy none --dump-grads --dump-activations` and compares every
     parameter's gradient with the float64 one, beside PyTorch's own float32 errors, and with a
     decision-matched float64 reference: PyTorch in float64 again, but every ReLU takes its on/off
     decision from our float32 run (our dumped ReLU outputs > 0), each max-pool window our
     float32 choice of element; it counts the decisions that
     differ from float64's own and how close to 0 (|x| / rms of that tensor, in float64) each was;
  4. runs every strategy under `rematlab-cli compare` and checks both invariants (predicted peak ==
     measured peak; gradients bitwise equal to none's);
and prints one row per model.

The error of a gradient is max|g - g64| / max|g64| over the tensor. A parameter is within the
allowance when its error is at most max(10 x PyTorch's float32 error, 1e-4), PyTorch's float32
error being the larger of its two CPU paths: a ReLU or max-pool decision that lies closer to its
kink than float32's rounding noise flips with the order of a sum, in PyTorch as in RematLab, and
the gradients downstream of it then differ from float64 by far more than rounding (DenseNet-121,
docs/onnx.md). The two PyTorch paths show how far float32 itself can land from float64. The same
allowance is applied against the decision-matched reference, where such a flipped ReLU decision
no longer separates the two (max-pool windows are matched too when their input is a ReLU's
output; clip/ReLU6, hardswish and other kinks are not).

Swin V2 is patched, for the export and the PyTorch references alike: its attention zeroes part
of the qkv bias in place (`qkv_bias[length : 2 * length].zero_()`), which PyTorch 1.13 cannot
export (aten::zero); zoo-check replaces that one statement by an out-of-place torch.cat that gives
the same values and gradients bit for bit (patch_swin_v2_bias_zeroing).

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


# --- the decision-matched float64 reference (runs in a child process per model) ----------------

class Refused(Exception):
    pass


def with_decisions(m, inputs, dtype, torch, relu_mask, pool_index, mkldnn=True):
    """grads_of(m, inputs, dtype) with every ReLU and max-pool decision taken from outside: the
    k-th call of torch.nn.functional.relu (nn.ReLU modules call it too, torchvision 0.14) returns
    x * relu_mask(k, x), and the k-th torch.nn.functional.max_pool2d call gathers each window's
    element at pool_index(k, x, args) (None: the pool's own choice). Calls come in the order the
    export traced them, the ONNX node order. Returns the gradients, the loss, and per call the
    flipped decisions: (count, largest |x|/rms of the flipped pre-activations) for ReLUs,
    (count, largest gap/rms between float64's own maximum and the chosen element) for pools,
    with the element or window count; None for a pool left alone."""
    import torch.nn.functional as F
    real_relu, real_pool = F.relu, F.max_pool2d
    relu_calls, pool_calls = [], []

    def relu(x, inplace=False):
        mask = relu_mask(len(relu_calls), x)
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

    F.relu, F.max_pool2d = relu, pool
    try:
        g, loss = grads_of(m, inputs, dtype, torch, mkldnn=mkldnn)
    finally:
        F.relu, F.max_pool2d = real_relu, real_pool
    return g, loss, relu_calls, pool_calls


def recording_decisions(m, inputs, torch, mkldnn):
    """PyTorch's float32 gradients with each ReLU's mask (output > 0) and each max-pool's indices,
    in call order, as that run took them."""
    import torch.nn.functional as F
    real_relu, real_pool = F.relu, F.max_pool2d
    masks, indices = [], []

    def relu(x, inplace=False):
        y = real_relu(x, inplace=inplace)
        masks.append((y > 0).detach().clone())
        return y

    def pool(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
             return_indices=False):
        y, idx = real_pool(x, kernel_size, stride, padding, dilation, ceil_mode=ceil_mode,
                           return_indices=True)
        indices.append(idx.detach().clone())
        return (y, idx) if return_indices else y

    F.relu, F.max_pool2d = relu, pool
    try:
        g, _ = grads_of(m, inputs, torch.float32, torch, mkldnn=mkldnn)
    finally:
        F.relu, F.max_pool2d = real_relu, real_pool
    return g, masks, indices


def matched_phase(name, d, threads):
    """The decision-matched float64 reference: PyTorch's float64 gradients with every ReLU's
    on/off decision (and max-pool window's choice of element) taken from our float32 run
    (DIR/ours_acts, `rematlab-cli run --dump-activations --dump-activations-ops relu,maxpool2d`):
    mask_k = (our k-th ReLU output > 0), k in ONNX node order; a pool's element is the first
    maximum of our float32 input (our kernel's rule and PyTorch's), found from the dump of that
    input, which must be a ReLU output (else the pool is left unmatched). Everything else is
    computed in float64 by PyTorch. The same is done for PyTorch's own two float32 paths (the
    float64 step with their decisions): their errors against that are what float32 rounding
    alone does. Writes grads_matched.npz and matched.json (flipped decisions: where ours differ
    from float64's own, and how close to the kink each was), or matched.json with "refused" and
    why (no reference then)."""
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
        relus = [n for n in dumped if n["op"] == "relu"]
        pools = [n for n in dumped if n["op"] == "maxpool2d"]
        model = onnx.load(os.path.join(d, "model.onnx"))
        for ours, op in ((relus, "Relu"), (pools, "MaxPool")):
            theirs = [n.name for n in model.graph.node if n.op_type == op]
            if [n["node"] for n in ours] != theirs:
                raise Refused(f"our {len(ours)} dumped {op} outputs are not the ONNX file's "
                              f"{len(theirs)} {op} nodes in the same order")
        by_output = {n["output"]: n for n in dumped}
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

        def check_count(calls, what, n):
            if len(calls) != n:
                raise Refused(f"the float64 forward called {what} {len(calls)} times, but "
                              f"{n} were recorded")

        def mask_from(masks, who):
            def f(k, x):
                if k >= len(masks):
                    raise Refused(f"the float64 forward calls relu more than the {len(masks)} "
                                  f"times {who} did")
                if tuple(x.shape) != tuple(masks[k].shape):
                    raise Refused(f"ReLU call {k} has shape {list(x.shape)}, {who} "
                                  f"{list(masks[k].shape)}")
                return masks[k]
            return f

        # Ours, from the dump.
        real_pool = F.max_pool2d
        masks = [torch.from_numpy(np.load(os.path.join(adir, n["file"])) > 0) for n in relus]

        def our_pool(k, x, args):
            if k >= len(pools):
                raise Refused(f"the float64 forward calls max_pool2d more than our "
                              f"{len(pools)} max-pools")
            src = by_output.get(pools[k]["inputs"][0])
            if src is None or src["op"] != "relu":
                return None
            x32 = torch.from_numpy(np.load(os.path.join(adir, src["file"])))
            if tuple(x.shape) != tuple(x32.shape):
                raise Refused(f"max-pool call {k} ({pools[k]['node']}) has input shape "
                              f"{list(x.shape)}, our dump {list(x32.shape)}")
            y32, idx = real_pool(x32, return_indices=True, **args)  # F's is patched now
            if not np.array_equal(y32.numpy(), np.load(os.path.join(adir, pools[k]["file"]))):
                raise Refused(f"max-pool call {k} ({pools[k]['node']}): PyTorch's max-pool of "
                              "our dumped input is not our dumped output")
            return idx

        g, loss, rc, pc = with_decisions(m, inputs, torch.float64, torch,
                                         mask_from(masks, "we"), our_pool)
        check_count(rc, "relu", len(masks))
        check_count(pc, "max_pool2d", len(pools))
        np.savez(os.path.join(d, "grads_matched.npz"), **g)
        res = {"relus": len(masks), "elements": sum(c[2] for c in rc),
               "flipped": sum(c[0] for c in rc),
               "flip_max_rel": max([c[1] for c in rc if c[0]], default=None),
               "flipped_tensors": [{"node": relus[k]["node"], "flipped": c[0], "closest": c[1]}
                                   for k, c in enumerate(rc) if c[0]],
               "loss_matched": loss,
               "pools": len(pools), "pools_matched": sum(c is not None for c in pc),
               "pool_windows": sum(c[2] for c in pc if c),
               "pool_flipped": sum(c[0] for c in pc if c),
               "pool_flip_max_rel": max([c[1] for c in pc if c and c[0]], default=None)}

        # PyTorch's float32 paths against float64 with their own decisions.
        for key, mkldnn in (("torch", True), ("torch_no_onednn", False)):
            g32, tmasks, tidx = recording_decisions(m, inputs, torch, mkldnn)

            def their_pool(k, x, args, tidx=tidx):
                return tidx[k] if k < len(tidx) else None

            gt, _, trc, tpc = with_decisions(m, inputs, torch.float64, torch,
                                             mask_from(tmasks, "PyTorch float32"), their_pool)
            check_count(trc, "relu", len(tmasks))
            check_count(tpc, "max_pool2d", len(tidx))
            res[key + "_flipped"] = sum(c[0] for c in trc) + sum(c[0] for c in tpc if c)
            res[key + "_err"] = {p: rel_err(g32[p], gt[p]) for p in gt}
    except Refused as e:
        res = {"refused": str(e)}
    with open(out_path, "w") as f:
        json.dump(res, f)


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
    adir = os.path.join(d, "ours_acts")
    shutil.rmtree(gdir, ignore_errors=True)
    shutil.rmtree(adir, ignore_errors=True)
    for f in ("matched.json", "grads_matched.npz"):
        if os.path.exists(os.path.join(d, f)):
            os.remove(os.path.join(d, f))
    # --dump-activations: our ReLU outputs, whose decisions the matched reference takes (copied
    # in a separate step after the timed ones, so the times and peaks are not affected).
    rc, out, err = run_cli(cli, ["run", "--network", net, "--strategy", "none", "--threads",
                                 str(threads), "--repeat", "3", "--json", "--dump-grads", gdir,
                                 "--dump-activations", adir, "--dump-activations-ops",
                                 "relu,maxpool2d"] + inputs, timeout)
    if rc != 0:
        row["status"] = "refused: " + reason_of(err) if rc is not None else err
        return row
    j = json.loads(out)
    row.update(status="loaded", nodes=j.get("computes"), param_bytes=j.get("params"),
               ours_ms=j.get("total_ms"), loss=j.get("loss"), loss64=meta.get("loss64"))
    g64 = np.load(os.path.join(d, "grads64.npz"))
    g32 = np.load(os.path.join(d, "grads32.npz"))
    g32n = np.load(os.path.join(d, "grads32_no_onednn.npz"))
    # The decision-matched float64 reference, by PyTorch in a child process.
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--threads", str(threads),
                        "--matched-phase", f"{name}={d}"], capture_output=True, text=True)
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


# --- the table ---------------------------------------------------------------------------------

def fmt_e(v):
    return "–" if v is None else f"{v:.1e}"


def fmt_ms(v):
    return "–" if v is None else (f"{v:.0f}" if v >= 100 else f"{v:.1f}")


def table(rows):
    head = ("| model | input | status | nodes | params | worst grad error (ours) | PyTorch f32 "
            "(oneDNN / without) | params within allowance | flipped decisions, ours (ReLU: largest "
            "\\|x\\|/rms; max-pool: gap/rms) | worst grad error vs decision-matched f64 | "
            "PyTorch f32 vs its own decision-matched f64 (oneDNN / without) | params within "
            "allowance vs decision-matched (strict) | peak == (strategies) | bitwise "
            "(strategies) | step ms ours | step ms PyTorch |")
    lines = [head, "|" + "---|" * 16]
    for r in rows:
        st = r["status"]
        if st != "loaded":
            lines.append(f"| {r['model']} | {r.get('input', '')} | {st.replace('|', '/')} "
                         f"| | | | | | | | | | | | | {fmt_ms(r.get('torch_ms'))} |")
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
            flips = f"{mt['flipped']} of {mt['elements']} in {mt['relus']} ReLUs"
            if mt["flipped"]:
                flips += f" ({mt['flip_max_rel']:.1e})"
            if mt.get("pools"):
                flips += (f"; max-pool {mt['pool_flipped']} of {mt['pool_windows']} windows in "
                          f"{mt['pools_matched']}/{mt['pools']} pools")
                if mt["pool_flipped"]:
                    flips += f" ({mt['pool_flip_max_rel']:.1e})"
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
    ap.add_argument("--matched-phase", help=argparse.SUPPRESS)
    a = ap.parse_args()

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
                and (a.no_compare or "no_compare" not in json.load(open(res)))
                and {"refused", "grads_ok_strict"} & set(json.load(open(res)).get("matched", {}))):
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
        mt = row.get("matched", {})
        if "refused" in mt:
            log(f"    decision-matched reference refused: {mt['refused']}")
        elif mt:
            log(f"    decision-matched: {mt['flipped']} flipped ReLU decisions (largest |x|/rms "
                f"{fmt_e(mt['flip_max_rel'])}), {mt.get('pool_flipped', 0)} flipped max-pool "
                f"windows (largest gap/rms {fmt_e(mt.get('pool_flip_max_rel'))}); grads {mt['grads_ok']}/{row['grads_n']} within, "
                f"worst {fmt_e(mt['grad_err'])}")
            log(f"    strict (10 x PyTorch f32 vs its own decision-matched f64, worst "
                f"{fmt_e(mt['torch_err'])}/{fmt_e(mt['torch_err_no_onednn'])}): "
                f"{mt['grads_ok_strict']}/{row['grads_n']} within")
            for b in mt.get("grads_bad", []):
                log(f"    outside the allowance (decision-matched): {b}")
            for b in mt.get("grads_bad_strict", []):
                log(f"    outside the strict allowance (decision-matched): {b}")

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
