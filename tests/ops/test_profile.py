#!/usr/bin/env python3
"""sumcastctl profile (tools/cmd_profile.c) on real traces: the plugin
harness runs with --keep-trace and the profile must agree with what the
harness issued and checked, and with the trace files read here.

- coll, 3 nodes, 1 aggregator, split 0.5 (--expect agg): calls per node and
  bytes per node = the harness's issued requests and bytes; rank 0's bytes
  through the aggregators = what the daemon counted from it; the share in
  [0, 1] and near 0.5; each class's rows and bytes and the slowest node as
  recomputed from the files; no fault; the prefix and single-file forms;
  --png draws a PNG (when gnuplot is installed) and without gnuplot on PATH
  says so with exit 1.
- fault (kill, split auto, 1000 collectives): epoch 1 reached once on every
  node, rows after it, the repaired bytes = the harness's sum over the
  nodes, reduce-scatter and allgather rows, split changes as recomputed
  from rank 0's file (the plugin's classes, plugin/split.h).
- a two-level tree (4 nodes, fan-in 2, split 1): "tree" rows only, calls and
  bytes as issued, every byte through the aggregator, no ring rate.
- a trace edited here so that each adaptive class's split moves once: that
  many changes.
- bad input: a missing path, an empty directory, a file of garbage (exit 1);
  malformed lines beside good ones (counted skips, the good rows kept); two
  jobs in one directory (both profiled, --png wants --job, an unknown --job
  exit 1); usage errors exit 64.

usage: test_profile.py SUMCASTCTL PLUGIN_HARNESS   (exit 77 when either was not built)"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)
    return cond


def ctl(*args, rc=0, env=None):
    p = subprocess.run([CTL, "profile", *args], capture_output=True, text=True, timeout=60, env=env)
    check(p.returncode == rc, f"profile {' '.join(args)}: exit {p.returncode}, want {rc}: {p.stderr.strip()}")
    return p


def prof(*args):
    p = ctl("--json", *args)
    try:
        return json.loads(p.stdout)
    except ValueError as e:
        check(False, f"profile --json {' '.join(args)}: not JSON: {e}")
        return {"jobs": []}


def harness(*args):
    p = subprocess.run([HARNESS, *args], capture_output=True, text=True, timeout=120)
    if p.returncode == 77:
        print("SKIP: the harness skipped:", p.stderr.strip().splitlines()[-1:])
        sys.exit(77)
    if not check(p.returncode == 0, f"harness {' '.join(args)}: exit {p.returncode}"):
        print(p.stderr[-3000:])
        sys.exit(1)
    return p.stdout + p.stderr


def rows_of(d):
    out = []
    for f in sorted(os.listdir(d)):
        if f.endswith(".jsonl"):
            with open(os.path.join(d, f)) as fh:
                out += [json.loads(l) for l in fh if l.strip()]
    return out


def size_class(b):  # [4^k, 4^(k+1))
    return (b.bit_length() - 1) // 2


def adapt_class(b):  # plugin/split.h: powers of two from 256 KiB, 8 classes
    return -1 if b < 1 << 18 else min(b.bit_length() - 1 - 18, 7)


def split_changes(rows):
    prev, n = {}, 0
    for r in sorted(rows, key=lambda r: (r["start_ns"], r["seq"])):
        c = adapt_class(r["bytes"])
        if not r.get("adaptive") or r.get("coll", "allreduce") != "allreduce" or c < 0:
            continue
        if c in prev and abs(prev[c] - r["split"]) >= 1e-4:
            n += 1
        prev[c] = r["split"]
    return n


def check_against_files(job, rows, what):
    """Classes, totals and the slowest node from the rows themselves."""
    want = {}
    for r in rows:
        k = (r.get("coll", "allreduce"), size_class(r["bytes"]))
        c = want.setdefault(k, [0, 0, 0])
        c[0] += 1
        c[1] += r["bytes"]
        c[2] += r["agg_bytes"]
    got = {(c["coll"], size_class(c["size_min"])): [c["rows"], c["bytes"], c["agg_bytes"]] for c in job["classes"]}
    check(got == want, f"{what}: classes {got} != the files' {want}")
    for c in job["classes"]:
        check(c["agg_share"] is None or 0 <= c["agg_share"] <= 1, f"{what}: agg_share {c['agg_share']}")
    per_rank = {}
    for r in rows:
        per_rank[r["rank"]] = per_rank.get(r["rank"], 0) + r["time_us"]
    slow = max(per_rank, key=per_rank.get)
    check(job["slowest_rank_total"] == slow, f"{what}: slowest rank {job['slowest_rank_total']}, the files say {slow}")
    check(job["total"]["redone_bytes"] == sum(r["redone_bytes"] for r in rows), f"{what}: redone_bytes")


def main():
    tmp = tempfile.mkdtemp(prefix="sumcast-profile-")
    try:
        run(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("profile: coll and fault traces, an edited trace and bad input: all as expected")
    return 0


def run(tmp):
    # ---- coll: 3 nodes, split 0.5 through one aggregator ----
    d1 = os.path.join(tmp, "coll")
    out = harness("coll", "--nranks", "3", "--naggs", "1", "--split", "0.5", "--expect", "agg", "--keep-trace", d1)
    m = re.search(r"trace: (\d+) requests, (\d+) bytes, one line each", out)
    a = re.search(r"path: agg, (\d+) bytes through 1 aggregators \(counted by the daemons: (\d+)\)", out)
    if not check(m and a, "the harness's trace and path lines"):
        print(out[-2000:])
        return
    calls, nbytes, daemon_counted = int(m[1]), int(m[2]), int(a[2])
    p = prof(d1)
    check(p.get("files") == 3 and p.get("rows") == 3 * calls and p.get("skipped_lines") == 0,
          f"coll: files / rows / skipped {p.get('files')} {p.get('rows')} {p.get('skipped_lines')}, want 3 {3 * calls} 0")
    if check(len(p["jobs"]) == 1, f"coll: {len(p['jobs'])} jobs, want 1"):
        j = p["jobs"][0]
        t = j["total"]
        check(j["nranks"] == 3 and j["nodes_traced"] == 3, f"coll: nranks {j['nranks']} traced {j['nodes_traced']}")
        check(j["calls_per_node_min"] == calls and j["calls_per_node_max"] == calls,
              f"coll: calls per node {j['calls_per_node_min']}..{j['calls_per_node_max']}, the harness issued {calls}")
        check(t["bytes_per_node"] == nbytes, f"coll: bytes per node {t['bytes_per_node']}, issued {nbytes}")
        r0 = [n for n in j["nodes"] if n["rank"] == 0]
        check(r0 and r0[0]["agg_bytes"] == daemon_counted,
              f"coll: rank 0's bytes through the aggregator {r0 and r0[0]['agg_bytes']}, the daemon counted {daemon_counted}")
        check(0 <= t["agg_share"] <= 1 and abs(t["agg_share"] - 0.5) < 0.02, f"coll: agg_share {t['agg_share']}")
        check(all(c["split_mean"] == 0.5 for c in j["classes"]), "coll: every class at split 0.5")
        check(t["agg_rate_Bps"] > 0 and t["ring_rate_Bps"] > 0 and t["rate_Bps"] > 0, f"coll: rates {t}")
        check(t["epoch_max"] == 0 and not j["epoch_changes"] and t["errors"] == 0, "coll: a fault without one")
        check(sum(c["calls_per_node"] for c in j["classes"]) == calls, "coll: the classes' calls add up")
        check_against_files(j, rows_of(d1), "coll")
    t = ctl(d1)
    check(f"3 of 3 nodes traced, {calls} calls per node" in t.stdout and "slowest node: rank" in t.stdout,
          f"coll: the table: {t.stdout[:300]!r}")
    p2 = prof(os.path.join(d1, "trace"))  # the SUMCAST_TRACE prefix
    check(p2.get("rows") == 3 * calls, "coll: the prefix form reads the same rows")
    one = sorted(f for f in os.listdir(d1))[0]
    p3 = prof(os.path.join(d1, one), d1)  # a file named twice is read once
    check(p3.get("files") == 3 and p3.get("rows") == 3 * calls, "coll: a file given twice counted once")
    p4 = prof(os.path.join(d1, one))
    check(p4["jobs"] and p4["jobs"][0]["nodes_traced"] == 1, "coll: one file, one node")
    png = os.path.join(tmp, "coll.png")
    if shutil.which("gnuplot"):
        ctl(d1, "--png", png)
        ok = os.path.exists(png) and os.path.getsize(png) > 5000
        check(ok and open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n", "coll: --png wrote no PNG")
    else:
        print("no gnuplot: --png's picture not checked")
    env = dict(os.environ, PATH=os.path.join(tmp, "empty"))
    q = ctl(d1, "--png", png + ".2", rc=1, env=env)
    check("gnuplot is not on PATH" in q.stderr and "calls per node" in q.stdout and not os.path.exists(png + ".2"),
          f"no gnuplot: {q.stderr.strip()}")

    # ---- fault: an aggregator killed, the adaptive split ----
    d2 = os.path.join(tmp, "fault")
    out = harness("fault", "--nranks", "3", "--naggs", "2", "--split", "auto", "--fault", "kill", "--ops", "1000",
                  "--expect-adaptive", "--keep-trace", d2)
    m = re.search(r"\[rank 0\] trace: (\d+) rows,", out)
    rep = re.search(r"; (\d+) bytes repaired over all nodes", out)
    if check(m and rep, "the fault harness's trace lines"):
        p = prof(d2)
        j = p["jobs"][0]
        t = j["total"]
        rows = rows_of(d2)
        check(j["calls_per_node_max"] == int(m[1]), f"fault: {j['calls_per_node_max']} calls per node, rank 0 traced {m[1]}")
        check(t["epoch_max"] == 1 and t["rows_after_fault"] > 0, f"fault: epoch {t['epoch_max']}, {t['rows_after_fault']} rows after")
        check(len(j["epoch_changes"]) == 1 and j["epoch_changes"][0]["to"] == 1, f"fault: epoch changes {j['epoch_changes']}")
        check(all(n["epoch_changes"] == 1 for n in j["nodes"]), "fault: every node went to epoch 1 once")
        check(t["redone_bytes"] == int(rep[1]), f"fault: {t['redone_bytes']} bytes repaired, the harness summed {rep[1]}")
        colls = {c["coll"] for c in j["classes"]}
        check({"allreduce", "reducescatter", "allgather"} <= colls, f"fault: collectives {colls}")
        want = split_changes([r for r in rows if r["rank"] == j["changes_of_rank"]])
        check(len(j["split_changes"]) == want, f"fault: {len(j['split_changes'])} split changes, the file has {want}")
        check_against_files(j, rows, "fault")
        t = ctl(d2)
        check("epoch 0 -> 1" in t.stdout, "fault: the table shows the epoch change")

    # ---- a two-level tree (fan-in 2), split 1: "tree" rows, every byte through the aggregator ----
    d4 = os.path.join(tmp, "tree")
    out = harness("coll", "--nranks", "4", "--naggs", "1", "--split", "1", "--fan-in", "2", "--expect", "agg",
                  "--keep-trace", d4)
    m = re.search(r"trace: (\d+) requests, (\d+) bytes, one line each", out)
    if check(m, "the tree harness's trace line"):
        j = prof(d4)["jobs"][0]
        check(j["nodes_traced"] == 4 and j["calls_per_node_max"] == int(m[1]) and j["calls_per_node_min"] == int(m[1])
              and j["total"]["bytes_per_node"] == int(m[2]), f"tree: calls / bytes {j['calls_per_node_max']} "
              f"{j['total']['bytes_per_node']}, issued {m[1]} {m[2]}")
        check({c["coll"] for c in j["classes"]} == {"tree"}, "tree: only tree rows")
        check(j["total"]["agg_share"] == 1 and j["total"]["ring_rate_Bps"] is None,
              f"tree: split 1 gives share {j['total']['agg_share']}, ring rate {j['total']['ring_rate_Bps']}")
        check_against_files(j, rows_of(d4), "tree")

    # ---- an edited trace: each adaptive class's split moves once ----
    d3 = os.path.join(tmp, "edited")
    os.mkdir(d3)
    src = os.path.join(d1, one)
    rows = [json.loads(l) for l in open(src) if l.strip()]
    by_class = {}
    for r in rows:
        if adapt_class(r["bytes"]) >= 0:
            by_class.setdefault(adapt_class(r["bytes"]), []).append(r)
    moved = 0
    for c, rs in by_class.items():
        rs.sort(key=lambda r: (r["start_ns"], r["seq"]))
        for i, r in enumerate(rs):
            r["adaptive"] = True
            if i >= len(rs) // 2 and len(rs) >= 2:
                r["split"] = 0.75
        moved += len(rs) >= 2
    with open(os.path.join(d3, "e.jsonl"), "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    p = prof(d3)
    check(moved >= 1 and len(p["jobs"][0]["split_changes"]) == moved,
          f"edited: {len(p['jobs'][0]['split_changes'])} split changes, {moved} made")

    # ---- bad input ----
    q = ctl(os.path.join(tmp, "nowhere"), rc=1)
    check("no such file" in q.stderr, f"missing path: {q.stderr.strip()}")
    empty = os.path.join(tmp, "empty")
    os.mkdir(empty)
    q = ctl(empty, rc=1)
    check("no trace files" in q.stderr, f"empty directory: {q.stderr.strip()}")
    junk = os.path.join(tmp, "junk")
    os.mkdir(junk)
    with open(os.path.join(junk, "x.jsonl"), "wb") as f:
        f.write(b"not json\n\x00\xff\xfe\n[1,2]\n")
    q = ctl(junk, rc=1)
    check("no trace rows" in q.stderr and "skipped 3 line" in q.stderr, f"garbage: {q.stderr.strip()}")
    mixed = os.path.join(tmp, "mixed")
    os.mkdir(mixed)
    good = [l for l in open(src)]
    bad_rank = json.loads(good[0])
    bad_rank["rank"] = 7
    bad_job = dict(json.loads(good[0]), job="0x1'\nsystem 'touch x'")
    huge = dict(json.loads(good[0]), nranks=1 << 31, rank=0)
    with open(os.path.join(mixed, "a.jsonl"), "w") as f:
        f.writelines(good)
        f.write("{\"job\":\"0x1\"}\n")                     # fields missing
        f.write(json.dumps(bad_rank) + "\n")                 # rank >= nranks
        f.write(json.dumps(bad_job) + "\n")                  # a job id gnuplot would run
        f.write(json.dumps(huge) + "\n")                     # 2^31 ranks
        f.write("{" + "\"x\":1," * 12000 + "\"y\":2}\n")     # too long
        f.write("\n")                                        # blank: not counted
        f.write(good[1][: len(good[1]) // 2])                # cut off, as a killed node leaves it
    os.mkfifo(os.path.join(mixed, "fifo.jsonl"))  # not a plain file: not read (would block)
    os.mkdir(os.path.join(mixed, "dir.jsonl"))
    p = prof(mixed)
    check(p.get("files") == 1, f"malformed: {p.get('files')} files read, want 1 (no FIFO, no directory)")
    check(p.get("skipped_lines") == 6 and p.get("rows") == len(good), f"malformed: skipped {p.get('skipped_lines')}, rows {p.get('rows')}")
    for f in os.listdir(d2):
        shutil.copy(os.path.join(d2, f), mixed)
    p = prof(mixed)
    check(len(p["jobs"]) == 2, f"two jobs: {len(p['jobs'])} profiled")
    q = ctl(mixed, "--png", os.path.join(tmp, "two.png"), rc=64)
    check("--job" in q.stderr, f"two jobs, --png: {q.stderr.strip()}")
    if shutil.which("gnuplot"):
        ctl(mixed, "--png", os.path.join(tmp, "two.png"), "--job", p["jobs"][0]["job"])
    ctl(mixed, "--job", "0xdead", rc=1)
    ctl(d1, "--png", os.path.join(tmp, "a'b.png"), rc=64)
    ctl(rc=64)
    ctl("--bogus", d1, rc=64)


if __name__ == "__main__":
    if len(sys.argv) != 3 or not sys.argv[1] or not sys.argv[2] or not os.access(sys.argv[1], os.X_OK) \
            or not os.access(sys.argv[2], os.X_OK):
        print("SKIP: sumcastctl or the plugin harness not built")
        sys.exit(77)
    CTL, HARNESS = sys.argv[1], sys.argv[2]
    sys.exit(main())
