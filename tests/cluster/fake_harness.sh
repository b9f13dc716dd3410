#!/bin/bash
# Stands in for tests/plugin/plugin_harness in the smoke test, to check bench/cluster/run's
# Sumcast plumbing (namespaces, aggregator list, env, row tagging) without the plugin.
# It knows SUMCAST_HARNESS_NETNS (run looks for that string in the binary).
# Usage as the harness: fake_harness.sh bench --nranks N [--naggs M --aggs LIST] --variant MODE=SPLIT ...
set -u
n=0 aggs="" variant=""
while (($#)); do
  case $1 in --nranks) n=$2; shift ;; --aggs) aggs=$2; shift ;; --variant) variant=$2; shift ;; esac
  shift
done
IFS=, read -ra NS <<<"${SUMCAST_HARNESS_NETNS:?}"
IFS=, read -ra IPS <<<"${SUMCAST_HARNESS_IFACES:?}"
((${#NS[@]} == n && ${#IPS[@]} == n)) || { echo "fake: $n ranks but ${#NS[@]} namespaces" >&2; exit 1; }
for ((r = 0; r < n; r++)); do
  ip netns exec "${NS[$r]}" ip -4 -o addr show dev eth0 | grep -q "inet ${IPS[$r]}/" ||
    { echo "fake: ${IPS[$r]} is not in ${NS[$r]}" >&2; exit 1; }
done
[[ $aggs == "${SUMCAST_AGGREGATORS:-}" ]] || { echo "fake: --aggs '$aggs' != env" >&2; exit 1; }
IFS=, read -ra AG <<<"$aggs"
for a in "${AG[@]}"; do   # every aggregator's control port answers from worker 0's namespace
  ip netns exec "${NS[0]}" timeout 5 bash -c "exec 3<>/dev/tcp/${a%:*}/${a#*:}" ||
    { echo "fake: $a unreachable from ${NS[0]}" >&2; exit 1; }
done
mode=${variant%%=*} split=${variant#*=}
case $mode=$split in ring=0|agg=1|split=auto) ;; *) echo "fake: --variant '$variant'" >&2; exit 1 ;; esac
printf '{"bench":"allreduce","mode":"%s","split":"%s","nranks":%d,"naggs":%d,"provider":"%s","type":"f32","op":"sum","bytes":1048576,"time_us":1000.0,"algbw_gbps":1.0,"busbw_gbps":1.0}\n' \
  "$mode" "$split" "$n" "${#AG[@]}" "${SUMCAST_PROVIDER:-}"
