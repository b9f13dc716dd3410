#!/usr/bin/env python3
"""Checks a real Prometheus server that scraped sumcastd daemons while a job ran.

  prom_check.py URL job RULES.yml RANKS INSTANCE...
  prom_check.py URL down INSTANCE

job:  waits (20 s at most) until the server has scraped every INSTANCE after
      the job ended (sumcast_jobs_finished_total 1), then checks:
      * /api/v1/targets: one active target per INSTANCE, job "sumcast",
        health up, no scrape error;
      * per INSTANCE, the job as the daemon saw it: RANKS joins, one job
        started and finished, RANKS ranks at the peak and 0 now, bytes in and
        out and chunks reduced > 0 (and moving: increase over the last
        minute), a straggler wait p50 > 1 ms (one rank sleeps before each
        call), receives posted at the peak within the receive queue, job
        memory at the peak within the budget, no abort, refusal, stop or
        error; the process_* figures sane (resident > 1 MB, 0 < open fds <
        limit, started in the last 10 minutes, CPU spent);
      * every metric RULES.yml names answers a query for every INSTANCE;
      * /api/v1/rules: every alert of RULES.yml loaded and evaluated without
        error; /api/v1/alerts: none firing, none pending but those a loaded
        host may set off (stragglers, busy threads).
down: waits (15 s at most) until SumcastAggregatorDown is pending or firing
      for INSTANCE (the daemon was stopped): the rule matches the real `up`.
Exit 0 pass, 1 fail.
"""
import json
import re
import sys
import time
import urllib.parse
import urllib.request

LOAD_DEPENDENT = {"SumcastStragglingRanks", "SumcastDataThreadsSaturated"}


def get(url, path, params=None):
    q = "?" + urllib.parse.urlencode(params) if params else ""
    with urllib.request.urlopen(url + path + q, timeout=10) as r:
        return json.load(r)


def query(url, q):
    """{instance: value} of an instant query (one series per instance)."""
    r = get(url, "/api/v1/query", {"query": q})
    if r.get("status") != "success":
        raise RuntimeError("%s: %r" % (q, r))
    return {s["metric"].get("instance", ""): float(s["value"][1]) for s in r["data"]["result"]}


def wait_for(fn, seconds):
    deadline = time.monotonic() + seconds
    while True:
        v = fn()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(0.25)


def rule_names(path):
    return re.findall(r"^\s*- alert:\s*(\w+)", open(path).read(), re.M)


def rule_metrics(path):
    text = open(path).read()
    names = set(re.findall(r"\b((?:sumcast|process)_[a-z_]+)", text))
    return sorted(names | {"up"})


