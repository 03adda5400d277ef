#!/usr/bin/env python3
"""The solver bench: `rematlab-cli solve` on every graph of a folder of Checkmate's and
Moccasin's benchmark graphs, at 0.9 and 0.8 of the peak without recomputation, written as a
Markdown table beside the published figures (Moccasin, ICML 2023: CP-SAT with 16 workers;
Checkmate's MILP on Gurobi).

The graphs are GPL-3.0 benchmark inputs kept outside this repository: give their folder.

    bench/solve_table.py --cli build/app/rematlab-cli --graphs DIR --time-limit 600 \
        --out solve_table.md [--only train,random_layered] [--json-out runs.jsonl] [--jobs 2]

--jobs N solves N instances at once (each `solve` uses one CPU: CBC runs one thread), so a
2-core machine can run the whole folder at 600 s in half the time; each instance then has one
core, not two.

Only the standard library: any python3 runs it.
"""
import argparse
import concurrent.futures
import json
import os
import platform
import subprocess
import sys
import time

# (file prefix, budget fraction) -> {method: (TDI %, seconds to the best solution)}; None: no
# solution reported. From the folder's README (Moccasin's ICML 2023 poster).
PUBLISHED = {
    ("random_layered_n250", 0.9): {"checkmate": (0.9, 685.1), "moccasin": (0.9, 55.0)},
    ("random_layered_n250", 0.8): {"checkmate": None, "moccasin": (4.9, 639.5)},
    ("random_layered_n1000", 0.9): {"checkmate": None, "moccasin": (0.7, 3612.9)},
    ("random_layered_n1000", 0.8): {"checkmate": None, "moccasin": (3.4, 3611.8)},
    ("fcn_8_vgg_mlsys_32_416x608x3_train", 0.9): {"checkmate": (0.0, 6.3), "moccasin": (0.0, 3.1)},
    ("fcn_8_vgg_mlsys_32_416x608x3_train", 0.8): {"checkmate": (0.1, 5.6), "moccasin": (0.1, 3.1)},
    ("ResNet50_mlsys_256_224x224x3_train", 0.9): {"checkmate": (0.1, 434.1), "moccasin": (0.2, 65.2)},
    ("ResNet50_mlsys_256_224x224x3_train", 0.8): {"checkmate": (0.3, 485.3), "moccasin": (0.3, 69.3)},
}


def published(file_name, fraction):
    for (prefix, frac), row in PUBLISHED.items():
        if file_name.startswith(prefix) and abs(frac - fraction) < 1e-9:
            return row
    return None


