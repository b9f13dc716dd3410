#!/bin/bash
# tests/cluster/smoke.sh: short run of the emulated cluster (bench/cluster/run), < 60 s.
#  1. W=2, A=1, MPI allreduce 64 KiB..1 MiB over tbf-shaped veth links: rows come out,
#     results are correct (wrong == 0), and nothing of the run is left (netns, veth, /tmp).
#  2. the same run stopped (SIGTERM; a background job of a script ignores SIGINT) while its
#     MPI ranks run: it stops within seconds and still leaves nothing.
#  3. when sumcastd is built ($SUMCAST_BUILD_DIR or build/): daemons start in aggregator
#     namespaces, listen on their own address, and stop; run's Sumcast plumbing with a
#     stand-in harness.
#  5. when the plugin's harness is built too: one real Sumcast mode (agg, W=2, A=1, 1 MiB, f32)
#     with the ranks in worker namespaces: correct results, in-band link rates, cleaned up.
# Exit 0 pass, 1 fail, 77 skipped (not root, no netns/veth/tbf, no MPI) with the reason.
set -u -o pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
RUN="$ROOT/bench/cluster/run"
export SC_PREFIX="scsm$$"          # the run's namespaces are $SC_PREFIX-*: we can check them
TMP=$(mktemp -d /tmp/sc-smoke.XXXXXX)
BGPID=""
cleanup() {
  [[ -n $BGPID ]] && kill -TERM "$BGPID" 2>/dev/null && wait "$BGPID" 2>/dev/null
  # Belt and braces: remove whatever a failed run left (only names of this test).
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^${SC_PREFIX}-"); do
    pids=$(ip netns pids "$ns" 2>/dev/null); [[ -n $pids ]] && kill -KILL $pids 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
  ip link del "${SC_PREFIX}r" 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
T0=$SECONDS
fail() { echo "FAIL: $*" >&2; exit 1; }

leftovers() {
  ip netns list 2>/dev/null | awk '{print $1}' | grep "^${SC_PREFIX}-"
  ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -x "${SC_PREFIX}r"
  ls -d /tmp/"${SC_PREFIX}".* 2>/dev/null
}

if [[ $(id -u) != 0 ]]; then echo "SKIP: not root (netns, veth and tc need root)"; exit 77; fi
if ! command -v mpirun >/dev/null; then echo "SKIP: mpirun not found (openmpi-bin)"; exit 77; fi

# 1. a short MPI run
"$RUN" --workers 2 --aggs 1 --link-mbit 500 --min-bytes 64K --max-bytes 1M --step 4 \
  --iters 3 --warmup 1 --max-seconds 2 --modes mpi --linktest 1 --json --time-limit 40 --out "$TMP/out" \
  >"$TMP/rows.jsonl" 2>"$TMP/run.log"
rc=$?
if ((rc == 77)); then echo "SKIP: $(grep -m1 'cannot emulate' "$TMP/run.log")"; exit 77; fi
((rc == 0)) || { cat "$TMP/run.log" >&2; fail "run exited $rc"; }
left=$(leftovers); [[ -z $left ]] || fail "left behind after the run: $left"
python3 - "$TMP/rows.jsonl" <<'PY' || { cat "$TMP/run.log" >&2; fail "bad rows"; }
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
sizes = sorted(r["bytes"] for r in rows if r["mode"] == "mpi")
assert sizes == [65536, 262144, 1048576], f"sizes {sizes}"
for r in rows:
    for k in ("workers", "aggs", "link_mbit", "nranks", "bytes", "time_us", "algbw_gbps", "busbw_gbps"):
        assert k in r, f"{k} missing in {r}"
    assert r["workers"] == 2 and r["aggs"] == 1 and r["nranks"] == 2 and r["link_mbit"] == 500, r
    assert r["wrong"] == 0, f"wrong results: {r}"
    assert r["busbw_gbps"] > 0, r
    # below ~1 MiB the tbf burst (128 KiB) lets a message beat the link; not at 1 MiB
    if r["bytes"] >= 1 << 20:
        assert r["busbw_gbps"] < 0.0625 * 1.3, f"busbw beyond a 500 Mbit/s link: {r}"
    assert "link_tx_mbit" in r, f"no link counters: {r}"
print(f"smoke: {len(rows)} MPI rows, busbw {[r['busbw_gbps'] for r in rows]} GB/s")
PY
[[ -s $TMP/out/summary.md ]] || fail "no summary.md"
grep -q '"bench": "linktest"' "$TMP"/out/linktest-*.jsonl || fail "no linktest rows"
if command -v gnuplot >/dev/null; then ls "$TMP"/out/*.png >/dev/null 2>&1 || fail "no plot"; fi
echo "smoke: run ok, cleaned up ($((SECONDS - T0)) s)"

# 2. interrupted while the MPI ranks run: cleanup still complete
"$RUN" --workers 2 --aggs 1 --link-mbit 100 --min-bytes 4M --max-bytes 16M --iters 5 \
  --max-seconds 5 --modes mpi --linktest 0 --time-limit 40 --no-plots --out "$TMP/out2" >/dev/null 2>"$TMP/run2.log" &
BGPID=$!
for ((i = 0; i < 100; i++)); do                  # <= 10 s until its ranks exist
  pgrep -f "mpi_allreduce" >/dev/null 2>&1 && ip netns list | grep -q "^${SC_PREFIX}-w1" && break
  sleep 0.1
done
ip netns list | grep -q "^${SC_PREFIX}-w1" || { cat "$TMP/run2.log" >&2; fail "second run did not start"; }
sleep 1
kill -TERM "$BGPID"
for ((i = 0; i < 150; i++)); do kill -0 "$BGPID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$BGPID" 2>/dev/null && fail "run did not stop within 15 s of SIGTERM"
wait "$BGPID"; rc=$?; BGPID=""
((rc == 143)) || fail "stopped run exited $rc, expected 143 (did it finish before the signal?)"
left=$(leftovers); [[ -z $left ]] || fail "left behind after SIGTERM: $left"
echo "smoke: interrupted run cleaned up ($((SECONDS - T0)) s)"

# 3. sumcastd in aggregator namespaces (only when built)
source "$ROOT/bench/cluster/lib.sh"
if bin=$(sc_sumcastd_bin); then
  (
    trap sc_cleanup EXIT
    SC_RUN_DIR=$(mktemp -d "/tmp/${SC_PREFIX}.XXXXXX")
    sc_topo_up 1 2 500 2>/dev/null
    sc_daemons_start "$bin" || exit 1
    for j in 0 1; do
      ip netns exec "$(sc_ns_a $j)" ss -Hltn "sport = :7800" | grep -q "$(sc_ip_a $j):7800" || exit 2
    done
    sc_daemons_stop
    for j in 0 1; do
      ip netns exec "$(sc_ns_a $j)" ss -Hltn "sport = :7800" | grep -q . && exit 3
    done
    exit 0
  ) || fail "sumcastd in namespaces (rc $?)"
  left=$(leftovers); [[ -z $left ]] || fail "left behind after daemons: $left"
  echo "smoke: sumcastd started/stopped in aggregator namespaces ($bin)"
  # 4. run's Sumcast plumbing with a stand-in harness (namespaces, --aggs, env, rows)
  SC_HARNESS="$HERE/fake_harness.sh" "$RUN" --workers 2 --aggs 1 --link-mbit 500 \
    --min-bytes 1M --max-bytes 1M --modes ring,split --linktest 0 --json --no-plots \
    --time-limit 40 --out "$TMP/out4" >"$TMP/rows4.jsonl" 2>"$TMP/run4.log" ||
    { cat "$TMP/run4.log" >&2; fail "run with the stand-in harness"; }
  python3 - "$TMP/rows4.jsonl" <<'PY' || { cat "$TMP/run4.log" >&2; fail "stand-in harness rows"; }
import json, sys
rows = {r["mode"]: r for r in map(json.loads, open(sys.argv[1]))}
assert set(rows) == {"ring", "split"}, rows
assert rows["split"]["naggs"] == 1 and rows["ring"]["naggs"] == 0, rows
assert all(r["workers"] == 2 and r["aggs"] == 1 and r["link_mbit"] == 500 for r in rows.values()), rows
PY
  left=$(leftovers); [[ -z $left ]] || fail "left behind after the Sumcast modes: $left"
  echo "smoke: Sumcast modes' plumbing ok with a stand-in harness"
  # 5. a real Sumcast mode: harness ranks in namespaces, sumcastd in the aggregator's (< 45 s)
  if hb=$(sc_harness_bin) && grep -qa SUMCAST_HARNESS_NETNS "$hb"; then
    "$RUN" --workers 2 --aggs 1 --link-mbit 500 --min-bytes 1M --max-bytes 1M --modes agg \
      --iters 3 --max-seconds 1 --linktest 0 --json --no-plots --time-limit 45 --out "$TMP/out5" \
      >"$TMP/rows5.jsonl" 2>"$TMP/run5.log" || { cat "$TMP/run5.log" >&2; fail "Sumcast agg mode on the cluster"; }
    python3 - "$TMP/rows5.jsonl" <<'PY' || { cat "$TMP/run5.log" >&2; fail "Sumcast rows"; }
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
# the harness adds a fabric_rtt row (8-byte ping-pong between ranks 0 and 1) to the mode's
rtt = [r for r in rows if r.get("mode") == "fabric_rtt"]
rows = [r for r in rows if r.get("mode") != "fabric_rtt"]
assert len(rows) == 1 and len(rtt) <= 1, rows + rtt
assert all(x["time_us"] > 0 and x["bytes"] == 8 for x in rtt), rtt
r = rows[0]
assert r["mode"] == "agg" and r["bytes"] == 1 << 20 and r["nranks"] == 2 and r["naggs"] == 1, r
assert r["workers"] == 2 and r["aggs"] == 1 and r["link_mbit"] == 500, r
assert r["wrong"] == 0, f"wrong results: {r}"
assert 0 < r["busbw_gbps"] < 0.0625 * 1.3, f"busbw beyond a 500 Mbit/s link: {r}"
assert r["link_max_mbit"] > 0 and r["t_end"] > r["t_start"] > 0, r
print(f"smoke: Sumcast agg busbw {r['busbw_gbps']} GB/s, busiest worker link {r['link_max_mbit']} Mbit/s")
PY
    left=$(leftovers); [[ -z $left ]] || fail "left behind after the Sumcast run: $left"
    ls -d /tmp/sumcast-harness-* 2>/dev/null | while read -r d; do
      [[ $d -nt $TMP ]] && echo "smoke: note: $d left (harness rendezvous dir)" >&2
    done
    echo "smoke: Sumcast agg mode on the emulated cluster ok ($hb)"
  else
    echo "smoke: plugin harness not built (or without namespace support), Sumcast run not tested"
  fi
else
  echo "smoke: sumcastd not built, daemon part not tested"
fi
echo "PASS ($((SECONDS - T0)) s)"
