#!/usr/bin/env python3
"""bench/cluster/ab --base-tree: two whole builds (daemon, plugin, harness) on the emulated
cluster, one run of each build's own bench/cluster/run per round, the order alternating.

Each run: agg and ring modes at one size; the row kept per mode is its busbw. --base-env
sets variables for the base's runs only (--new-env for this tree's): with --base-tree . it
prices a switch (e.g. SUMCAST_FAILOVER=0) in one tree. Prints a row
per run, then per build the medians of agg, ring and agg / ring, new / base of them, and
the median of the rounds' own new / base with its 95 % bootstrap interval (a round's two
runs are back to back, so the load they share cancels).
Exit: 0, 1 when a run failed (the others still run), 2 usage, 77 cannot emulate.
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def one_run(tree, args, out, extra):
    """busbw of agg and ring from tree's bench/cluster/run, or None and why."""
    cmd = [os.path.join(tree, "bench/cluster/run"), "--workers", str(args.workers),
           "--aggs", str(args.aggs), "--link-mbit", str(args.link_mbit),
           "--min-bytes", args.bytes, "--max-bytes", args.bytes, "--modes", "agg,ring",
           "--iters", str(args.iters), "--linktest", "0", "--no-plots", "--json",
           "--time-limit", "900", "--out", out]
    env = dict(os.environ, SUMCAST_BUILD_DIR=os.path.join(tree, "build"))
    for e in args.env + extra:
        k, v = e.split("=", 1)
        env[k] = v
    with open(out + ".log", "w") as log:
        try:
            p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=log, text=True,
                               timeout=1200)
        except subprocess.TimeoutExpired:
            return None, "timed out (1200 s)"
    if p.returncode == 77:
        sys.exit(77)
    rows = {}
    for line in p.stdout.splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if r.get("mode") in ("agg", "ring") and "busbw_gbps" in r:
            rows[r["mode"]] = r
    if p.returncode or len(rows) != 2:
        return None, f"exit {p.returncode}, rows {sorted(rows)} (log {out}.log)"
    if any(r.get("wrong") for r in rows.values()):
        return None, f"wrong results (log {out}.log)"
    return rows, ""


def median_interval(xs, resamples=4000):
    """95 % bootstrap interval of the median of xs (seeded: the same rows give the same
    interval)."""
    rng = random.Random(1)
    meds = sorted(statistics.median(rng.choices(xs, k=len(xs))) for _ in range(resamples))
    return meds[int(0.025 * resamples)], meds[int(0.975 * resamples) - 1]


def main():
    ap = argparse.ArgumentParser(prog="bench/cluster/ab --base-tree")
    ap.add_argument("--base-tree", required=True)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--aggs", type=int, default=8)
    ap.add_argument("--link-mbit", type=int, default=500)
    ap.add_argument("--bytes", default="64M")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--base-env", action="append", default=[])
    ap.add_argument("--new-env", action="append", default=[])
    args = ap.parse_args()
    for e in args.env + args.base_env + args.new_env:
        if "=" not in e or not e.split("=", 1)[0].isidentifier():
            print(f"--env/--base-env {e}: VAR=VALUE", file=sys.stderr)
            return 2
    base = os.path.abspath(args.base_tree)
    for t in (ROOT, base):
        for f in ("bench/cluster/run", "build/daemon/sumcastd"):
            if not os.access(os.path.join(t, f), os.X_OK):
                print(f"--base-tree: {os.path.join(t, f)} missing (build the tree first)",
                      file=sys.stderr)
                return 2
    if args.rounds < 1 or args.rounds > 40:
        print("--rounds: 1 to 40", file=sys.stderr)
        return 2
    outdir = os.path.join(ROOT, "out", time.strftime("ab-trees-%Y%m%d-%H%M%S"))
    os.makedirs(outdir, exist_ok=True)
    trees = {"new": ROOT, "base": base}
    got = {"new": [], "base": []}
    pairs = []  # agg/ring of new over base's, per round where both ran
    failed = 0
    print(f"# new {ROOT}, base {base}; W={args.workers} A={args.aggs} {args.link_mbit} Mbit/s "
          f"{args.bytes}, {args.iters} calls per mode, env {' '.join(args.env) or '-'}, "
          f"base's env {' '.join(args.base_env) or '-'}, new's {' '.join(args.new_env) or '-'}; "
          f"runs in {outdir}")
    print(f"{'round':>5} {'build':>5} {'agg GB/s':>9} {'ring GB/s':>9} {'agg/ring':>9} {'load':>5}")
    for rnd in range(args.rounds):
        order = ("new", "base") if rnd % 2 == 0 else ("base", "new")
        this = {}
        for b in order:
            rows, why = one_run(trees[b], args, os.path.join(outdir, f"{b}-{rnd}"),
                                args.base_env if b == "base" else args.new_env)
            if rows is None:
                print(f"{rnd:>5} {b:>5} failed: {why}")
                failed += 1
                continue
            a, r = rows["agg"]["busbw_gbps"], rows["ring"]["busbw_gbps"]
            got[b].append((a, r, a / r))
            this[b] = a / r
            print(f"{rnd:>5} {b:>5} {a:>9.4f} {r:>9.4f} {a / r:>9.3f} "
                  f"{rows['agg'].get('loadavg1', float('nan')):>5.1f}", flush=True)
        if len(this) == 2:
            pairs.append(this["new"] / this["base"])
    med = {}
    for b in ("new", "base"):
        if got[b]:
            med[b] = [statistics.median(x[i] for x in got[b]) for i in range(3)]
            print(f"# {b}: median agg {med[b][0]:.4f}, ring {med[b][1]:.4f}, agg/ring "
                  f"{med[b][2]:.3f} ({len(got[b])} runs)")
    if len(med) == 2:
        print(f"# new/base: agg {med['new'][0] / med['base'][0]:.3f}, ring "
              f"{med['new'][1] / med['base'][1]:.3f}, agg/ring {med['new'][2] / med['base'][2]:.3f}")
    if len(pairs) >= 3:
        lo, hi = median_interval(pairs)
        print(f"# per round, new/base of agg/ring: median {statistics.median(pairs):.3f}, 95 % "
              f"interval {lo:.3f}-{hi:.3f} (bootstrap of {len(pairs)} rounds; an interval "
              f"that holds 1.000 cannot tell the builds apart)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
