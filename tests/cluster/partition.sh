#!/bin/bash
# tests/cluster/partition.sh: an aggregator unreachable from only some nodes, in the emulated
# cluster (bench/cluster/lib.sh: one network namespace per host, veth + bridge + tbf).
# 4 workers, 2 aggregators; the plugin harness's fault test (1000 mixed allreduces, exact
# results on every node, bitwise across nodes, the fault logged once per node, the repair run)
# while, at allreduce 333:
#   1. node 3's route to aggregator 0 is cut (a blackhole route in node 3's namespace): node 3
#      cannot reach it, nodes 0-2 still can;
#   2. aggregator 0's route to node 3 is cut instead: results of aggregator 0 reach nodes 0-2
#      but not node 3, so node 3 must be given them by the others (--expect-copies);
#   3. the same at collective 996 of 1000: the fault, the agreement and the copies come while
#      the nodes finish their last collectives and close (the harness closes right after its
#      last request, as NCCL's teardown does; no request may run in a later epoch);
#   4. case 2 with reduce-scatter windows only (owner-only results): what the victim
#      owns and lacks is recomputed from the contributions the other nodes kept after their
#      requests completed (--expect-kept).
# Exit 0 pass, 1 fail, 77 skipped (not root, no netns/veth/tbf, nothing built) with the reason.
set -u -o pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
export SC_PREFIX="scpt$$"
# shellcheck source=../../bench/cluster/lib.sh
source "$ROOT/bench/cluster/lib.sh"

BUILD=${SUMCAST_BUILD_DIR:-$ROOT/build}
HARNESS="$BUILD/tests/plugin/plugin_harness"
why=$(sc_preflight) || { echo "SKIP: $why"; exit 77; }
[[ -x $HARNESS ]] || { echo "SKIP: $HARNESS not built"; exit 77; }
SUMCASTD=$(sc_sumcastd_bin) || { echo "SKIP: sumcastd not built"; exit 77; }
trap sc_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

W=4 A=2
sc_topo_up "$W" "$A" 2000 || exit 1
sc_daemons_start "$SUMCASTD" || { echo "FAIL: aggregators did not start"; exit 1; }
ns="" ips=""
for ((i = 0; i < W; i++)); do
  ns+="${ns:+,}$(sc_ns_w "$i")"; ips+="${ips:+,}$(sc_ip_w "$i")"
done
victim=$((W - 1))
rc=0
run_case() { # name at cmd undo [harness args...]
  local name=$1 at=$2 cmd=$3 undo=$4; shift 4
  sc_log "case $name: $cmd"
  if HARNESS_FAULT_CMD="$cmd" SUMCAST_HARNESS_NETNS="$ns" SUMCAST_HARNESS_IFACES="$ips" \
     SUMCAST_PROVIDER="$SC_FABRIC_PROVIDER" timeout 600 "$HARNESS" fault --nranks "$W" \
       --aggs "$(sc_agg_list)" --split 0.5 --fault cmd --fault-at "$at" --ops 1000 "$@" \
       >"$SC_RUN_DIR/$name.log" 2>&1; then
    grep -E '^fault:' "$SC_RUN_DIR/$name.log"
    grep -m1 -E 'aggregator .* failed' "$SC_RUN_DIR/$name.log" | sed 's/^/  /'
  else
    echo "FAIL: case $name:" >&2; tail -n 30 "$SC_RUN_DIR/$name.log" >&2; rc=1
  fi
  eval "$undo" 2>/dev/null
}
# 1. the node cannot reach the aggregator
run_case node-side 333 \
  "ip netns exec $(sc_ns_w $victim) ip route add blackhole $(sc_ip_a 0)/32" \
  "ip netns exec $(sc_ns_w $victim) ip route del blackhole $(sc_ip_a 0)/32"
# 2. the aggregator cannot reach the node: some nodes hold results the victim lacks
run_case aggregator-side 333 \
  "ip netns exec $(sc_ns_a 0) ip route add blackhole $(sc_ip_w $victim)/32" \
  "ip netns exec $(sc_ns_a 0) ip route del blackhole $(sc_ip_w $victim)/32" \
  --expect-copies
# 4. the same with reduce-scatters only (blocks of 32-48 KiB: eager chunks of one owner): the victim owns results the others' completed
#    requests no longer hold, so they are recomputed from the contributions the others kept
#    (node 0: its block is in aggregator 0's shard of every window)
run_case aggregator-side-rs 333 \
  "ip netns exec $(sc_ns_a 0) ip route add blackhole $(sc_ip_w 0)/32" \
  "ip netns exec $(sc_ns_a 0) ip route del blackhole $(sc_ip_w 0)/32" \
  --small-rs --expect-kept
# 3. the same at the end: the others are closing when the victim needs them
run_case aggregator-side-late 996 \
  "ip netns exec $(sc_ns_a 0) ip route add blackhole $(sc_ip_w $victim)/32" \
  "ip netns exec $(sc_ns_a 0) ip route del blackhole $(sc_ip_w $victim)/32" \
  --expect-copies
exit $rc
