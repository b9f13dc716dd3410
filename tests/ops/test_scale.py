#!/usr/bin/env python3
"""One sumcastd with its default settings serves many ranks.

Modes (each its own ctest):
  rank1024  one job of 1,024 ranks (tests/ops/sc_jobgen, 4 processes);
  jobs8x256 8 jobs of 256 ranks at once (8 processes, one job each).

The daemon runs with every setting at its default but the ports, so its
[job] memory-budget (1G), max-inflight (64M), min-chunk (16K) and receive
queue (8192, common/fabric_env.c) are what an operator gets. Checked:

  * every element of every allreduce exact (sc_jobgen checks, exit 0);
  * the grant read from /stats while the jobs run: window 2 and chunk 32K
    for N = 1,024 (2 x 32K x 1,024 = 64M), window 2 and chunk 128K for
    N = 256; posted receives = window x N per job in /stats, and their sum
    in /metrics (sumcast_posted_receives), within sumcast_receive_queue;
  * memory_used in /stats = the jobs' window x chunk x (N + 2) plus their
    bookkeeping (< 200 bytes per rank per slot + 4K per rank);
  * the daemon's peak RSS (VmHWM, /proc) under its idle RSS + memory_used
    + 64 KiB per rank (its control connection and the fabric connection's
    buffers: ~40 KiB measured, docs/journal/2026-11-26-aggregator-receives.md)
    + 32 MiB.

The generator holds ~4.3 MB per rank (libfabric's rxm endpoint per client,
same journal entry): the test is skipped (77) when the host has not that
much memory available. Usage: test_scale.py MODE SUMCASTD SC_JOBGEN
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from daemon_http import get, metric, stop

MODES = {
    # ranks, jobs, processes, want window, want chunk
    "rank1024": (1024, 1, 4, 2, 32768),
    "jobs8x256": (256, 8, 8, 2, 131072),
}
GEN_BYTES_PER_RANK = 5 << 20
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)
    return cond


def kb(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return -1


def mem_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in MODES:
        print(__doc__, file=sys.stderr)
        return 2
    mode, sumcastd, jobgen = sys.argv[1:]
    nranks, njobs, nprocs, want_w, want_c = MODES[mode]
    total = nranks * njobs
    need = total * GEN_BYTES_PER_RANK + (1 << 30)
    if mem_available() < need:
        print("SKIP: %d ranks need ~%d MiB, %d MiB available" %
              (total, need >> 20, mem_available() >> 20))
        return 77
    tmp = tempfile.mkdtemp(prefix="sc-scale-")
    ports = os.path.join(tmp, "ports")
    conf = os.path.join(tmp, "sumcastd.conf")
    with open(conf, "w") as f:
        f.write("[control]\nport = 0\nport-file = %s\n[http]\nport = 0\n" % ports)
    log = open(os.path.join(tmp, "sumcastd.log"), "w")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FI_", "SUMCASTD_"))}
    d = subprocess.Popen([sumcastd, "-c", conf], stdout=log, stderr=subprocess.STDOUT, env=env)
    gen = None
    try:
        end = time.monotonic() + 15
        while not os.path.exists(ports) and time.monotonic() < end and d.poll() is None:
            time.sleep(0.05)
        if not check(os.path.exists(ports), "daemon wrote its port file"):
            return 1
        kv = dict(x.split("=") for x in open(ports).read().split())
        ctl, http = int(kv["control"]), int(kv["http"])
        time.sleep(0.3)
        idle = kb(d.pid, "VmRSS")
        m = get(http, "/metrics")
        queue = metric(m, 'sumcast_receive_queue{thread="0"}')
        check(queue is not None and queue >= 7936,
              "receive queue %s: 8192 less the sweep's 256" % queue)
        t0 = time.monotonic()
        gen = subprocess.Popen([jobgen, "--aggs", "127.0.0.1:%d" % ctl, "--ranks", str(nranks),
                                "--jobs", str(njobs), "--procs", str(nprocs), "--iters", "4",
                                "--seconds", "60", "--count", "4096", "--timeout-ms", "40000"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=env)
        # the grant and the receives, once every rank of every job has joined
        seen = None
        end = time.monotonic() + 60
        while time.monotonic() < end and gen.poll() is None:
            s = json.loads(get(http, "/stats"))
            jobs = [j for j in s["jobs"] if j["state"] == "ready"]
            if len(jobs) == njobs:
                seen = (s, get(http, "/metrics"), len(os.listdir("/proc/%d/fd" % d.pid)))
                break
            time.sleep(0.2)
        out, _ = gen.communicate(timeout=120)
        elapsed = time.monotonic() - t0
        print(out.strip())
        check(gen.returncode == 0, "sc_jobgen exited %d" % gen.returncode)
        hwm = kb(d.pid, "VmHWM")
        if check(seen is not None, "all %d jobs seen ready in /stats" % njobs):
            s, m, fds = seen
            # a control connection and a fabric connection per rank (the
            # unit's LimitNOFILE, systemd/sumcastd.service.in)
            check(fds <= 3 * total + 100, "daemon holds %d descriptors for %d ranks" % (fds, total))
            book = 0
            for j in s["jobs"]:
                check(j["nranks"] == nranks and j["window"] == want_w and j["chunk"] == want_c,
                      "job %s: %d ranks, window %d, chunk %d; want %d, %d, %d" %
                      (j["id"], j["nranks"], j["window"], j["chunk"], nranks, want_w, want_c))
                check(j["posted_receives"] == want_w * nranks,
                      "job %s posts %d receives, want %d" %
                      (j["id"], j["posted_receives"], want_w * nranks))
                region = want_w * want_c * (nranks + 2)
                check(j["buffer_bytes"] == region, "job %s buffers %d, want w x c x (N + 2) = %d" %
                      (j["id"], j["buffer_bytes"], region))
                check(j["bookkeeping_bytes"] < want_w * nranks * 200 + nranks * 4096,
                      "job %s bookkeeping %d bytes" % (j["id"], j["bookkeeping_bytes"]))
                book += j["bookkeeping_bytes"]
            posted = metric(m, 'sumcast_posted_receives{thread="0"}')
            check(posted == njobs * want_w * nranks,
                  "sumcast_posted_receives %s, want %d" % (posted, njobs * want_w * nranks))
            check(posted is not None and posted <= queue, "posted receives within the queue")
            used = s["memory_used"]
            check(used == njobs * want_w * want_c * (nranks + 2) + book,
                  "memory_used %d = the jobs' buffers + bookkeeping" % used)
            check(used <= s["memory_budget"], "memory_used within the default budget")
            bound = idle + (used >> 10) + 64 * total + 32 * 1024
            print("sumcastd: idle RSS %d kB, peak RSS %d kB, memory_used %d kB, bound %d kB; "
                  "window %d chunk %d, %d receives posted of a queue of %d; %d descriptors; %.1f s" %
                  (idle, hwm, used >> 10, bound, want_w, want_c, posted, queue, fds, elapsed))
            check(0 < hwm <= bound, "daemon peak RSS %d kB under %d kB" % (hwm, bound))
        check(d.poll() is None, "daemon still running")
    finally:
        if gen and gen.poll() is None:
            gen.kill()
            gen.wait()
        stop(d)
        log.close()
    if failures:
        print(open(os.path.join(tmp, "sumcastd.log")).read()[-3000:], file=sys.stderr)
        return 1
    shutil.rmtree(tmp, ignore_errors=True)
    print("PASS %s" % mode)
    return 0


if __name__ == "__main__":
    sys.exit(main())
