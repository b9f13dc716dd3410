"""sumcast-perf on one host (the acceptance run; the emulated cluster with a
real mpirun is tests/cluster/perf.sh): what a user sees when it works and
when it does not.

  1. usage: a bad flag, a bad size or type: exit 2 and a sentence, no launch;
  2. three ranks by the tcp rendezvous against two real sumcastd: every row
     right in every mode and collective, the verdict naming 2 aggregators
     used (PASS, or LOOK on the speed only: one host's cores are not a
     cluster's links), exit 0 exactly when PASS;
  3. a rank that never comes: rank 0 says which, within the bootstrap's
     bound, exit 1;
  4. no SUMCAST_AGGREGATORS: results right on the ring, the verdict LOOK,
     aggregators not used, exit 1;
  5. an aggregator address where nothing listens: the same, and the verdict
     quotes the plugin's reason.

usage: test_perf.py SUMCAST_PERF_TCP PLUGIN SUMCASTD"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
import daemon_http  # noqa: E402

PERF, PLUGIN, SUMCASTD = sys.argv[1:4]
FLAGS = ["--plugin", PLUGIN, "-b", "8", "-e", "256K", "-f", "32", "-n", "2", "-w", "1", "--json"]


def env_of(rank, n, port, aggs, boot=20):
    e = daemon_http.clean_env()
    for k in list(e):
        if k.startswith(("SUMCAST_", "OMPI_", "PMI_", "SLURM_", "MASTER_")):
            del e[k]
    e.update(SUMCAST_PERF_RANK=str(rank), SUMCAST_PERF_NRANKS=str(n), SUMCAST_PERF_RDV="127.0.0.1:%d" % port,
             SUMCAST_PROVIDER="tcp", SUMCAST_IFACE="127.0.0.1", SUMCAST_PERF_BOOT_TIMEOUT=str(boot))
    if aggs:
        e["SUMCAST_AGGREGATORS"] = aggs
    return e


def ranks(n, port, aggs, start=None, flags=FLAGS, timeout=240, boot=20):
    """Starts ranks [0, start or n) of n, the bootstrap bounded to boot s;
    their (exit code, stdout, stderr)."""
    procs = [subprocess.Popen([PERF] + flags, env=env_of(r, n, port, aggs, boot), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for r in range(start if start else n)]
    out = []
    for p in procs:
        try:
            o, e = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            o, e = p.communicate()
            raise AssertionError("a rank did not end within %d s: %s" % (timeout, e[-2000:]))
        out.append((p.returncode, o, e))
    return out


def verdict(text):
    v = [line for line in text.splitlines() if line.startswith("verdict")]
    assert len(v) == 1, "verdict lines: %s\n%s" % (v, text)
    return v[0]


def rows(text):
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def main():
    for f in (PERF, PLUGIN, SUMCASTD):
        if not os.path.exists(f):
            print("SKIP: %s not built" % f)
            return 77
    # 1. usage
    for bad in (["-b", "2K", "-e", "1K"], ["--modes", "ring,nope"], ["-d", "fp8"], ["-e", "0"], ["extra"]):
        p = subprocess.run([PERF] + bad, capture_output=True, text=True, timeout=10)
        assert p.returncode == 2 and "sumcast-perf" in p.stderr, (bad, p.returncode, p.stderr)
    p = subprocess.run([PERF, "--help"], capture_output=True, text=True, timeout=10)
    assert p.returncode == 0 and "mpirun -np N sumcast-perf" in p.stdout, p.stdout
    print("perf: usage errors exit 2 with a sentence; --help works without a launcher")

    tmp = tempfile.mkdtemp(prefix="sc-perf.")
    ds = []
    try:
        aggs = []
        for i in range(2):
            d, ctl, _ = daemon_http.start(SUMCASTD, tmp, "agg%d" % i, {}, provider="tcp;ofi_rxm")
            ds.append(d)
            assert ctl, "sumcastd %d did not start: %s" % (i, open(os.path.join(tmp, "agg%d.log" % i)).read())
            aggs.append("127.0.0.1:%d" % ctl)
        port = 29700 + os.getpid() % 200

        # 2. it works
        t0 = time.monotonic()
        res = ranks(3, port, ",".join(aggs))
        for r, (rc, o, e) in enumerate(res):
            assert rc in (0, 1) and "sumcast-perf: rank" not in e, "rank %d exited %d: %s\n%s" % (r, rc, o, e[-3000:])
        text = res[0][1]
        rs = rows(text)
        assert {x["coll"] for x in rs} == {"allreduce", "reducescatter", "allgather"}, text
        assert {x["mode"] for x in rs} == {"ring", "aggs", "auto"}, text
        for x in rs:
            assert not x.get("failed") and x["wrong"] == 0 and x["nodes"] == 3, x
        assert all("plan_us" in x for x in rs if x["coll"] == "allreduce"), text
        v = verdict(text)
        # on one host the speed is the cores', not the links': only the
        # mechanics are asserted here (the emulated cluster asserts the
        # speed-up against the model)
        assert (v.startswith("verdict: PASS") or v.startswith("verdict: LOOK: results right")) and \
            "2 aggregators used" in v, v
        assert (res[0][0] == 0) == v.startswith("verdict: PASS"), (res[0][0], v)
        assert "tcp rendezvous at 127.0.0.1:%d" % port in text, text
        assert not res[1][1] and not res[2][1], "ranks other than 0 printed rows"
        print("perf: 3 ranks, %d rows right, %.1f s; %s" % (len(rs), time.monotonic() - t0, v))

        # 3. a rank that never comes
        t0 = time.monotonic()
        res = ranks(3, port + 1, ",".join(aggs), start=2, timeout=60, boot=5)
        rc, o, e = res[0]
        assert rc == 1 and "rank 2" in e and "never did" in e, (rc, e)
        assert time.monotonic() - t0 < 20, "the bootstrap's bound (5 s) was not kept"
        print("perf: a missing rank: %s" % e.strip().splitlines()[-1])

        # 4. no aggregators
        res = ranks(2, port + 2, None, flags=FLAGS + ["--coll", "allreduce"])
        rc, o, e = res[0]
        v = verdict(o)
        assert rc == 1 and v.startswith("verdict: LOOK") and "not used" in v, (rc, v)
        assert all(x["wrong"] == 0 for x in rows(o)), o
        assert "SUMCAST_AGGREGATORS is not set" in e, e
        print("perf: no aggregators: %s" % v)

        # 5. an aggregator where nothing listens
        res = ranks(2, port + 3, "127.0.0.1:1", flags=FLAGS + ["--coll", "allreduce"])
        rc, o, e = res[0]
        v = verdict(o)
        assert rc == 1 and v.startswith("verdict: LOOK") and "not used" in v and "127.0.0.1:1" in v, (rc, v, e)
        assert all(x["wrong"] == 0 for x in rows(o)), o
        print("perf: an unreachable aggregator: %s" % v)
    finally:
        for d in ds:
            daemon_http.stop(d)
    shutil.rmtree(tmp, ignore_errors=True)  # kept, with the daemons' logs, when a check failed
    return 0


if __name__ == "__main__":
    sys.exit(main())
