#!/bin/bash
# tests/cluster/partition.sh [flat|tree|heal]: an aggregator unreachable from only some nodes, in
# the emulated cluster (bench/cluster/lib.sh: one network namespace per host, veth + bridge +
# tbf), 2 aggregators; the plugin harness's fault test (mixed allreduces, exact results on
# every node, bitwise across nodes, the fault logged by every communicator that had it, the
# repair run, later requests still through the aggregator left) while a route is cut.
#
# flat (default; ctest cluster/partition): 4 workers, one collnet of 4 nodes, split 0.5,
# 300 collectives; at collective 166:
#   1. node 3's route to aggregator 0 is cut (a blackhole route in node 3's namespace): node 3
#      cannot reach it, nodes 0-2 still can;
#   2. aggregator 0's route to node 3 is cut instead: results of aggregator 0 reach nodes 0-2
#      but not node 3, so node 3 must be given them by the others (--expect-copies);
#   3. the same at collective 296 of 300: the fault, the agreement and the repair come while
#      the nodes finish their last collectives and close (the harness closes right after its
#      last request, as NCCL's teardown does; no request may run in a later epoch). Copies
#      or redone chunks: which the victim lacks depends on how much of its last data reached
#      the aggregator before the cut (its TCP window fills without acks), and with 4
#      collectives left either may be all there is (one suite run in five had no copy);
#   4. case 2 with reduce-scatter windows only (owner-only results): what the victim
#      owns and lacks is recomputed from the contributions the other nodes kept after their
#      requests completed (--expect-kept).
# tree (ctest cluster/partition_tree): 8 workers, SUMCAST_FAN_IN=4, so the collnet is a
# two-level tree (docs/plugin.md, "A tree where fan-in ends": 2 groups of 4, 4 shards; each
# node in its group's reduce-scatter and allgather communicators and its shard's cross one,
# 8 inner jobs on each aggregator), split 1 (every stage through the aggregators), 300
# collectives; at collective 100:
#   a. node 3's route to aggregator 0 is cut: the inner communicators with node 3 in them
#      (group 0's two, shard 3's cross one with node 7) each notice, agree and repair on their
#      own; node 3 logs 3 fault lines, nodes 0-2 two, node 7 one, nodes 4-6 none (the harness's
#      --cut-node);
#   b. aggregator 0's route to node 5 is cut, with sealed data (both daemons restarted with
#      a key, the nodes given it): node 5's communicators (group 1's two, shard 1's cross one
#      with node 1), results node 5 lacks copied from the others (--expect-copies).
# heal (ctest cluster/partition_heal): a partition that heals. 4 workers, flat, split 1, 300
# collectives (more while the return is awaited); at collective 100 a route is cut as in
# flat, every node logs the fault and goes on without aggregator 0, then at the harness's
# first count at which every node has logged it (--readmit: every 50 collectives with
# nothing in flight) rank 0 restores the route (HARNESS_FAULT_CMD2), and every node must take
# aggregator 0 back into the running communicator, and its daemon must hold the job again,
# every rank joined, with chunks reduced (asked through its HTTP address, --agg-http):
#   h1. node 3's route to aggregator 0 cut, then restored;
#   h2. aggregator 0's route to node 3 cut, then restored.
set -u -o pipefail
MODE=${1:-flat}
case $MODE in
  flat) W=4 SPLIT=0.5 OPS=300 MODE_ARGS=() ;;
  tree) W=8 SPLIT=1 OPS=300 MODE_ARGS=(--fan-in 4) ;;
  heal) W=4 SPLIT=1 OPS=300 MODE_ARGS=() ;;
  *) echo "usage: $0 [flat|tree|heal]" >&2; exit 2 ;;
esac
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

A=2
sc_topo_up "$W" "$A" 2000 || exit 1
sc_daemons_start "$SUMCASTD" || { echo "FAIL: aggregators did not start"; exit 1; }
ns="" ips=""
for ((i = 0; i < W; i++)); do
  ns+="${ns:+,}$(sc_ns_w "$i")"; ips+="${ips:+,}$(sc_ip_w "$i")"
