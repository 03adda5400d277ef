#!/usr/bin/python3
"""Runs rematlab-cli and torch_peer.py side by side and prints one table (see ./compare).

Per network: `rematlab-cli network` writes the graph; per strategy, `rematlab-cli run --json
--dump-weights --dump-grads` runs ours (its JSON names the checkpoints the plan chose), and
torch_peer.py runs the same network from the same weights at those segments. Runs alternate
(ours, torch; then torch, ours; ...) for --rounds rounds, each process timing --repeat steps;
the table shows the median over rounds of each process's median step time. Dropout: PyTorch
draws its own mask every step, as F.dropout does on the CPU, and computes with ours, so that the
gradients can be compared (torch_ops.py).

Columns:
  grads rel err   max over parameters of max|ours - torch| / max|torch|, over the parameters
                  whose float32 gradient is well-conditioned (float32 torch within 1e-4 of
                  float64 torch); "(n ill-cond.)": n parameters are not, and there ours must be
                  within 10x of torch's own float32 error against float64 (see grad_check).
                  A row that fails either test is marked ✗
  ours ms, torch ms, ours/torch
                  wall time of one step (forward + recompute + backward), the median over the
                  rounds with their range, and the medians' ratio; < 1 means ours is faster
  ours/torch CPU  the same ratio in process CPU time (all threads), which other jobs on a shared
                  machine do not inflate; in brackets, the range of the ratio within each round
                  (ours against the torch process timed next to it), so a drift of the machine
                  between rounds does not pass for a difference between the two
  overhead        CPU time of the step over the same side's `none` step, minus 1 (the recompute
                  cost)
  act/saved       our activation peak (measured by the tracking allocator: every live
                  activation, transients included; not parameters, inputs or gradients) over
                  torch's peak of bytes held for the backward (saved tensors, checkpoint inputs
                  and recomputed tensors, unique storages; not parameters or inputs)
"""

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

import numpy as np

NETWORKS_FULL = [
    "mlp:depth=16,width=256,batch=256",
    "mlp:depth=16,width=1024,batch=512",
    "resmlp:depth=8,width=256,batch=256",
    "resmlp:depth=8,width=512,batch=512",
    "transformer:layers=4,d_model=128,heads=4,seq=64,batch=4,vocab=256",
    "transformer:layers=4,d_model=256,heads=8,seq=128,batch=8,vocab=1024",
    # GPT layers with dropout (1-byte masks on our side; PyTorch's F.dropout cost, torch_ops.py)
    "gpt:layers=4,d_model=256,heads=8,seq=256,batch=4,vocab=1024,dtype=f32",
]
NETWORKS_QUICK = [
    "mlp:depth=6,width=32,batch=16",
    "resmlp:depth=3,width=32,batch=16",
    "transformer:layers=2,d_model=32,heads=4,seq=8,batch=2,vocab=16",
    "gpt:layers=2,d_model=32,heads=4,seq=8,batch=2,vocab=16,dtype=f32",
]
# (row name, our strategy spec, the peer's mode; segments come from our plan's checkpoints)
STRATEGIES = [
    ("none", "none", "none"),
    ("sqrt-n", "sqrt-n", "segments"),
    ("periodic", "periodic", "segments"),
    ("per-block", "policy:regions=blocks,policy=nothing_saveable", "per-block"),
]


def parse_args():
    p = argparse.ArgumentParser(description="RematLab vs PyTorch, side by side")
    p.add_argument("--root", required=True)
    p.add_argument("--cli", default=os.environ.get("REMATLAB_CLI", ""))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds per row")
    p.add_argument("--repeat", type=int, default=5, help="steps timed inside each process")
    p.add_argument("--quick", action="store_true", help="tiny networks, one round; no files")
    p.add_argument("--no-doc", action="store_true", help="print only; write no files")
    p.add_argument("--networks", default="", help="';'-separated network specs (default: six)")
    p.add_argument("--torch-malloc", choices=TORCH_MALLOCS,
                   help="PyTorch's allocator (default tcmalloc, as PyTorch's CPU launcher "
                   "preloads it: Debian's libtcmalloc-minimal4, fetched into .cache/zoo-check, "
                   "nothing installed; glibc with a warning where it cannot be fetched; glibc: "
                   "PyTorch as installed; scripts/zoo_check.py says why)")
    p.add_argument("--isa", choices=("native", "avx2"), default="native",
                   help="avx2: hold both sides to AVX2 kernels, as on an AVX2-only CPU "
                   "(needs an x86-64-v3 build of rematlab-cli: -DREMATLAB_NATIVE=OFF)")
    return p.parse_args()


