#!/usr/bin/env bash
# The main job: a local Sumcast cluster on loopback.
#
# Builds everything, starts two sumcastd aggregators on 127.0.0.1, runs
# allreduces through the real NCCL plugin from 4 processes that play NCCL
# (ring only, aggregators only, auto split), prints the nccl-tests style
# table and what the aggregators saw (sumcastctl), and cleans up.
# Options: --nranks N (4) --naggs M (2) --max-bytes B (64M) --provider P (tcp)
set -euo pipefail
cd "$(dirname "$0")/.."
nranks=4 naggs=2 max=64M provider=tcp
while [ $# -gt 0 ]; do
	case "$1" in
	--nranks) nranks=$2; shift 2 ;;
	--naggs) naggs=$2; shift 2 ;;
	--max-bytes) max=$2; shift 2 ;;
	--provider) provider=$2; shift 2 ;;
	*) echo "usage: $0 [--nranks N] [--naggs M] [--max-bytes B] [--provider tcp|shm]" >&2; exit 2 ;;
	esac
done

scripts/deps.sh
build=${SUMCAST_BUILD_DIR:-build}
echo "== building into $build"
cmake -S . -B "$build" >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null

tmp=$(mktemp -d /tmp/sumcast-demo.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

aggs=() http=()
for i in $(seq 0 $((naggs - 1))); do
	cat >"$tmp/agg$i.conf" <<CONF
[control]
listen = 127.0.0.1
port = 0
port-file = $tmp/agg$i.ports
[http]
listen = 127.0.0.1
port = 0
[fabric]
provider = $provider
node = 127.0.0.1
CONF
	"$build/daemon/sumcastd" -c "$tmp/agg$i.conf" 2>"$tmp/agg$i.log" &
	pids+=($!)
done
for i in $(seq 0 $((naggs - 1))); do
	for _ in $(seq 100); do [ -s "$tmp/agg$i.ports" ] && break; sleep 0.1; done
	[ -s "$tmp/agg$i.ports" ] || { echo "sumcastd $i did not start:"; cat "$tmp/agg$i.log"; exit 1; }
	read -r c h <"$tmp/agg$i.ports"
	aggs+=("127.0.0.1:${c#control=}")
	http+=("${h#http=}")
done
list=$(IFS=,; echo "${aggs[*]}")
echo "== $naggs sumcastd aggregators on $list (provider $provider)"
echo "== allreduce f32 sum through libnccl-net-sumcast.so, $nranks processes playing NCCL"
SUMCAST_PROVIDER=$provider "$build/bench/allreduce" --nranks "$nranks" --aggs "$list" -b 8 -e "$max"
for i in $(seq 0 $((naggs - 1))); do
	echo "== sumcastctl status (aggregator $i)"
	"$build/tools/sumcastctl" --port "${http[$i]}" --interval 0 status
done
echo "== done; aggregators stopped"
