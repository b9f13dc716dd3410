#!/usr/bin/env python3
"""Checks what libnccl-profiler-sumcast-rec.so (tests/gpu/prof_record.c)
recorded under real NCCL: Sumcast's network-plugin events came, each
nested under an open NCCL proxy step, each closed (by the update-and-stop
that carries its result, plugin/prof_events.h), with valid fields.

    prof_check.py PREFIX [--min N] [--allow-open K]

PREFIX is SUMCAST_PROF_RECORD's value: every PREFIX.<pid>.jsonl is read.
Fails (exit 1) when fewer than N (default 1) Sumcast events started, when
one did not stop (more than K, default 0: a process NCCL killed before its
proxy finished may leave some), when one's parent was not an open proxy
step or closed before it, when a field is out of range, or when a stop
names a handle the profiler never gave out. Prints one summary line."""
import glob
import json
import sys

SUMCAST_TYPE = 0x5343 << 16
KINDS = {1: "send", 2: "recv"}


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    prefix, need, allow_open = args[0], 1, 0
    i = 1
    while i < len(args):
        if args[i] == "--min" and i + 1 < len(args):
            need = int(args[i + 1])
            i += 2
        elif args[i] == "--allow-open" and i + 1 < len(args):
            allow_open = int(args[i + 1])
            i += 2
        else:
            print(__doc__, file=sys.stderr)
            return 2
    files = sorted(glob.glob(glob.escape(prefix) + ".*.jsonl"))
    errors = []
    n_start = n_stop = n_other = n_open = 0
    per_kind = {}
    bytes_done = 0
    last_summary = {}  # file -> its last summary line (finalize: counts since the load)

    def err(msg):
        if len(errors) < 20:
            errors.append(msg)
        elif len(errors) == 20:
            errors.append("... (more)")

    def unstopped(f, starts):
        still = [s for s in starts.values() if s is not None]
        for s in still[:3]:
            err(f"{f}: Sumcast event {s['seq']} ({KINDS.get(s.get('kind'))}, {s.get('bytes')} B) never stopped")
        return len(still)

    for f in files:
        starts = {}  # of the library's current load (seq counts from 1 per load)
        with open(f) as fh:
            for ln, line in enumerate(fh, 1):
                try:
                    e = json.loads(line)
                except ValueError:
                    err(f"{f}:{ln}: not JSON: {line[:80]!r}")
                    continue
                ev = e.get("ev")
                if ev == "load":
                    n_open += unstopped(f, starts)
                    starts = {}
                    continue
                if ev == "summary":
                    last_summary[f] = e
                    if e.get("bad_stops", 0):
                        err(f"{f}:{ln}: {e['bad_stops']} stop(s) of handles never given out or stopped twice")
                    continue
                if ev == "start":
                    if e["seq"] in starts:
                        err(f"{f}:{ln}: event {e['seq']} started twice in one load of the library")
                    if (e["id"] & 0xFFFF0000) != SUMCAST_TYPE:
                        n_other += 1
                        starts[e["seq"]] = None
                        continue
                    n_start += 1
                    starts[e["seq"]] = e
                    where = f"{f}:{ln}"
                    if e["id"] & 0xFFFF != 1:
                        err(f"{where}: Sumcast event version {e['id'] & 0xFFFF}, this checker knows 1")
                    if not e.get("parent_ok"):
                        err(f"{where}: Sumcast event whose parent is not an open proxy step")
                    k = e.get("kind")
                    if k not in KINDS:
                        err(f"{where}: kind {k}")
                    elif not (1 <= e["nsubs"] <= 8 and e["sub"] < e["nsubs"]) or (k == 1 and e["nsubs"] != 1):
                        err(f"{where}: sub {e['sub']} of {e['nsubs']} for a {KINDS[k]}")
                    per_kind[KINDS.get(k, k)] = per_kind.get(KINDS.get(k, k), 0) + 1
                elif ev == "stop":
                    if e["seq"] not in starts:
                        err(f"{f}:{ln}: stop of event {e['seq']} that did not start (or stopped twice)")
                        continue
                    s = starts.pop(e["seq"])
                    if s is None:
                        continue
                    n_stop += 1
                    where = f"{f}:{ln}"
                    if not e.get("parent_open"):
                        err(f"{where}: Sumcast event {e['seq']} stopped after its parent proxy step")
                    if e.get("updates", 0) > 1:
                        err(f"{where}: {e['updates']} updates, the plugin sends one at the end")
                    if "status" in e:
                        if e["done_kind"] != s["kind"]:
                            err(f"{where}: update kind {e['done_kind']}, start kind {s['kind']}")
                        if e["status"] != 0:
                            err(f"{where}: a {KINDS.get(s['kind'])} ended with status {e['status']}")
                        if e["done_bytes"] > s["bytes"] or (s["kind"] == 1 and e["done_bytes"] != s["bytes"]):
                            err(f"{where}: {e['done_bytes']} bytes done of {s['bytes']}")
                        bytes_done += e["done_bytes"]
                else:
                    err(f"{f}:{ln}: unknown line {line[:80]!r}")
        n_open += unstopped(f, starts)
    if not files:
        err(f"no {prefix}.*.jsonl: was the profiler loaded (NCCL_PROFILER_PLUGIN) with SUMCAST_PROF_RECORD set?")
    if n_start < need:
        err(f"{n_start} Sumcast net-plugin event(s), want at least {need}")
    if n_open > allow_open:
        err(f"{n_open} Sumcast event(s) never stopped (allowed {allow_open})")
    counts = {}
    for e in last_summary.values():
        for k, v in e.get("starts", {}).items():
            counts[k] = counts.get(k, 0) + v
    print(f"prof_check: {len(files)} file(s), Sumcast events {n_start} started, {n_stop} stopped, "
          f"{n_open} open, by kind {per_kind}, {bytes_done} bytes done; other net-plugin events "
          f"{n_other}; NCCL event starts (each file's last summary, summed) {counts}")
    for e in errors:
        print("prof_check: FAIL " + e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