# --isa avx2's environment (what an AVX2-only CPU runs: BLIS haswell, OpenBLAS Haswell, oneDNN
# capped at AVX2) and the check of the CLI's build come from scripts/zoo_check.py, which times
# the model zoo the same way: one definition for both.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from zoo_check import (AVX2_ENV, TORCH_MALLOCS, cli_isa, round_range,  # noqa: E402
                       torch_env, with_torch_malloc)  # (stdlib imports only)

ENV = None  # the children's environment: os.environ, plus AVX2_ENV under --isa avx2
TORCH_ENV = None  # PyTorch's: ENV, with --torch-malloc's allocator preloaded


def run(cmd, env=None, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env or ENV, **kw)
    if r.returncode != 0:
        sys.exit(f"compare: {' '.join(cmd)} failed ({r.returncode}):\n{r.stderr.strip()}")
    return r.stdout


def rel_errs(dir_a, dir_b):
    """Per parameter: max|a - b| / max|b| (b: the reference)."""
    out = {}
    for f in sorted(os.listdir(dir_a)):
        a = np.load(os.path.join(dir_a, f)).astype(np.float64)
        b = np.load(os.path.join(dir_b, f)).astype(np.float64)
        if a.shape != b.shape:
            sys.exit(f"compare: gradient {f}: shape {a.shape} vs {b.shape}")
        out[f[:-4]] = float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))
    return out


def grad_check(ours_dir, torch_dir, f64_dir):
    """Ours against float32 torch, parameter by parameter. A parameter is well-conditioned when
    float32 torch is within 1e-4 of float64 torch; there ours must be within 1e-4 of torch.
    Elsewhere (a gradient that is zero in exact arithmetic, like attention's key biases, or one
    left by cancellation, like resmlp's under its final layernorm with a sum-of-squares loss)
    float32 has only noise, and ours must be within 10x torch's own float32 error."""
    err = rel_errs(ours_dir, torch_dir)
    noise = rel_errs(torch_dir, f64_dir)
    ours_noise = rel_errs(ours_dir, f64_dir)
    well = [p for p in err if noise[p] <= 1e-4]
    ill = [p for p in err if noise[p] > 1e-4]
    bad = [p for p in well if err[p] > 1e-4] + [p for p in ill if
                                                 ours_noise[p] > 10 * noise[p]]
    return {
        "max_rel_err": max((err[p] for p in well), default=0.0),
        "ill_conditioned": len(ill),
        "bad": bad,
        "per_param": {p: {"ours_vs_torch": err[p], "torch32_vs_64": noise[p],
                          "ours_vs_64": ours_noise[p]} for p in err},
    }


def our_blas(cli, threads=1):
    """Ours: the GEMM library the CLI chose for this machine (`rematlab-cli gemm --json`,
    engine/gemm.h: Eigen, OpenBLAS or BLIS, by calibration unless REMATLAB_GEMM says), and the
    flags the CLI was built with."""
    info = "?"
    try:
        out = subprocess.run([cli, "gemm", "--json", "--threads", str(threads)],
                             capture_output=True, text=True, check=True, env=ENV).stdout
        j = json.loads(out)
        lib = next(l for l in j["libraries"] if l["name"] == j["chosen"])
        info = "GEMM %s (%s; %s)" % (j["chosen"], lib.get("version", "?"), j["how"])
    except (OSError, subprocess.CalledProcessError, ValueError, StopIteration, KeyError):
        pass
    cache = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(cli))), "CMakeCache.txt")
    try:
        with open(cache) as f:
            text = f.read()
        native = re.search(r"REMATLAB_NATIVE:BOOL=(\w+)", text)
        btype = re.search(r"CMAKE_BUILD_TYPE:STRING=(\w+)", text)
        info += " (%s, %s)" % (
            btype.group(1) if btype else "?",
            "-O3 -march=native -mtune=generic" if native and native.group(1) == "ON"
            else "-O3 -march=x86-64-v3")
    except OSError:
        pass
    return info


def fma_peak(cli):
    """The multiply-add units' rate on one thread, on the build's vectors (`rematlab-cli gemm
    --peak`, engine/cpu/fma_peak.cpp): no product passes it. None where the CLI cannot say."""
    try:
        out = subprocess.run([cli, "gemm", "--peak", "--json", "--threads", "1"],
                             capture_output=True, text=True, check=True, env=ENV).stdout
        return float(json.loads(out)["fma_peak"]["gflops"])
    except (OSError, subprocess.CalledProcessError, ValueError, KeyError, TypeError):
        return None


