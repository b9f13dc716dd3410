#!/usr/bin/env python3
"""[data] result-one-per-rank (SUMCASTD_DATA_RESULT_ONE_PER_RANK): at most one
result send in flight per rank.

  test_result_hold.py SUMCASTD SC_JOBGEN PROVIDER

Two daemons on PROVIDER (shm, tcp), one at the default (the hold on) and one
with SUMCASTD_DATA_RESULT_ONE_PER_RANK=false. On each a 4-rank job
(sc_jobgen, every element of every result checked) runs allreduces of 4 MiB
in 64 KiB chunks with a window of 8, so several results of a rank are due
at once. Both jobs' sums must be exact. On shm the daemon with the hold
must have held sends (sumcast_result_sends_held_total > 0: results of later
chunks waited for the rank's earlier send) and the one without none; on any
other provider neither holds one (the hold is for shm's lock). Fails if the
setting is not read or does not reach the data thread, if the hold never
engages on shm or engages elsewhere, or if a held send is lost (the job
stalls: sc_jobgen times out) or goes to the wrong place (a wrong sum). That
jobs of different windows on one thread are not held is
functional/test_daemon_multi_shm's weights mode. 77: the provider is not
available here.
"""
import os
import shutil
import subprocess
import sys
import tempfile

from daemon_http import clean_env, get, metric, start, stop

failures = []


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what, file=sys.stderr if not cond else sys.stdout)
    if not cond:
        failures.append(what)
    return cond


def job(jobgen, provider, port):
    try:
        g = subprocess.run([jobgen, "--aggs", "127.0.0.1:%d" % port, "--provider", provider,
                            "--ranks", "4", "--jobs", "1", "--iters", "8", "--seconds", "20",
                            "--count", str(1 << 20), "--chunk", "65536", "--window", "8",
                            "--timeout-ms", "10000"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=clean_env(),
                           timeout=45)
        return g.returncode, g.stdout
    except subprocess.TimeoutExpired as e:
        return -1, str(e.stdout)


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    sumcastd, jobgen, provider = sys.argv[1:]
    tmp = tempfile.mkdtemp(prefix="sc-hold-")
    daemons = []
    try:
        on = start(sumcastd, tmp, "on", {}, provider)
        daemons.append(on[0])
        off = start(sumcastd, tmp, "off", {"SUMCASTD_DATA_RESULT_ONE_PER_RANK": "false"}, provider)
        daemons.append(off[0])
        if on[2] is None or off[2] is None:
            logs = "".join(open(os.path.join(tmp, n + ".log")).read() for n in ("on", "off"))
            if "no libfabric provider" in logs:
                print("SKIP: provider %s not available here" % provider)
                return 77
            check(False, "both daemons wrote their port files")
            print(logs, file=sys.stderr)
            return 1
        for name, d in (("on", on), ("off", off)):
            rc, out = job(jobgen, provider, d[1])
            if rc == 77:
                print("SKIP: sc_jobgen: provider %s not available here" % provider)
                return 77
            check(rc == 0, "hold %s: a 4-rank job's sums exact (sc_jobgen rc %d)" % (name, rc))
            if rc:
                print(out, file=sys.stderr)
        held_on = metric(get(on[2], "/metrics"), "sumcast_result_sends_held_total")
        held_off = metric(get(off[2], "/metrics"), "sumcast_result_sends_held_total")
        print("result sends held: hold on %s, off %s" % (held_on, held_off))
        if provider == "shm":
            check(held_on is not None and held_on > 0, "hold on: result sends were held (%s)" % held_on)
        else:
            check(held_on == 0, "hold on, %s: no result send held (%s)" % (provider, held_on))
        check(held_off == 0, "hold off: no result send held (%s)" % held_off)
    finally:
        for d in daemons:
            stop(d)
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