done
victim=$((W - 1))
rc=0
run_case() { # name at cut-node cmd undo [harness args...]
  local name=$1 at=$2 cut=$3 cmd=$4 undo=$5; shift 5
  sc_log "case $name: $cmd"
  # (the undo is the heal too: the harness runs it only with --readmit)
  if HARNESS_FAULT_CMD="$cmd" HARNESS_FAULT_CMD2="$undo" SUMCAST_HARNESS_NETNS="$ns" SUMCAST_HARNESS_IFACES="$ips" \
     SUMCAST_PROVIDER="$SC_FABRIC_PROVIDER" timeout 600 "$HARNESS" fault --nranks "$W" \
       --aggs "$(sc_agg_list)" --split "$SPLIT" --fault cmd --fault-at "$at" --ops "$OPS" \
       --cut-node "$cut" "${MODE_ARGS[@]}" "$@" >"$SC_RUN_DIR/$name.log" 2>&1; then
    grep -E '^fault:' "$SC_RUN_DIR/$name.log"
    grep -m1 -E 'aggregator .* failed' "$SC_RUN_DIR/$name.log" | sed 's/^/  /'
    grep -E '^\[rank 0\] healed' "$SC_RUN_DIR/$name.log" | sed 's/^/  /'
    grep -E '^\[rank [0-9]+\] took aggregator .* back' "$SC_RUN_DIR/$name.log" | sort -V | sed 's/^/  /'
    grep -E '^\[rank 0\] (every node has|aggregator .* came back)' "$SC_RUN_DIR/$name.log" | sed 's/^/  /'
    # per node: fault lines logged (and wanted), requests after them through the aggregators
    grep -E '^\[rank [0-9]+\] trace:' "$SC_RUN_DIR/$name.log" | sort -V |
      sed -E 's/^\[rank ([0-9]+)\].* ([0-9]+) fault lines \(want ([0-9]+)\).*after the last fault line ([0-9]+) rows of a later epoch, ([0-9]+) bytes.*/  node \1: \2 fault lines (want \3), then \4 requests in a later epoch, \5 bytes through the aggregators/'
  else
    echo "FAIL: case $name:" >&2; tail -n 30 "$SC_RUN_DIR/$name.log" >&2; rc=1
  fi
  eval "$undo" 2>/dev/null
}
if [[ $MODE == flat ]]; then
  # 1. the node cannot reach the aggregator
  run_case node-side 166 "$victim" \
    "ip netns exec $(sc_ns_w $victim) ip route add blackhole $(sc_ip_a 0)/32" \
    "ip netns exec $(sc_ns_w $victim) ip route del blackhole $(sc_ip_a 0)/32"
  # 2. the aggregator cannot reach the node: some nodes hold results the victim lacks
  run_case aggregator-side 166 "$victim" \
    "ip netns exec $(sc_ns_a 0) ip route add blackhole $(sc_ip_w $victim)/32" \
    "ip netns exec $(sc_ns_a 0) ip route del blackhole $(sc_ip_w $victim)/32" \
    --expect-copies
  # 4. the same with reduce-scatters only (blocks of 32-48 KiB: eager chunks of one owner): the victim owns results the others' completed
  #    requests no longer hold, so they are recomputed from the contributions the others kept
  #    (node 0: its block is in aggregator 0's shard of every window)
  run_case aggregator-side-rs 166 0 \
    "ip netns exec $(sc_ns_a 0) ip route add blackhole $(sc_ip_w 0)/32" \
    "ip netns exec $(sc_ns_a 0) ip route del blackhole $(sc_ip_w 0)/32" \
    --small-rs --expect-kept
  # 3. the same at the end: the others are closing when the victim needs them (the harness
  #    wants something repaired; copies or redone chunks, above)
  run_case aggregator-side-late 296 "$victim" \
    "ip netns exec $(sc_ns_a 0) ip route add blackhole $(sc_ip_w $victim)/32" \
    "ip netns exec $(sc_ns_a 0) ip route del blackhole $(sc_ip_w $victim)/32"
elif [[ $MODE == heal ]]; then
  # h1. node 3 cannot reach aggregator 0, then can again
  run_case heal-node-side 100 "$victim" \
    "ip netns exec $(sc_ns_w $victim) ip route add blackhole $(sc_ip_a 0)/32" \
    "ip netns exec $(sc_ns_w $victim) ip route del blackhole $(sc_ip_a 0)/32" \
    --readmit --agg-http "$(sc_agg_http_list)"
  # h2. aggregator 0 cannot reach node 3, then can again
  run_case heal-aggregator-side 100 "$victim" \
    "ip netns exec $(sc_ns_a 0) ip route add blackhole $(sc_ip_w $victim)/32" \
    "ip netns exec $(sc_ns_a 0) ip route del blackhole $(sc_ip_w $victim)/32" \
    --readmit --agg-http "$(sc_agg_http_list)"
else
  # a. node 3 cannot reach aggregator 0: its group's communicators and shard 3's cross one
  run_case tree-node-side 100 3 \
    "ip netns exec $(sc_ns_w 3) ip route add blackhole $(sc_ip_a 0)/32" \
    "ip netns exec $(sc_ns_w 3) ip route del blackhole $(sc_ip_a 0)/32"
  # b. aggregator 0 cannot reach node 5 (group 1, shard 1), sealed: the daemons again with a
  #    key (a daemon with one refuses unsigned joins, so every inner job that joins is sealed)
  sc_daemons_stop
  SC_KEY_FILE="$SC_RUN_DIR/job.key"
  (umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$SC_KEY_FILE")
  sc_daemons_start "$SUMCASTD" || { echo "FAIL: aggregators with a key did not start"; exit 1; }
  export SUMCAST_KEY_FILE=$SC_KEY_FILE
  run_case tree-aggregator-side-sealed 100 5 \
    "ip netns exec $(sc_ns_a 0) ip route add blackhole $(sc_ip_w 5)/32" \
    "ip netns exec $(sc_ns_a 0) ip route del blackhole $(sc_ip_w 5)/32" \
    --expect-copies
  unset SUMCAST_KEY_FILE
fi
exit $rc