def check_job(url, rules, ranks, instances):
    bad = []
    want = set(instances)

    def finished():
        try:
            v = query(url, "sumcast_jobs_finished_total")
        except (OSError, RuntimeError):
            return False
        return all(v.get(i) == 1 for i in want)
    if not wait_for(finished, 20):
        bad.append("the server has no sumcast_jobs_finished_total 1 for %s: %r"
                   % (sorted(want), query(url, "sumcast_jobs_finished_total")))

    t = get(url, "/api/v1/targets")["data"]["activeTargets"]
    seen = {x["labels"]["instance"]: x for x in t}
    if set(seen) != want:
        bad.append("targets %s, want %s" % (sorted(seen), sorted(want)))
    for i, x in seen.items():
        if x["health"] != "up" or x["lastError"] or x["labels"].get("job") != "sumcast":
            bad.append("target %s: health %s, error %r, job %s" % (i, x["health"], x["lastError"],
                                                                  x["labels"].get("job")))

    checks = [
        ("up", lambda v: v == 1, "1"),
        ("sumcast_joins_total", lambda v: v == ranks, "%d" % ranks),
        ("sumcast_jobs_started_total", lambda v: v == 1, "1"),
        ("sumcast_jobs_finished_total", lambda v: v == 1, "1"),
        ("max_over_time(sumcast_ranks[2m])", lambda v: v == ranks, "%d" % ranks),
        ("max_over_time(sumcast_jobs[2m])", lambda v: v == 1, "1"),
        ("sumcast_ranks", lambda v: v == 0, "0 after the job"),
        ("sumcast_jobs", lambda v: v == 0, "0 after the job"),
        ("sumcast_received_bytes_total", lambda v: v > 0, "> 0"),
        ("sumcast_sent_bytes_total", lambda v: v > 0, "> 0"),
        ("sumcast_chunks_reduced_total", lambda v: v > 0, "> 0"),
        ("increase(sumcast_received_bytes_total[2m])", lambda v: v > 0, "> 0"),
        ("sumcast_reduce_duration_seconds_count - sumcast_chunks_reduced_total", lambda v: v == 0, "0"),
        ("histogram_quantile(0.5, sum by (instance, le) (increase(sumcast_straggler_wait_seconds_bucket[2m])))",
         lambda v: v > 0.001, "> 1 ms"),
        ("max by (instance) (max_over_time(sumcast_posted_receives[2m]))", lambda v: v > 0, "> 0"),
        ("max by (instance) (max_over_time(sumcast_posted_receives[2m]) - sumcast_receive_queue)",
         lambda v: v < 0, "< 0: posted within the queue"),
        ("max_over_time(sumcast_memory_used_bytes[2m])", lambda v: v > 0, "> 0"),
        ("max_over_time(sumcast_memory_used_bytes[2m]) / sumcast_memory_budget_bytes", lambda v: 0 < v <= 1,
         "within the budget"),
        ("sum by (instance) (sumcast_jobs_aborted_total)", lambda v: v == 0, "0"),
        ("sum by (instance) (sumcast_joins_refused_total)", lambda v: v == 0, "0"),
        ("sumcast_shutdown_joins_refused_total + sumcast_shutdown_jobs_aborted_total", lambda v: v == 0, "0"),
        ("sum by (instance) (sumcast_errors_total)", lambda v: v == 0, "0"),
        ("sumcast_jobs_drained_total + sumcast_jobs_rejoined_total", lambda v: v == 0, "0"),
        ("sumcast_draining", lambda v: v == 0, "0"),
        ("process_resident_memory_bytes", lambda v: v > 1e6, "> 1 MB"),
        ("process_virtual_memory_bytes - process_resident_memory_bytes", lambda v: v > 0, "> 0"),
        ("process_open_fds", lambda v: v > 3, "> 3"),
        ("process_max_fds - process_open_fds", lambda v: v > 0, "> 0"),
        ("time() - process_start_time_seconds", lambda v: 0 <= v < 600, "in [0, 600) s"),
        ("process_start_time_seconds - sumcast_start_time_seconds", lambda v: abs(v) < 5, "within 5 s"),
        ("increase(process_cpu_seconds_total[2m])", lambda v: v > 0, "> 0"),
    ]
    for q, ok, what in checks:
        try:
            v = query(url, q)
        except (OSError, RuntimeError) as e:
            bad.append("%s: %s" % (q, e))
            continue
        for i in sorted(want):
            if i not in v:
                bad.append("%s: no value for %s" % (q, i))
            elif not ok(v[i]):
                bad.append("%s on %s: %g, want %s" % (q, i, v[i], what))
    print("prometheus: %d checks of the job on %d daemons" % (len(checks), len(want)))

    for m in rule_metrics(rules):
        v = query(url, "count by (instance) (%s)" % m)
        if set(v) != want:
            bad.append("the rules use %s; the server has it for %s, not %s" % (m, sorted(v), sorted(want)))

    names = rule_names(rules)
    loaded = {}
    for g in get(url, "/api/v1/rules")["data"]["groups"]:
        for r in g["rules"]:
            if r["type"] == "alerting":
                loaded[r["name"]] = r
    for n in names:
        r = loaded.get(n)
        if not r:
            bad.append("alert %s not loaded" % n)
        elif r.get("health") != "ok" or r.get("lastError"):
            bad.append("alert %s: health %s, %s" % (n, r.get("health"), r.get("lastError")))
    for a in get(url, "/api/v1/alerts")["data"]["alerts"]:
        n = a["labels"]["alertname"]
        if a["state"] == "firing" or n not in LOAD_DEPENDENT:
            bad.append("alert %s %s after a clean job: %r" % (n, a["state"], a["labels"]))
        else:
            print("note: %s %s (a loaded host)" % (n, a["state"]))
    print("alerts: %d rules loaded and evaluated, none firing" % len(names))
    return bad


def check_down(url, instance):
    def down():
        for a in get(url, "/api/v1/alerts")["data"]["alerts"]:
            if a["labels"].get("alertname") == "SumcastAggregatorDown" and \
                    a["labels"].get("instance") == instance:
                return a["state"]
        return None
    state = wait_for(down, 15)
    if not state:
        return ["SumcastAggregatorDown not pending for %s 15 s after it stopped" % instance]
    print("alerts: SumcastAggregatorDown %s for %s" % (state, instance))
    return []


def main():
    a = sys.argv[1:]
    if len(a) >= 5 and a[1] == "job":
        bad = check_job(a[0], a[2], int(a[3]), a[4:])
    elif len(a) == 3 and a[1] == "down":
        bad = check_down(a[0], a[2])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    for b in bad:
        print("FAIL:", b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
