"""sumcastctl's fleet view against several real daemons with a real job
(docs/operations.md, "A fleet in one view").

Three sumcastd (ports of their choice, tcp;ofi_rxm on 127.0.0.1), one
sc_jobgen job of 4 ranks over all three, labelled, rank 2 sleeping before
each call so it is the straggler. While it runs:
  1. one daemon's /stats and `sumcastctl jobs` (one daemon) carry the label;
  2. `sumcastctl -D all three jobs`: one row for the job, by id and label,
     on 3 aggregators, 4/4 ranks, rank 2 named the straggler over all of
     them; one row per aggregator; exit 0; --json the same;
  3. with an address nobody listens at and one that accepts but never
     answers added: both are rows saying so, the job is still shown from
     the three others, exit 2, within the timeout (not one per daemon
     after another beyond it);
  4. `-D ... status` one row per daemon; `-D ... top -n 2` two frames with
     rates; a daemon killed between frames is a row in the next one;
  5. -A takes SUMCAST_AGGREGATORS (control ports) and asks each at --port.

Usage: test_fleet.py SUMCASTD SC_JOBGEN SUMCASTCTL
Exit 0 pass, 1 fail, 77 skip."""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemon_http  # noqa: E402

fails = []


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        fails.append(what)


def ctl(args, timeout=30):
    t0 = time.monotonic()
    r = subprocess.run([sumcastctl] + args, capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout, r.stderr, time.monotonic() - t0


def silent_server():
    """A port that accepts and never answers."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    held = []

    def run():
        while True:
            try:
                c, _ = s.accept()
            except OSError:
                return
            held.append(c)
    threading.Thread(target=run, daemon=True).start()
    return s, s.getsockname()[1]


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


if len(sys.argv) < 4 or not sys.argv[3]:
    print("SKIP: sumcastctl not built")
    sys.exit(77)
sumcastd, jobgen, sumcastctl = sys.argv[1:4]
tmp = tempfile.mkdtemp(prefix="sumcast-fleet.")
daemons = []
job = None
try:
    for i in range(3):
        d, c, h = daemon_http.start(sumcastd, tmp, "d%d" % i, {}, provider="tcp;ofi_rxm")
        if c is None:
            print("SKIP: daemon %d did not start (tcp;ofi_rxm?)" % i)
            sys.exit(77)
        daemons.append((d, c, h))
    aggs = ",".join("127.0.0.1:%d" % c for _, c, _ in daemons)
    https = ",".join("127.0.0.1:%d" % h for _, _, h in daemons)
    job = subprocess.Popen([jobgen, "--aggs", aggs, "--ranks", "4", "--seconds", "12",
                            "--count", "262144", "--slow-rank", "2", "--slow-us", "20000",
                            "--job-id", "0xf1ee7", "--label", "ops-fleet-7"],
                           stdout=open(os.path.join(tmp, "jobgen.log"), "w"),
                           stderr=subprocess.STDOUT)
    # serving on all three, and rank 2 counted last a few times on each
    end = time.monotonic() + 20
    ready = False
    while time.monotonic() < end and job.poll() is None and not ready:
        ready = True
        for _, _, h in daemons:
            st = json.loads(daemon_http.get(h, "/stats"))
            jb = [j for j in st["jobs"] if j["id"] == "0xf1ee7"]
            ready &= bool(jb) and jb[0]["state"] == "ready" and \
                sum(r["last_count"] for r in jb[0]["ranks"]) >= 20
        time.sleep(0.1)
    check(ready, "the job serves on all three daemons")

    # 1. the label on one daemon
    st = json.loads(daemon_http.get(daemons[0][2], "/stats"))
    check([j["label"] for j in st["jobs"]] == ["ops-fleet-7"], "/stats carries the job's label")
    rc, out, err, _ = ctl(["-p", str(daemons[0][2]), "jobs"])
    check(rc == 0 and "LABEL" in out.splitlines()[0] and "ops-fleet-7" in out,
          "sumcastctl jobs (one daemon) shows the label:\n" + out)
    rc, out, err, _ = ctl(["-p", str(daemons[0][2]), "-j", "jobs"])
    check(rc == 0 and json.loads(out)[0]["label"] == "ops-fleet-7", "jobs --json: label")
    metrics = daemon_http.get(daemons[0][2], "/metrics")
    check("ops-fleet-7" not in metrics, "the label is no metric label")

    # 2. the fleet, all up
    rc, out, err, _ = ctl(["-D", https, "jobs"])
    print(out)
    rows = [ln for ln in out.splitlines() if ln.startswith("0x")]
    check(rc == 0, "all up: exit 0 (got %d: %s)" % (rc, err))
    check(len(rows) == 1 and rows[0].split()[:5] == ["0xf1ee7", "ops-fleet-7", "ready", "4/4", "3"],
          "one row: the job by id and label, ready, 4/4 ranks, 3 aggregators")
    check(len(rows) == 1 and "rank 2" in rows[0], "the straggler over all aggregators is rank 2")
    check(sum(1 for ln in out.splitlines() if ln.startswith("  on 127.0.0.1:")) == 3,
          "one row per aggregator")
    rc, out, err, _ = ctl(["-D", https, "-j", "jobs"])
    j = json.loads(out)
    fj = [x for x in j["jobs"] if x["id"] == "0xf1ee7"]
    check(rc == 0 and len(fj) == 1 and fj[0]["label"] == "ops-fleet-7" and
          fj[0]["slowest_rank"]["rank"] == 2 and len(fj[0]["aggregators"]) == 3 and
          fj[0]["slowest_rank"]["last_share"] > 0.5,
          "--json: the job, its straggler rank 2 (most often last), its 3 aggregators")

    # 3. one address nobody listens at, one that never answers
    silent, sport = silent_server()
    dead = closed_port()
    fleet = https + ",127.0.0.1:%d,127.0.0.1:%d" % (dead, sport)
    rc, out, err, took = ctl(["-D", fleet, "-t", "1", "jobs"])
    print(out)
    check(rc == 2, "a daemon down: exit 2 (got %d)" % rc)
    check("127.0.0.1:%d DOWN: " % dead in out and "127.0.0.1:%d DOWN: " % sport in out,
          "the closed and the silent address are rows saying so")
    check("timed out" in out.split("127.0.0.1:%d DOWN: " % sport)[-1].splitlines()[0].lower() or
          "timeout" in out.split("127.0.0.1:%d DOWN: " % sport)[-1].splitlines()[0].lower(),
          "the silent one: timed out")
    check(any(ln.startswith("0xf1ee7 ") and " 3 " in ln for ln in out.splitlines()),
          "the job still shown from the three that answered")
    check(took < 5, "within the timeout (%.1f s for a 1 s timeout)" % took)
    check("2 of 5 daemons did not answer" in err, "stderr says how many did not answer: " + err)

    # 4. status and top
    rc, out, err, _ = ctl(["-D", fleet, "-t", "1", "-i", "0", "status"])
    print(out)
    check(rc == 2 and sum(1 for ln in out.splitlines() if " ok " in ln) == 3 and
          out.count(" DOWN ") == 2, "status: 3 rows ok, 2 rows DOWN, exit 2")
    rc, out, err, _ = ctl(["-D", https, "-i", "0.5", "-n", "2", "top"])
    frames = out.count("sumcastctl top - ")
    check(rc == 0 and frames == 2 and "IN/s" in out and "ops-fleet-7" in out,
          "top -n 2: two frames with rates and the job (exit %d)" % rc)
    top = subprocess.Popen([sumcastctl, "-D", https, "-i", "1", "-n", "3", "-t", "1", "-j", "top"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.3)  # after the first frame, before the second
    daemons[2][0].kill()
    daemons[2][0].wait()
    out, err = top.communicate(timeout=30)
    lines = [json.loads(x) for x in out.splitlines() if x.strip()]
    check(top.returncode == 2 and len(lines) == 3 and
          [d["up"] for d in lines[-1]["daemons"]] == [True, True, False],
          "top: a daemon killed between frames is a row that says so, exit 2")

    # 5. -A: SUMCAST_AGGREGATORS' daemons, each address asked at --port
    # (here all three are 127.0.0.1: one row, the daemon whose HTTP port
    # that is)
    rc, out, err, _ = ctl(["-A", aggs, "-p", str(daemons[0][2]), "-t", "1", "-j", "status"])
    ds = json.loads(out)["daemons"]
    check(rc == 0 and [d["endpoint"] for d in ds] == ["127.0.0.1:%d" % daemons[0][2]] and ds[0]["up"],
          "-A: the list's addresses, each asked at --port, once")
    silent.close()
finally:
    if job:
        try:
            job.wait(timeout=30)
        except subprocess.TimeoutExpired:
            job.kill()
            job.wait()
    for d, _, _ in daemons:
        daemon_http.stop(d)
if job and job.returncode != 0 and not fails:
    print("note: sc_jobgen exit %d (a daemon was killed under it)" % job.returncode)
print("fleet: %d failed" % len(fails))
if fails:
    print("fleet: the daemons' and sc_jobgen's logs are in %s" % tmp)
else:
    shutil.rmtree(tmp, ignore_errors=True)
sys.exit(1 if fails else 0)
