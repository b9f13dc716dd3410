#!/usr/bin/env python3
"""bench/scale --plot-from (no runs): the table from a --json-out file, --replan's predicted
columns from sumcastctl plan itself, the PNG of measured against predicted when gnuplot is
there, one line and the rows without it, and bad input refused (exit 2).

usage: test_scale_plot.py BENCH_SCALE [SUMCASTCTL]   (exit 77 without python's needs)"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(args, env=None):
    return subprocess.run([sys.executable, SCALE, *args], capture_output=True, text=True,
                          timeout=60, env=env)


def row(n, h, t8, t2m, conn):
    """A row as bench/scale's --json-out writes it (measured columns; stale predictions)."""
    r = {"bench": "scale", "nodes": n, "heads": h, "processes": n * h, "aggs": 2, "fan_in": None,
         "iters": 3, "connect_s": conn, "connect_ring_s": conn * 0.8,
         "node_rss_kb_max": 34000, "agg_rss_kb_max": 30000 + 2000 * n * h,
         "agg_posted_recvs_max": 8 * n * h, "pred_t_8B_agg_us": 1.0, "pred_t_2MiB_agg_us": 1.0}
    for i, p in enumerate(("agg", "ring", "auto")):
        r["t_8B_%s_us" % p] = t8 * (1 + i)
        r["t_2MiB_%s_us" % p] = t2m * (1 + 0.5 * i)
    return r


def main():
    global SCALE
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    SCALE = sys.argv[1]
    ctl = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] else None
    tmp = tempfile.mkdtemp(prefix="sc-scale-plot-")
    try:
        rows = [row(8, 1, 200, 20000, 0.1), row(16, 1, 400, 45000, 0.25),
                row(32, 1, 900, 100000, 0.7), row(8, 8, 20000, 400000, 0.9)]
        src = os.path.join(tmp, "rows.jsonl")
        with open(src, "w") as f:
            f.write("bench/scale: not a row\n")
            for r in rows:
                f.write(json.dumps(r) + "\n")

        # the table from the file, no runs (no harness in this directory)
        png = os.path.join(tmp, "scale.png")
        p = run(["--plot-from", src, "--png", png, "--build", tmp])
        check(p.returncode == 0, "plot-from: exit %d: %s" % (p.returncode, p.stderr.strip()))
        lines = p.stdout.splitlines()
        for r in rows:
            check(any(l.split()[:2] == [str(r["nodes"]), str(r["heads"])] for l in lines if l.strip()),
                  "plot-from: no table line for N=%d H=%d" % (r["nodes"], r["heads"]))
        gp = shutil.which("gnuplot")
        if gp:
            check(os.path.exists(png) and open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
                  and os.path.getsize(png) > 10000, "plot-from: no PNG at %s" % png)
            check("bench/scale: plot: " + png in p.stdout, "plot-from: the PNG not named")
        else:
            check("no plot: gnuplot" in p.stdout, "plot-from without gnuplot: no line says so")

        # without gnuplot on PATH: one line says so, the rows still come (--json)
        env = dict(os.environ, PATH=tmp)
        png2 = os.path.join(tmp, "none.png")
        p = run(["--plot-from", src, "--png", png2, "--json"], env=env)
        check(p.returncode == 0, "no gnuplot: exit %d: %s" % (p.returncode, p.stderr.strip()))
        out = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
        check(len(out) == len(rows), "no gnuplot: %d JSON rows, want %d" % (len(out), len(rows)))
        check(p.stderr.count("no plot: gnuplot") == 1, "no gnuplot: want one line, got %r" % p.stderr)
        check(not os.path.exists(png2), "no gnuplot: a PNG was written")

        # --replan: every predicted column from sumcastctl plan, the stale ones replaced
        if ctl:
            p = run(["--plot-from", src, "--png", os.path.join(tmp, "re.png"), "--replan", "--json",
                     "--sumcastctl", ctl])
            check(p.returncode == 0, "replan: exit %d: %s" % (p.returncode, p.stderr.strip()))
            out = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
            check(len(out) == len(rows), "replan: %d rows" % len(out))
            for r in out:
                q = subprocess.run([ctl, "plan", "--nodes", str(r["nodes"]), "--heads", str(r["heads"]),
                                    "--aggs", "2", "--link-gbps", "10.0", "--agg-link-gbps", "10.0",
                                    "--bytes", "8,2M", "--json", "--loopback", "--cores",
                                    str(os.cpu_count() or 1)], capture_output=True, text=True, timeout=20)
                pl = {int(x["bytes"]): x for x in map(json.loads, q.stdout.split("\n")[:-1])}
                what = "replan N=%d H=%d" % (r["nodes"], r["heads"])
                check(r.get("pred_t_8B_agg_us") == pl[8]["t_agg_us"], what + ": 8 B aggregators")
                check(r.get("pred_t_2MiB_ring_us") == pl[2 << 20]["t_ring_us"], what + ": 2 MiB ring")
                check(r.get("pred_t_2MiB_agg_us") == pl[2 << 20]["t_agg_us"], what + ": 2 MiB aggregators")
                check(r.get("pred_connect_s") == pl[2 << 20]["connect_s"], what + ": connect")
                check(r["t_8B_agg_us"] == next(x for x in rows if x["nodes"] == r["nodes"] and
                                               x["heads"] == r["heads"])["t_8B_agg_us"],
                      what + ": measured column changed")
        else:
            print("no sumcastctl: --replan not checked")

        # bad input: exit 2 and a line that says why
        p = run(["--plot-from", os.path.join(tmp, "absent.jsonl")])
        check(p.returncode == 2 and "absent.jsonl" in p.stderr, "absent file: exit %d" % p.returncode)
        empty = os.path.join(tmp, "empty.jsonl")
        with open(empty, "w") as f:
            f.write('{"bench": "cluster"}\n')
        p = run(["--plot-from", empty])
        check(p.returncode == 2 and "no bench/scale rows" in p.stderr, "no rows: exit %d" % p.returncode)
        p = run(["--replan"])
        check(p.returncode == 2 and "--plot-from" in p.stderr, "--replan alone: exit %d" % p.returncode)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d failure(s)" % len(failures) if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