def machine():
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem = 0
    try:
        with open("/proc/meminfo") as f:
            mem = int(next(l.split()[1] for l in f if l.startswith("MemTotal"))) // (1024 * 1024)
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} cores, {mem} GiB, {platform.platform()}"


def mib(b):
    return f"{b / 2**20:.2f}"


def main():
    a = parse_args()
    cli = a.cli or os.path.join(a.root, "build", "app", "rematlab-cli")
    if not os.path.exists(cli):
        sys.exit(f"compare: {cli} is missing; build it (scripts/build) or set REMATLAB_CLI")
    global ENV
    ENV = dict(os.environ)
    if a.isa == "avx2":
        isa = cli_isa(cli)
        if isa != "AVX2":
            sys.exit(f"compare: --isa avx2 needs an x86-64-v3 build of rematlab-cli, and {cli} "
                     f"says its kernels are built for {isa or 'an unknown instruction set'}; "
                     "build one with cmake -S . -B build-avx2 -DREMATLAB_NATIVE=OFF and pass "
                     "--cli build-avx2/app/rematlab-cli")
        ENV.update(AVX2_ENV)
    global TORCH_ENV
    cache = os.path.join(a.root, ".cache", "zoo-check")
    # PyTorch's BLAS as zoo-check gives it: OpenBLAS's OpenMP build first on its library path,
    # whichever build the system's libblas.so.3 points at (the pthread one spins beside
    # PyTorch's libgomp threads).
    benv, _ = torch_env(cache, "openblas", a.threads)
    benv.update({k: v for k, v in ENV.items() if k in AVX2_ENV})
    try:
        TORCH_ENV = with_torch_malloc(benv, cache, a.torch_malloc, "compare")
    except OSError as e:
        sys.exit(f"compare: --torch-malloc {a.torch_malloc}: cannot get it ({e}); if apt-get "
                 "cannot locate the package, `apt-get update` first, or leave --torch-malloc out")
    peer = os.path.join(a.root, "bench", "peers", "torch_peer.py")
    networks = ([n for n in a.networks.split(";") if n] if a.networks
                else NETWORKS_QUICK if a.quick else NETWORKS_FULL)
    rounds = 1 if a.quick else a.rounds
    repeat = 2 if a.quick else a.repeat
    work = tempfile.mkdtemp(prefix="rematlab-peer-")
    load_start = os.getloadavg()[0]
    peaks = [fma_peak(cli)]  # at the start and at the end: the clock may move within a run
    rows = []
    blas_torch, blas_torch_version = None, "?"
    try:
        for ni, net in enumerate(networks):
            d = os.path.join(work, f"net{ni}")
            os.makedirs(d)
            net_json = os.path.join(d, "net.json")
            run([cli, "network", "--network", net, "--out", net_json])
            for name, spec, mode in STRATEGIES:
                ours_ms, torch_ms, ours_json, peer_json = [], [], None, None
                ours_cpu, torch_cpu = [], []
                for r in range(rounds):
                    first = r == 0
                    od = os.path.join(d, name + "-ours")
                    cmd_ours = [cli, "run", "--network", net, "--strategy", spec, "--json",
                                "--threads", str(a.threads), "--repeat", str(repeat)]
                    if first:
                        cmd_ours += ["--dump-weights", os.path.join(d, "weights"),
                                     "--dump-grads", od]

                    def do_ours():
                        return json.loads(run(cmd_ours).strip().splitlines()[-1])

                    def do_torch(checkpoints):
                        cmd = [sys.executable, peer, "--network", net_json, "--weights",
                               os.path.join(d, "weights"), "--modes", mode, "--checkpoints",
                               ",".join(checkpoints), "--threads", str(a.threads),
                               "--repeat", str(repeat), "--warmup", "1"]
                        if first:
                            cmd += ["--grads-out", os.path.join(d, name + "-torch")]
                            if name == "none":  # the products are counted on `none` rows only
                                cmd += ["--grads64-out", os.path.join(d, "float64"),
                                        "--count-flops"]
                        return json.loads(run(cmd, env=TORCH_ENV).strip().splitlines()[-1])

                    # Ours first in even rounds, torch first in odd ones (the weights and the
                    # checkpoints come from our first run, so round 0 starts with ours).
                    if r % 2 == 0:
                        o = do_ours()
                        t = do_torch(o["checkpoints"])
                    else:
                        t = do_torch(ours_json["checkpoints"])
                        o = do_ours()
                    if first:
                        ours_json, peer_json = o, t
                    ours_ms.append(o["total_ms"])
                    torch_ms.append(t["step_ms"])
                    ours_cpu.append(o["cpu_ms"])
                    torch_cpu.append(t["step_cpu_ms"])
                blas_torch = peer_json["blas"]
                blas_torch_version = peer_json["torch"]
                check = grad_check(os.path.join(d, name + "-ours"),
                                   os.path.join(d, name + "-torch"), os.path.join(d, "float64"))
                err = check["max_rel_err"]
                rows.append({
                    "network": net, "strategy": name, "ours_spec": spec, "torch_mode": mode,
                    "checkpoints": ours_json["checkpoints"],
                    "grad_rel_err": err, "grad_check": check, "grads_agree": not check["bad"],
                    "loss_ours": ours_json["loss"], "loss_torch": peer_json["loss"],
                    "ours_ms": statistics.median(ours_ms), "torch_ms": statistics.median(torch_ms),
                    "ours_ms_rounds": ours_ms, "torch_ms_rounds": torch_ms,
                    "ours_cpu_ms": statistics.median(ours_cpu),
                    "torch_cpu_ms": statistics.median(torch_cpu),
                    "ours_cpu_ms_rounds": ours_cpu, "torch_cpu_ms_rounds": torch_cpu,
                    "cpu_ratio_rounds": [o / t for o, t in zip(ours_cpu, torch_cpu)],
                    "ours_recompute_ms": ours_json["recompute_ms"],
                    "ours_act_peak": ours_json["activation_peak_bytes"],
                    "ours_peak": ours_json["measured_peak_bytes"],
                    "torch_saved_peak": peer_json["saved_peak_bytes"],
                    "torch_rss": peer_json["peak_rss_bytes"],
                    "product_flops": peer_json.get("product_flops"),
                    "product_ops": peer_json.get("product_ops"),
                })
                print(f"  {net} {name}: ours {rows[-1]['ours_ms']:.2f} ms "
                      f"(CPU {rows[-1]['ours_cpu_ms']:.2f}), torch {rows[-1]['torch_ms']:.2f} ms "
                      f"(CPU {rows[-1]['torch_cpu_ms']:.2f}), grads rel err {err:.1e}",
                      file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    base = {}
    for row in rows:
        if row["strategy"] == "none":
            base[row["network"]] = row
    for row in rows:
        b = base[row["network"]]
        row["ours_overhead"] = row["ours_cpu_ms"] / b["ours_cpu_ms"] - 1
        row["torch_overhead"] = row["torch_cpu_ms"] / b["torch_cpu_ms"] - 1

    peaks.append(fma_peak(cli))
    peak = max((p for p in peaks if p), default=None)

    def spread(v):  # the median's range over the rounds
        return f"{statistics.median(v):.2f} ({min(v):.2f}–{max(v):.2f})" if len(v) > 1 else (
            f"{v[0]:.2f}")

    header = ("| network | strategy | segments | grads rel err | ours ms (range) | torch ms (range) "
              "| ours/torch | ours/torch CPU (per round) | overhead ours | overhead torch | act peak MiB | torch saved MiB | act/saved "
              "| torch RSS MiB | products GFLOP | GFLOP/s a CPU s: ours / torch / for 0.85 |")
    lines = [header, "|" + "|".join(["---"] * (header.count("|") - 1)) + "|"]
    def rates(row):
        # `none` rows only, where both sides run the same products: those of PyTorch's step (its
        # profiler, torch_peer.py's PRODUCT_OPS) over each side's CPU time, and the rate ours would
        # need for 0.85 of PyTorch's time if nothing but the products took any. Where that is
        # above what the machine's GEMMs reach, no code can bring the row under 0.85. (A
        # checkpointed row's recomputation differs between the sides: ours may replay less.)
        f = row["product_flops"]  # counted on `none` rows only
        if not f:
            return "- | -"
        per = lambda ms: f / (ms * 1e-3) / 1e9  # noqa: E731
        need = per(0.85 * row["torch_cpu_ms"])
        return (f"{f / 1e9:.3g} | {per(row['ours_cpu_ms']):.0f} / {per(row['torch_cpu_ms']):.0f}"
                f" / {need:.0f}" + (" (above the FMA peak)" if peak and need > peak else ""))

    def ill(row):
        n = row["grad_check"]["ill_conditioned"]
        return f" ({n} ill-cond.)" if n else ""

    for row in rows:
        segs = len(row["checkpoints"]) + 1 if row["torch_mode"] == "segments" else (
            "blocks" if row["torch_mode"] == "per-block" else "-")
        overhead = (lambda v: "-" if row["strategy"] == "none" else f"{100 * v:+.1f} %")
        lines.append(
            f"| `{row['network']}` | {row['strategy']} | {segs} "
            f"| {row['grad_rel_err']:.1e}{ill(row)}{'' if row['grads_agree'] else ' ✗'} "
            f"| {spread(row['ours_ms_rounds'])} | {spread(row['torch_ms_rounds'])} "
            f"| {row['ours_ms'] / row['torch_ms']:.2f} "
            f"| {row['ours_cpu_ms'] / row['torch_cpu_ms']:.2f}"
            f"{round_range(row['cpu_ratio_rounds'])} "
            f"| {overhead(row['ours_overhead'])} "
            f"| {overhead(row['torch_overhead'])} | {mib(row['ours_act_peak'])} "
            f"| {mib(row['torch_saved_peak'])} "
            f"| {row['ours_act_peak'] / max(row['torch_saved_peak'], 1):.2f} "
            f"| {row['torch_rss'] / 2**20:.0f} | {rates(row)} |")
    table = "\n".join(lines)
    date = datetime.date.today().isoformat()
    torch_blas = ", ".join(blas_torch["loaded"]) if blas_torch else "?"
    # Only the BLAS / LAPACK fields of torch.__config__.show(), not its compiler flags.
    config = " ".join(blas_torch["torch_config"]) if blas_torch else ""
    torch_config = ", ".join(re.findall(r"(?:BLAS|LAPACK)_INFO=\w+", config))
    meta = (f"{date}; {machine()}; {a.threads} thread(s) on both sides; "
            f"{rounds} alternating rounds x {repeat} timed steps, medians; "
            + ("both sides held to AVX2 (" + ", ".join(f"{k}={v}" for k, v in AVX2_ENV.items())
               + "); " if a.isa == "avx2" else "") + "load average "
            f"{load_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end.\n"
            f"Ours: rematlab-cli, {our_blas(cli)}.\n"
            f"PyTorch: Debian python3-torch {blas_torch_version}, BLAS loaded: {torch_blas} "
            f"(torch.__config__: {torch_config}); allocator: "
            f"{blas_torch.get('malloc', '?') if blas_torch else '?'}.\n"
            "Products (`none` rows): the FLOPs of one PyTorch step's "
            + ", ".join(next((r["product_ops"] for r in rows if r["product_ops"]), ["?"]))
            + " (its profiler), per CPU second of each side's step; for 0.85: the rate ours would "
            "need for 0.85 of PyTorch's CPU time if the products were all of the step"
            + ("; the FMA peak, which no product passes (`rematlab-cli gemm --peak`, one thread, "
               "this build's vectors): " + " at the start, ".join(
                   f"{p:.0f}" if p else "?" for p in peaks) + " GFLOP/s at the end."
               if peak else "."))
    print(meta)
    print()
    print(table)
    failures = [r for r in rows if not r["grads_agree"]]
    if failures:
        print("\nGRADIENTS DISAGREE: " + ", ".join(f"{r['network']} {r['strategy']}"
                                                     for r in failures), file=sys.stderr)
    if a.quick or a.no_doc:
        return 1 if failures else 0

    results = os.path.join(a.root, "bench", "peers", "results")
    os.makedirs(results, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y-%m-%d-%H%M")
    with open(os.path.join(results, f"{stamp}.md"), "w") as f:
        f.write(meta + "\n\n" + table + "\n")
    with open(os.path.join(results, f"{stamp}.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows, "torch_blas": blas_torch}, f, indent=1)
    with open(os.path.join(a.root, "docs", "benchmarks.md"), "a") as f:
        f.write("\n## Side by side with PyTorch (`bench/peers/compare"
                + (" --isa avx2`, AVX2 only" if a.isa == "avx2" else "`") + f") — {date}\n\n")
        f.write(meta.replace("\n", "  \n") + "\n\n" + table + "\n")
    print(f"\nwrote bench/peers/results/{stamp}.md and .json; appended to docs/benchmarks.md",
          file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
