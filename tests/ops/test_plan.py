#!/usr/bin/env python3
"""sumcastctl plan (tools/cmd_plan.c, docs/sizing.md): the JSON rows parse,
carry every field bench/scale and the README rely on, and are sane: one row
per --bytes value in order, times positive and not falling with the size,
speedup_vs_ring = t_ring / t_auto, split in [0, 1], the tree when N > F,
memory and posted receives per aggregator from the grant, the loopback
mode, the table for people, and bad input refused with exit 64.

usage: test_plan.py SUMCASTCTL   (exit 77 when sumcastctl was not built)"""
import json
import math
import subprocess
import sys

FIELDS = ("nodes", "heads", "aggs", "bytes", "fan_in", "tree_levels", "split",
          "speedup_vs_ring", "agg_mem_bytes", "agg_posted_recvs", "aggs_needed",
          "t_ring_us", "t_agg_us", "t_auto_us", "connect_s")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def plan(*args, rc=0):
    p = subprocess.run([CTL, "plan", *args], capture_output=True, text=True, timeout=20)
    check(p.returncode == rc, f"plan {' '.join(args)}: exit {p.returncode}, want {rc}: {p.stderr.strip()}")
    return p


def rows(*args):
    p = plan(*args, "--json")
    out = []
    for line in p.stdout.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError as e:
            check(False, f"not JSON: {line!r}: {e}")
    return out


def sane(r, what):
    for f in FIELDS:
        check(f in r, f"{what}: no field {f}")
    if any(f not in r for f in FIELDS):
        return
    for f in ("t_ring_us", "t_agg_us", "t_auto_us", "speedup_vs_ring", "connect_s"):
        check(isinstance(r[f], (int, float)) and math.isfinite(r[f]) and r[f] > 0, f"{what}: {f} = {r[f]}")
    check(0 <= r["split"] <= 1, f"{what}: split {r['split']}")
    check(abs(r["speedup_vs_ring"] - r["t_ring_us"] / r["t_auto_us"]) < 1e-3 * r["speedup_vs_ring"],
          f"{what}: speedup {r['speedup_vs_ring']} != ring / auto")
    # auto is never slower than both of its endpoints by more than rounding
    check(r["t_auto_us"] <= max(r["t_ring_us"], r["t_agg_us"]) * 1.0001, f"{what}: auto slower than both paths")
    check(r["tree_levels"] == (2 if r["nodes"] > r["fan_in"] else 1), f"{what}: tree_levels {r['tree_levels']}")
    check(r["agg_posted_recvs"] >= r["nodes"] * 2 * r["heads"] if r["tree_levels"] == 1 else r["agg_posted_recvs"] > 0,
          f"{what}: posted receives {r['agg_posted_recvs']}")
    check(r["agg_mem_bytes"] > 0, f"{what}: agg_mem_bytes {r['agg_mem_bytes']}")


