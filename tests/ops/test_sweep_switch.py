#!/usr/bin/env python3
"""[data] sweep = false (SUMCASTD_DATA_SWEEP), the switch that measures the sweep's price.

  test_sweep_switch.py SUMCASTD SC_JOBGEN

Two daemons on tcp;ofi_rxm, one at the default (sweep on) and one with
SUMCASTD_DATA_SWEEP=false. With the sweep on, the jobs' share of the receive
queue (sumcast_receive_queue, /metrics) is the provider's less the sweep's
receives (dp_sweep.c: a quarter of the queue, at most 256); with it off the
sweep keeps none, so the queue must be larger by that share, and the daemon
must warn at start that unexpected messages are left to the provider. Then a
2-rank job (sc_jobgen, every element of every result checked) runs on the
daemon without the sweep: its sums must be exact. Fails if the setting is
not read, does not reach the data thread, or breaks the data path. 77: no
tcp;ofi_rxm here.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

from daemon_http import clean_env, get, metric, start, stop

failures = []


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what, file=sys.stderr if not cond else sys.stdout)
    if not cond:
        failures.append(what)
    return cond


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    sumcastd, jobgen = sys.argv[1:]
    tmp = tempfile.mkdtemp(prefix="sc-sweep-")
    daemons = []
    try:
        on = start(sumcastd, tmp, "on", {})
        daemons.append(on[0])
        off = start(sumcastd, tmp, "off", {"SUMCASTD_DATA_SWEEP": "false"})
        daemons.append(off[0])
        if not check(on[2] is not None and off[2] is not None, "both daemons wrote their port files"):
            for n in ("on", "off"):
                print(open(os.path.join(tmp, n + ".log")).read(), file=sys.stderr)
            return 1
        time.sleep(0.3)
        q_on = metric(get(on[2], "/metrics"), 'sumcast_receive_queue{thread="0"}')
        q_off = metric(get(off[2], "/metrics"), 'sumcast_receive_queue{thread="0"}')
        log_on = open(os.path.join(tmp, "on.log")).read()
        if "unexpected messages are left to the provider" in log_on:
            print("SKIP: the daemon's provider has no sweep (not an rxm provider)")
            return 77
        print("receive queue: sweep on %s, off %s" % (q_on, q_off))
        check(q_on is not None and q_off is not None and 0 < q_off - q_on <= 256,
              "sweep off: the jobs' receive queue is larger by the sweep's share (%s vs %s)" % (q_off, q_on))
        log_off = open(os.path.join(tmp, "off.log")).read()
        check("sweep = false" in log_off, "sweep off: the daemon warns at start")
        check("sweep = false" not in log_on, "sweep on: no such warning")
        env = clean_env()
        try:
            g = subprocess.run([jobgen, "--aggs", "127.0.0.1:%d" % off[1], "--ranks", "2", "--jobs", "1",
                                "--iters", "20", "--seconds", "10", "--count", "65536", "--timeout-ms", "10000"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                               timeout=40)
            out, rc = g.stdout, g.returncode
        except subprocess.TimeoutExpired as e:
            out, rc = str(e.stdout), -1
        check(rc == 0, "sweep off: a 2-rank job's sums exact (sc_jobgen rc %d)" % rc)
        if rc:
            print(out, file=sys.stderr)
    finally:
        for d in daemons:
            stop(d)
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
