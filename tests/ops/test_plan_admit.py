#!/usr/bin/env python3
"""sumcastctl plan and the daemons agree on admission (common/admit.c).

Two real sumcastd aggregators (tcp;ofi_rxm on 127.0.0.1) are started at
small, plan-sized settings; sumcastctl plan is given the same sumcastd.conf
(--daemon-config) and the shape sc_jobgen then plays: H jobs of 2 ranks
(plan: --nodes 2 --heads H --aggs 2), window 8, chunk 256 KiB. For each
shape plan's verdict must be what the daemons do:
  admitted   every job joins both daemons, and each daemon's memory and
             posted receives (/stats, /metrics) are plan's per aggregator;
  refused    a JOIN is refused by the rule plan names, with the daemon's
             own sentence for it ("max-jobs is 2", "more than
             max-memory-share", "byte budget are free", "receive queue
             has room"), the daemon then serving as many jobs, holding as
             many bytes, or as many receives, as plan says it took.
Shapes: max-jobs 2 (2 jobs in, the 3rd refused); memory-budget 20M (2 in,
the 3rd over the budget); memory-budget 10M (one job over
max-memory-share); a provider queue of 64 (FI_OFI_RXM_RX_SIZE: 3 jobs of
16 receives in, the 4th finds no room).

usage: test_plan_admit.py SUMCASTD SC_JOBGEN SUMCASTCTL   (77: not built)"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemon_http  # noqa: E402

CHUNK, WINDOW, RANKS = 256 << 10, 8, 2
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)
    return cond


def plan(conf, heads, rx_queue=None):
    args = [CTL, "plan", "--json", "--nodes", str(RANKS), "--heads", str(heads), "--aggs", "2",
            "--link-gbps", "100", "--agg-link-gbps", "100", "--bytes", "1M", "--chunk", str(CHUNK),
            "--window", str(WINDOW), "--daemon-config", conf]
    if rx_queue:
        args += ["--rx-queue", str(rx_queue)]
    p = subprocess.run(args, capture_output=True, text=True, timeout=20)
    if not check(p.returncode == 0, f"plan {' '.join(args[2:])}: exit {p.returncode}: {p.stderr.strip()}"):
        return None
    return json.loads(p.stdout.splitlines()[0])


def stats(port):
    return json.loads(daemon_http.get(port, "/stats"))


def jobgen(ctl_ports, jobs, seconds):
    """sc_jobgen: jobs x 2 ranks in one process, joining both daemons."""
    aggs = ",".join("127.0.0.1:%d" % p for p in ctl_ports)
    return subprocess.Popen([JOBGEN, "--aggs", aggs, "--ranks", str(RANKS), "--jobs", str(jobs), "--procs", "1",
                             "--seconds", str(seconds), "--count", "65536", "--chunk", str(CHUNK),
                             "--window", str(WINDOW), "--timeout-ms", "5000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=daemon_http.clean_env())


# the daemon's sentence for each rule (daemon/ctl_admit.c)
SENTENCE = {
    "max-jobs": r"daemon serves (\d+) jobs, max-jobs is \d+",
    "memory-share": r"needs (\d+) bytes .*more than max-memory-share",
    "memory-budget": r"needs (\d+) bytes .*, (\d+) of the (\d+) byte budget are free",
    "receive-queue": r"posts (\d+) receives .*no data thread's receive queue has room[^(]* \(at most (\d+) of (\d+) free",
}


def scenario(tmp, name, conf_extra, heads_in, heads_out, rule, env=None, rx_queue=None):
    daemons, ctl_ports, http_ports = [], [], []
    try:
        for i in range(2):
            d, c, h = daemon_http.start(SUMCASTD, tmp, "%s%d" % (name, i), env or {}, provider="tcp;ofi_rxm",
                                        conf_extra="[fabric]\nnode = 127.0.0.1\n" + conf_extra)
            daemons.append(d)
            if not check(c is not None, f"{name}: daemon {i} did not start: "
                         + open(os.path.join(tmp, "%s%d.log" % (name, i))).read()[-2000:]):
                return
            ctl_ports.append(c)
            http_ports.append(h)
        conf = os.path.join(tmp, name + "0.conf")
        if rx_queue:
            # the queue the daemon's jobs may use: the provider's less the sweep's
            q = daemon_http.metric(daemon_http.get(http_ports[0], "/metrics").replace('{thread="0"}', ""),
                                   "sumcast_receive_queue")
            keep = min(rx_queue // 4, 256)
            if q != rx_queue - keep:
                print(f"SKIP {name}: the provider's receive queue is {q}, not {rx_queue} - {keep} "
                      "(FI_OFI_RXM_RX_SIZE not taken)")
                return

        # admitted: every job in, memory and receives as plan says
        if heads_in:
            want = plan(conf, heads_in, rx_queue)
            if not want:
                return
            check(want["admitted"] is True and want["jobs_admitted"] == heads_in,
                  f"{name}: plan refuses {heads_in} jobs: {want['refused']!r}")
            g = jobgen(ctl_ports, heads_in, 3)
            seen = None
            end = time.monotonic() + 30
            while time.monotonic() < end and g.poll() is None:
                s = [stats(p) for p in http_ports]
                if all(len(x["jobs"]) == heads_in and all(j["state"] == "ready" for j in x["jobs"]) for x in s):
                    seen = s
                    break
                time.sleep(0.05)
            out, err = g.communicate(timeout=60)
            check(g.returncode == 0, f"{name}: {heads_in} jobs: sc_jobgen exit {g.returncode}: {err.strip()[-800:]}")
            if check(seen is not None, f"{name}: the daemons never served {heads_in} jobs at once"):
                for i, x in enumerate(seen):
                    check(x["memory_used"] == want["agg_mem_bytes"],
                          f"{name}: daemon {i} holds {x['memory_used']} bytes, plan says {want['agg_mem_bytes']}")
                    posted = sum(j["posted_receives"] for j in x["jobs"])
                    check(posted == want["agg_posted_recvs"],
                          f"{name}: daemon {i} posts {posted} receives, plan says {want['agg_posted_recvs']}")
            # wait until the daemons let the jobs go
            end = time.monotonic() + 20
            while time.monotonic() < end and any(stats(p)["jobs"] for p in http_ports):
                time.sleep(0.05)

        # one job more: refused by the rule plan names
        want = plan(conf, heads_out, rx_queue)
        if not want:
            return
        check(want["admitted"] is False and want["refused"] == rule,
              f"{name}: plan for {heads_out} jobs says refused {want['refused']!r}, want {rule!r}")
        g = jobgen(ctl_ports, heads_out, 3)
        out, err = g.communicate(timeout=60)
        check(g.returncode == 1, f"{name}: {heads_out} jobs: sc_jobgen exit {g.returncode}, want 1 (a refusal)")
        logs = "".join(open(os.path.join(tmp, "%s%d.log" % (name, i))).read() for i in range(2))
        m = re.search(SENTENCE[want["refused"]], err) if want["refused"] in SENTENCE else None
        if not check(m is not None, f"{name}: the daemons did not refuse by {want['refused']!r}: "
                     f"sc_jobgen says {err.strip()[-600:]!r}"):
            return
        per_job = want["agg_mem_bytes"] // want["jobs_per_agg"]
        if rule == "max-jobs":
            check(int(m.group(1)) == want["jobs_admitted"],
                  f"{name}: the daemon served {m.group(1)} jobs, plan says {want['jobs_admitted']}")
        elif rule == "memory-share":
            check(int(m.group(1)) == per_job and want["jobs_admitted"] == 0,
                  f"{name}: a job needs {m.group(1)} bytes, plan says {per_job}")
        elif rule == "memory-budget":
            need, free, budget = (int(m.group(k)) for k in (1, 2, 3))
            check(need == per_job and free == budget - want["jobs_admitted"] * per_job,
                  f"{name}: a job needs {need} bytes with {free} of {budget} free; plan: {per_job} each, "
                  f"{want['jobs_admitted']} admitted")
        elif rule == "receive-queue":
            recvs, free, queue = (int(m.group(k)) for k in (1, 2, 3))
            per = want["agg_posted_recvs"] // want["jobs_per_agg"]
            check(recvs == per and free == queue - want["jobs_admitted"] * per,
                  f"{name}: a job posts {recvs} with {free} of {queue} free; plan: {per} each, "
                  f"{want['jobs_admitted']} admitted")
        check(re.search(SENTENCE[rule], logs) is not None, f"{name}: no {rule} refusal in the daemons' logs")
    finally:
        for d in daemons:
            daemon_http.stop(d)


def main():
    with tempfile.TemporaryDirectory(prefix="sumcast-plan-admit.") as tmp:
        scenario(tmp, "jobs", "[job]\nmax-jobs = 2\n", 2, 3, "max-jobs")
        scenario(tmp, "budget", "[job]\nmemory-budget = 20M\n", 2, 3, "memory-budget")
        scenario(tmp, "share", "[job]\nmemory-budget = 10M\n", 0, 1, "memory-share")
        scenario(tmp, "queue", "", 3, 4, "receive-queue", env={"FI_OFI_RXM_RX_SIZE": "64"}, rx_queue=64)
    if failures:
        print(f"{len(failures)} checks failed")
        return 1
    print("ok: plan's admission verdicts are the daemons'")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 4 or not all(sys.argv[1:]):
        print("SKIP: sumcastd, sc_jobgen or sumcastctl not built")
        sys.exit(77)
    SUMCASTD, JOBGEN, CTL = sys.argv[1:]
    sys.exit(main())