def main():
    # sumcastctl plan's flags; a comma list of sizes with suffixes: one row each, in order
    rs = rows("--nodes", "16", "--heads", "1", "--aggs", "4", "--link-gbps", "100",
              "--agg-link-gbps", "100", "--bytes", "8,64K,2M,64M,1G")
    check([r.get("bytes") for r in rs] == [8, 65536, 2 << 20, 64 << 20, 1 << 30], f"bytes {[r.get('bytes') for r in rs]}")
    for r in rs:
        sane(r, f"N=16 M=4 {r.get('bytes')} B")
    for a, b in zip(rs, rs[1:]):
        for f in ("t_ring_us", "t_agg_us"):
            check(b[f] >= a[f], f"{f} falls from {a['bytes']} to {b['bytes']} B: {a[f]} -> {b[f]}")
    # flat: memory and posted receives of one job per head, as the grant
    # (window 8 x chunk 256K x (16 + 2) at N = 16, under the 64 MiB cap: the
    # plugin joins with f16 and bf16 among its types, an accumulator of 2 chunks),
    # each job over the 8 data threads, its bookkeeping once per lane
    # (976 + 192 x 16 + 8 x (128 + 272 x 16) = 39,888 bytes with ADMIT_SIZES_LP64)
    r = rows("--nodes", "16", "--heads", "8", "--aggs", "128", "--link-gbps", "100",
             "--agg-link-gbps", "100", "--bytes", "256M", "--agg-threads", "8")[0]
    sane(r, "N=16 H=8")
    check(r["agg_posted_recvs"] == 8 * 8 * 16, f"posted {r['agg_posted_recvs']}, want 8 heads x 8 x 16")
    check(r["agg_mem_bytes"] == 8 * (8 * (256 << 10) * 18 + 8 * 39888), f"agg_mem_bytes {r['agg_mem_bytes']}")
    r1 = rows("--nodes", "16", "--heads", "8", "--aggs", "128", "--link-gbps", "100",
              "--agg-link-gbps", "100", "--bytes", "256M", "--agg-threads", "8", "--job-threads", "1")[0]
    check(r1["agg_mem_bytes"] == 8 * (8 * (256 << 10) * 18 + 39888),
          f"job-threads 1: agg_mem_bytes {r1['agg_mem_bytes']}")
    check(r["split"] == 1 and r["aggs_needed"] == 16 * 8,
          f"M = N H at equal links (a link per head): split {r['split']}, needed {r['aggs_needed']}")
    r = rows("--nodes", "16", "--heads", "8", "--aggs", "16", "--link-gbps", "100",
             "--agg-link-gbps", "100", "--bytes", "256M", "--agg-threads", "8")[0]
    check(0 < r["split"] < 0.3 and 1 < r["speedup_vs_ring"] < 1.2,
          f"M = N at equal links, 8 heads: split {r['split']}, speedup {r['speedup_vs_ring']}")
    check(r.get("admitted") is True and r.get("refused") == "", f"N=16 H=8 admitted: {r.get('refused')!r}")
    # one job of 4,096 ranks: 2 x 16 KiB x 4,096 posted on one data thread
    # is more than its queue (8192 less 256); 8 of them, over the budget
    r = rows("--nodes", "4096", "--heads", "1", "--aggs", "64", "--link-gbps", "100",
             "--agg-link-gbps", "100", "--bytes", "1G", "--fan-in", "4096")[0]
    check(r.get("admitted") is False and r.get("refused") == "receive-queue", f"N=4096 H=1: {r.get('refused')!r}")
    r = rows("--nodes", "4096", "--heads", "8", "--aggs", "64", "--link-gbps", "100",
             "--agg-link-gbps", "100", "--bytes", "1G", "--fan-in", "4096", "--agg-threads", "8",
             "--rx-queue", "16384")[0]
    check(r.get("admitted") is False and r.get("refused") == "memory-budget" and r.get("jobs_admitted") == 7,
          f"N=4096 H=8: {r.get('refused')!r} after {r.get('jobs_admitted')} jobs")
    # max-jobs: a tree of 8 x (2 x 2 + 64) = 544 jobs per aggregator; a
    # daemon at its defaults takes 64 (common/admit.c), with --max-jobs 544 all
    r = rows("--nodes", "128", "--heads", "8", "--aggs", "16", "--link-gbps", "100",
             "--agg-link-gbps", "400", "--bytes", "256M", "--agg-threads", "8")[0]
    check(r.get("jobs_per_agg") == 544 and r.get("refused") == "max-jobs" and r.get("jobs_admitted") == 64,
          f"N=128 H=8: {r.get('jobs_per_agg')} jobs, refused {r.get('refused')!r} after {r.get('jobs_admitted')}")
    r = rows("--nodes", "128", "--heads", "8", "--aggs", "16", "--link-gbps", "100",
             "--agg-link-gbps", "400", "--bytes", "256M", "--agg-threads", "8", "--max-jobs", "544")[0]
    check(r.get("admitted") is True, f"N=128 H=8 --max-jobs 544: {r.get('refused')!r}")
    # the tree: N > F, every job's fan-in <= max(F', G)
    for n, f in ((256, 64), (1024, 64), (4096, 64), (100, 16)):
        r = rows("--nodes", str(n), "--heads", "8", "--aggs", "64", "--link-gbps", "100",
                 "--agg-link-gbps", "400", "--bytes", "256M", "--fan-in", str(f), "--agg-threads", "16")[0]
        sane(r, f"N={n} F={f}")
        check(r.get("tree_levels") == 2, f"N={n} F={f}: tree_levels {r.get('tree_levels')}")
        check(r.get("max_job_ranks", 1 << 30) <= f, f"N={n} F={f}: max_job_ranks {r.get('max_job_ranks')}")
    # more aggregators never make the aggregators' path slower
    rs = rows("--nodes", "256", "--heads", "8", "--aggs", "8,32,128,512", "--link-gbps", "100",
              "--agg-link-gbps", "400", "--bytes", "256M", "--agg-threads", "8")
    for a, b in zip(rs, rs[1:]):
        check(b["t_agg_us"] <= a["t_agg_us"] * 1.0001 and b["speedup_vs_ring"] >= a["speedup_vs_ring"] * 0.9999,
              f"M {a['aggs']} -> {b['aggs']}: agg {a['t_agg_us']} -> {b['t_agg_us']}")
    # loopback: no link speeds, cores instead
    rs = rows("--nodes", "16,32", "--aggs", "2", "--bytes", "8,2M", "--loopback", "--cores", "2")
    check(len(rs) == 4, f"loopback rows {len(rs)}")
    for r in rs:
        sane(r, f"loopback N={r.get('nodes')} {r.get('bytes')} B")
        check(r.get("loopback") is True and r.get("cores") == 2, "loopback row says so")
    # bench/scale's shape: 8 heads x N node processes on this host; more
    # processes never make it faster
    rs = rows("--nodes", "8,16", "--heads", "8", "--aggs", "2", "--bytes", "8,2M", "--loopback", "--cores", "2")
    check(len(rs) == 4, f"loopback 8 heads rows {len(rs)}")
    for r in rs:
        sane(r, f"loopback N={r.get('nodes')} H=8 {r.get('bytes')} B")
    check(rs[2]["t_agg_us"] > rs[0]["t_agg_us"] and rs[3]["t_ring_us"] > rs[1]["t_ring_us"],
          "loopback: 16 x 8 processes slower than 8 x 8")
    # the table for people
    p = plan("--nodes", "64", "--heads", "8", "--aggs", "16", "--link-gbps", "100", "--agg-link-gbps", "400",
             "--bytes", "64M")
    check("speedup" in p.stdout and "agg mem" in p.stdout and len(p.stdout.splitlines()) == 10 and "# daemons: max-jobs 64" in p.stdout,
          f"table: {p.stdout!r}")
    # bad input: exit 64 and a sentence
    for bad in (["--nodes", "1", "--aggs", "1", "--link-gbps", "1", "--agg-link-gbps", "1", "--bytes", "8"],
                ["--nodes", "4", "--aggs", "1", "--link-gbps", "1", "--agg-link-gbps", "1"],
                ["--nodes", "4", "--aggs", "1", "--link-gbps", "1", "--agg-link-gbps", "1", "--bytes", "3X"],
                ["--nodes", "4", "--aggs", "1", "--bytes", "8"],
                ["--nodes", "5000", "--aggs", "1", "--link-gbps", "1", "--agg-link-gbps", "1", "--bytes", "8"],
                ["--nodes", "4", "--aggs", "1", "--bytes", "8", "--loopback"]):
        p = plan(*bad, rc=64)
        check(p.stderr.startswith("sumcastctl plan:"), f"{bad}: stderr {p.stderr!r}")
        check(p.stdout == "", f"{bad}: printed {p.stdout!r}")
    # numbers in the user's terms: whole numbers, no empty list items, sizes
    # with their unit, the ranges readable
    base = ["--aggs", "4", "--link-gbps", "100", "--agg-link-gbps", "100"]
    for args, want in ((["--nodes", "16.5", "--bytes", "1M"], "--nodes 16.5: not a whole number"),
                       (["--nodes", "128,,4", "--bytes", "1M"], "--nodes 128,,4: an empty item"),
                       (["--nodes", "128,", "--bytes", "1M"], "--nodes 128,: an empty item"),
                       (["--nodes", "16", "--bytes", "0"], "--bytes must be at least 1 byte"),
                       (["--nodes", "16", "--bytes", "2T"], "--bytes 2T: at most 1 TiB"),
                       (["--nodes", "16", "--bytes", "1M", "--heads", "2.5"], "--heads 2.5: not a whole number"),
                       (["--nodes", "1", "--bytes", "1M"], "--nodes must be at least 2 (got 1)"),
                       (["--nodes", "16", "--bytes", "1M", "--max-jobs", "0"], "--max-jobs must be at least 1"),
                       (["--nodes", "16", "--bytes", "1M", "--window", "x"], "--window x: not a number")):
        p = plan(*args, *base, rc=64)
        check(p.stderr.startswith("sumcastctl plan: " + want.split(":")[0]) and want in p.stderr,
              f"{args}: stderr {p.stderr.strip()!r}, want {want!r}")
        check("e+" not in p.stderr, f"{args}: a range in exponent form: {p.stderr.strip()!r}")
    p = plan("--nodes", "16", "--bytes", "1M", "--link-gbps", "0", "--agg-link-gbps", "1", "--aggs", "1", rc=64)
    check("--link-gbps must be above 0 Gb/s" in p.stderr, f"--link-gbps 0: {p.stderr.strip()!r}")
    # --daemon-config: the daemons' settings from their own file, flags win
    import tempfile, os
    with tempfile.TemporaryDirectory() as d:
        conf = os.path.join(d, "sumcastd.conf")
        with open(conf, "w") as f:
            f.write("[job]\nmax-jobs = 600\nmemory-budget = 4G\n[data]\nthreads = 8\n")
        shape = ["--nodes", "128", "--heads", "8", "--aggs", "16", "--link-gbps", "100",
                 "--agg-link-gbps", "400", "--bytes", "256M"]
        r = rows(*shape, "--daemon-config", conf)[0]
        check(r.get("admitted") is True and r.get("jobs_admitted") == 544, f"--daemon-config: {r.get('refused')!r}")
        r = rows("--daemon-config", conf, *shape, "--max-jobs", "100")[0]
        check(r.get("refused") == "max-jobs" and r.get("jobs_admitted") == 100, f"--max-jobs over the file: {r.get('refused')!r}")
        with open(conf, "w") as f:
            f.write("[job]\nmax-jobz = 6\n")
        p = plan(*shape, "--daemon-config", conf, rc=64)
        check("max-jobz" in p.stderr, f"--daemon-config with an unknown key: {p.stderr.strip()!r}")
    if failures:
        print(f"{len(failures)} checks failed")
        return 1
    print("ok: sumcastctl plan")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2 or not sys.argv[1]:
        print("SKIP: sumcastctl not built")
        sys.exit(77)
    CTL = sys.argv[1]
    sys.exit(main())