def fmt_pub(entry):
    if entry is None:
        return "–"
    return f"{entry[0]:.1f} / {entry[1]:.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", required=True, help="path to rematlab-cli")
    ap.add_argument("--graphs", required=True, help="folder of the benchmark graphs (*.json)")
    ap.add_argument("--time-limit", type=float, default=600, help="seconds per instance")
    ap.add_argument("--budgets", default="0.9,0.8", help="fractions of the no-recompute peak")
    ap.add_argument("--method", default="auto")
    ap.add_argument("--max-computations", type=int, default=0)
    ap.add_argument("--only", default="", help="comma-separated substrings a file name must contain one of")
    ap.add_argument("--skip", default="", help="comma-separated substrings that exclude a file")
    ap.add_argument("--out", default="", help="Markdown table file (default: stdout)")
    ap.add_argument("--json-out", default="", help="append every run's JSON line here")
    ap.add_argument("--jobs", type=int, default=1, help="instances solved at once (one CPU each)")
    args = ap.parse_args()

    if not os.path.isdir(args.graphs):
        sys.exit(f"solve_table.py: error: --graphs {args.graphs}: not a folder")
    if not os.access(args.cli, os.X_OK):
        sys.exit(f"solve_table.py: error: --cli {args.cli}: not an executable (build rematlab-cli first)")
    files = sorted(f for f in os.listdir(args.graphs) if f.endswith(".json"))
    if args.only:
        keep = [s for s in args.only.split(",") if s]
        files = [f for f in files if any(s in f for s in keep)]
    if args.skip:
        drop = [s for s in args.skip.split(",") if s]
        files = [f for f in files if not any(s in f for s in drop)]
    fractions = [float(x) for x in args.budgets.split(",") if x]

    if args.jobs < 1:
        sys.exit(f"solve_table.py: error: --jobs {args.jobs}: must be at least 1")
    load_before = os.getloadavg()
    json_out = open(args.json_out, "a") if args.json_out else None

    def solve_one(f, frac):
        cmd = [args.cli, "solve", "--graph", os.path.join(args.graphs, f), "--budget", str(frac),
               "--method", args.method, "--time-limit", str(args.time_limit), "--json",
               "--max-computations", str(args.max_computations)]
        t0 = time.monotonic()
        # The wall clock of the whole process, a hard stop well past the solver's own limit.
        try:
            p = subprocess.run(cmd, capture_output=True, text=True,
                               timeout=args.time_limit * 2 + 120)
            out, err, code = p.stdout, p.stderr, p.returncode
        except subprocess.TimeoutExpired:
            out, err, code = "", "killed: ran past twice the time limit", -1
        wall = time.monotonic() - t0
        rec = None
        if out.strip():
            try:
                rec = json.loads(out.strip().splitlines()[-1])
            except json.JSONDecodeError:
                rec = None
        if rec is None:
            rec = {"graph": f, "feasible": False, "message": err.strip()}
        rec["file_name"] = f
        rec["fraction"] = frac
        rec["wall_s"] = wall
        rec["exit_code"] = code
        rec["load_avg_1m_at_end"] = os.getloadavg()[0]
        if json_out:
            json_out.write(json.dumps(rec) + "\n")
            json_out.flush()
        ours = (f"{100 * rec['tdi']:.2f} / {rec['time_to_best_s']:.1f} / {100 * rec['gap']:.2f}"
                if rec.get("feasible") else "none")
        print(f"{f} {frac}: {ours} ({rec.get('source', rec.get('message', ''))[:80]}) "
              f"in {wall:.1f} s", file=sys.stderr, flush=True)
        return rec

    instances = [(f, frac) for f in files for frac in fractions]
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        # Rows keep the folder's order whatever order the solves finish in.
        rows = list(pool.map(lambda inst: solve_one(*inst), instances))

    lines = [
        f"Solver bench: `{args.method}` with --time-limit {args.time_limit:g} s per instance"
        + (f", at most {args.max_computations} computations per node" if args.max_computations else "")
        + f"; {platform.node()}, {os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
        + (f"; {args.jobs} instances at a time, one CPU each" if args.jobs > 1 else "")
        + f"; load average (1 min) {load_before[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end.",
        "",
        "| graph | nodes | budget | ours: TDI % / time to best s / gap % | from | optimal | "
        "Checkmate MILP (Gurobi) TDI % / s | Moccasin TDI % / s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        pub = published(r["file_name"], r["fraction"]) or {}
        budget = r.get("budget", "?")
        if r.get("feasible"):
            ours = f"{100 * r['tdi']:.2f} / {r['time_to_best_s']:.1f} / {100 * r['gap']:.2f}"
            source = r.get("source", "")
            optimal = "yes" if r.get("proven_optimal") else "no"
        else:
            ours = "no schedule"
            source = (r.get("message") or "")[:60].replace("|", "/")
            optimal = ""
        name = r["file_name"].replace(".json", "")
        lines.append(f"| {name} | {r.get('nodes', '?')} | {r['fraction']} ({budget}) | {ours} | {source} | "
                     f"{optimal} | {fmt_pub(pub.get('checkmate')) if pub else ''} | "
                     f"{fmt_pub(pub.get('moccasin')) if pub else ''} |")
    text = "\n".join(lines) + "\n"
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
