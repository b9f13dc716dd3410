# bench/cluster/lib.sh: helpers for the emulated cluster (sourced by bench/cluster/run and
# tests/cluster/smoke.sh). Bash only; needs root, iproute2 (ip, tc, ss) and python3.
#
# Topology of one run (prefix P = sc<pid>, subnet N = 10.77.<x>, x picked free per run):
#
#   netns P-w<i>  (worker i, 10.77.x.(10+i))      eth0 ==veth== w<i>  \
#   netns P-a<j>  (aggregator j, 10.77.x.(100+j)) eth0 ==veth== a<j>   +-- bridge br0 in netns P-sw
#   root netns    (10.77.x.254, for PMIx/mpirun)  P"r" ==veth== root  /
#
# Every host link is shaped with tc tbf in both directions: egress of the host's eth0
# (host -> switch) and egress of the switch-side w<i>/a<j> (switch -> host). The root link is
# not shaped (control traffic only). Everything lives in namespaces named P-*, plus the root
# end of one veth, so sc_topo_down removes it all: kill the processes left in P-* namespaces
# (only ours can be there), delete the namespaces (which destroys their veths) and the root veth.
#
# Loops are bounded in count and time; callers install `trap sc_cleanup EXIT` (run does).

SC_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SC_PREFIX=${SC_PREFIX:-sc$$}
SC_NET=""            # 10.77.x (no trailing dot), set by sc_topo_up
SC_W=0 SC_A=0 SC_RATE=0 SC_AGG_RATE=0
SC_RUN_DIR=""        # scratch dir for this run (wrapper, confs, logs), removed at cleanup
SC_DAEMON_PIDS=()
SC_SAMPLER_PID=""
SC_CHILD_PIDS=()     # other background processes we started (killed at cleanup)
SC_TOPO_UP=0
SC_FABRIC_PROVIDER=${SC_FABRIC_PROVIDER:-tcp;ofi_rxm}   # sumcastd [fabric] provider, SUMCAST_PROVIDER
# rxm eager limit for harness and daemons: messages above it go rendezvous (RTS, then a read
# request back on the same TCP connection, queued behind the bulk data flowing that way, then
# the data): with the aggregators' chunks and results (256 KiB) both ways on every link, that
# coupling held the links at ~0.7. Eager up to the chunk size: 0.90 (docs/benchmarks.md).
export FI_OFI_RXM_EAGER_LIMIT=${FI_OFI_RXM_EAGER_LIMIT:-262144}
# Aggregator chunk of the harness (plugin default 256K, sized for real links): a chunk is
# stored and forwarded by the aggregator once every rank's copy is in, so on these slow links
# its time (32 KiB = 0.5 ms at 500 Mbit/s) is the pipeline's fill and skew cost. Measured
# agg/ring at W=4, A=4: 32K 1.480 / 64K 1.472 / 128K 1.448 at 64 MiB, 1.437 vs 1.320 (128K)
# at 16 MiB; W=8: 1.697 vs 1.675 at 64 MiB, CPU 0.94 of 2 cores (docs/benchmarks.md).
# Must stay below FI_OFI_RXM_EAGER_LIMIT (chunk + header go eager).
export SUMCAST_CHUNK_BYTES=${SUMCAST_CHUNK_BYTES:-32K}

sc_log() { printf '[cluster %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
sc_die() { sc_log "error: $*"; exit 1; }

# ---- preflight ---------------------------------------------------------------------------

# sc_preflight: prints a reason and returns 77 when this machine cannot run the emulation.
sc_preflight() {
  if [[ $(id -u) != 0 ]]; then
    echo "not root: network namespaces, veth and tc need root (run as root)"; return 77
  fi
  local t
  for t in ip tc python3 timeout; do
    command -v "$t" >/dev/null 2>&1 || { echo "'$t' not found"; return 77; }
  done
  local probe="${SC_PREFIX}-probe" err
  if ! err=$(ip netns add "$probe" 2>&1); then
    echo "'ip netns add' is not permitted here: $err"; return 77
  fi
  # veth + tbf inside the probe namespace: proves the kernel has both.
  if ! err=$(ip -n "$probe" link add p0 type veth peer name p1 2>&1); then
    ip netns del "$probe" 2>/dev/null
    echo "cannot create veth pairs: $err"; return 77
  fi
  if ! err=$(ip netns exec "$probe" tc qdisc add dev p0 root tbf rate 100mbit burst 64kb latency 50ms 2>&1); then
    ip netns del "$probe" 2>/dev/null
    echo "tc tbf not available: $err"; return 77
  fi
  if ! err=$(ip -n "$probe" link add b0 type bridge 2>&1); then
    ip netns del "$probe" 2>/dev/null
    echo "cannot create a Linux bridge: $err"; return 77
  fi
  ip netns del "$probe" 2>/dev/null
  return 0
}

# ---- names and addresses -----------------------------------------------------------------

sc_ns_sw() { echo "${SC_PREFIX}-sw"; }
sc_ns_w() { echo "${SC_PREFIX}-w$1"; }
sc_ns_a() { echo "${SC_PREFIX}-a$1"; }
sc_ip_w() { echo "${SC_NET}.$((10 + $1))"; }
sc_ip_a() { echo "${SC_NET}.$((100 + $1))"; }
sc_ip_root() { echo "${SC_NET}.254"; }
sc_subnet() { echo "${SC_NET}.0/24"; }
sc_root_if() { echo "${SC_PREFIX}r"; }

# Picks 10.77.x with no address or route in the root namespace (several runs may coexist).
sc_pick_subnet() {
  local x start=$(( ($$ % 250) + 1 )) i
  for ((i = 0; i < 250; i++)); do
    x=$(( ((start + i - 1) % 250) + 1 ))
    if ! ip -4 route show | grep -q "^10\.77\.$x\." && ! ip -4 addr show | grep -q "inet 10\.77\.$x\."; then
      SC_NET="10.77.$x"; return 0
    fi
  done
  return 1
}

# tbf burst: 1 ms at the rate, at least 128 KiB (a 64 KiB GSO packet must fit, or tbf splits
# every one of them). Queue bound (tbf "latency"), default 50ms = 3.1 MB at 500 Mbit/s on both
# ends of every link: SC_TBF_LATENCY sets both, SC_SW_LATENCY only the switch side (switch
# port -> host). Basis: datacenter switches share MBs of buffer among their ports (12-32 MB on
# Trident/Tomahawk-class ASICs; dynamic thresholds let one congested port take several MB), so
# an incast port queues MBs before it drops, and a host's egress (qdisc + NIC ring, TSQ
# backpressure) does not drop its own TCP's 64 KiB GSO packets either. A 5 ms queue (312 KB)
# dropped them under the aggregators' fan-in, host side included (2 RTO timeouts per 64 MiB
# run with 5 ms on the host side only), turning the aggregator path into 200 ms RTO stalls:
# an artefact of the emulation (docs/benchmarks.md).
sc_tbf() { # ns dev rate_mbit latency
  local ns=$1 dev=$2 r=$3 lat=$4
  local burst=$(( r * 1000000 / 8 / 1000 ))
  (( burst < 131072 )) && burst=131072
  ip netns exec "$ns" tc qdisc replace dev "$dev" root tbf rate "${r}mbit" burst "$burst" \
    latency "$lat"
}
# TCP congestion control of every host namespace (a new namespace inherits the machine's
# default: bbr on the machine of docs/benchmarks.md). SC_TCP_CC=reno|bbr pins it (cubic only
# if the host's net.ipv4.tcp_allowed_congestion_control lists it). Default reno (measured
# +3..6% on the aggregator path over bbr, every mode shares it, MPI included);
# SC_TCP_CC= (empty) inherits the machine's.
SC_TCP_CC=${SC_TCP_CC-reno}
SC_HOST_LATENCY=${SC_TBF_LATENCY:-50ms}
SC_SW_LATENCY=${SC_SW_LATENCY:-$SC_HOST_LATENCY}

# ---- topology ----------------------------------------------------------------------------

# sc_topo_up W A RATE_MBIT [AGG_RATE_MBIT]
sc_topo_up() {
  SC_W=$1 SC_A=$2 SC_RATE=$3 SC_AGG_RATE=${4:-$3}
  (( SC_W >= 1 && SC_W <= 64 && SC_A >= 0 && SC_A <= 64 )) || sc_die "workers must be 1..64, aggs 0..64"
  [[ -n $SC_RUN_DIR ]] || SC_RUN_DIR=$(mktemp -d "/tmp/${SC_PREFIX}.XXXXXX")
  sc_pick_subnet || sc_die "no free 10.77.x.0/24 subnet"
  SC_TOPO_UP=1
  local sw; sw=$(sc_ns_sw)
  ip netns add "$sw" || sc_die "ip netns add $sw failed"
  ip -n "$sw" link set lo up
  ip -n "$sw" link add br0 type bridge
  # No STP, no forwarding delay: ports forward as soon as they are up.
  ip -n "$sw" link set br0 type bridge stp_state 0 forward_delay 0 2>/dev/null || true
  # IGMP snooping with the bridge its own querier, as a datacenter switch: a group goes only
  # to the ports whose hosts joined it. Until a querier exists the bridge floods every group
  # to every port (the aggregators' links then carry each other's results), and it counts
  # its own querier as existing one query response interval after it is enabled: so the
  # interval (0.2 s; in 1/100 s) is set first, in its own command (set together, the kernel
  # may arm that delay with the default 10 s). IGMPv3 queries: with v2 ones, hosts suppress
  # their report when they hear another member's, and the bridge misses members.
  ip -n "$sw" link set br0 type bridge mcast_snooping 1 mcast_igmp_version 3 \
    mcast_startup_query_interval 50 mcast_query_response_interval 20 2>/dev/null || true
  ip -n "$sw" link set br0 type bridge mcast_querier 1 2>/dev/null || true
  # SC_SW_NF_CALL=0: the bridge hands no frame to the switch namespace's netfilter hooks
  # (br_netfilter, per packet and per port a multicast one is copied to), as a hardware switch
  # would not; the kernel's default (1) otherwise. Their work runs in the softirq of whoever
  # sent the frame, so it counts in that process's CPU.
  if [[ -n ${SC_SW_NF_CALL:-} ]]; then
    local k
    for k in iptables ip6tables arptables; do
      ip netns exec "$sw" sysctl -qw "net.bridge.bridge-nf-call-$k=$SC_SW_NF_CALL" ||
        sc_die "net.bridge.bridge-nf-call-$k=$SC_SW_NF_CALL in $sw failed"
    done
  fi
  ip -n "$sw" link set br0 up
  local i ns port ip rate
  for ((i = 0; i < SC_W + SC_A; i++)); do
    if (( i < SC_W )); then
      ns=$(sc_ns_w "$i"); port="w$i"; ip=$(sc_ip_w "$i"); rate=$SC_RATE
    else
      ns=$(sc_ns_a $((i - SC_W))); port="a$((i - SC_W))"; ip=$(sc_ip_a $((i - SC_W))); rate=$SC_AGG_RATE
    fi
    ip netns add "$ns" || sc_die "ip netns add $ns failed"
    ip -n "$ns" link set lo up
    [[ -n $SC_TCP_CC ]] && { ip netns exec "$ns" sysctl -qw net.ipv4.tcp_congestion_control="$SC_TCP_CC" ||
      sc_die "TCP congestion control '$SC_TCP_CC' not available in $ns"; }
    ip link add name eth0 netns "$ns" type veth peer name "$port" netns "$sw" ||
      sc_die "veth $ns/eth0 <-> $sw/$port failed"
    ip -n "$sw" link set "$port" master br0
    if [[ -n ${SC_MTU:-} ]]; then # jumbo frames (run --mtu), both ends
      ip -n "$sw" link set "$port" mtu "$SC_MTU" && ip -n "$ns" link set eth0 mtu "$SC_MTU" ||
        sc_die "mtu $SC_MTU on $ns failed"
    fi
    ip -n "$sw" link set "$port" up
    ip -n "$ns" addr add "$ip/24" dev eth0
    ip -n "$ns" link set eth0 up
    sc_tbf "$ns" eth0 "$rate" "$SC_HOST_LATENCY" || sc_die "tbf on $ns/eth0 failed"
    sc_tbf "$sw" "$port" "$rate" "$SC_SW_LATENCY" || sc_die "tbf on $sw/$port failed"
  done
  # The root namespace joins the bridge (unshaped): mpirun's PMIx server is reached over TCP.
  local rif; rif=$(sc_root_if)
  ip link add name "$rif" type veth peer name root netns "$sw" || sc_die "root veth failed"
  ip -n "$sw" link set root master br0
  ip -n "$sw" link set root up
  ip addr add "$(sc_ip_root)/24" dev "$rif"
  ip link set "$rif" up
  # Bounded wait (5 s) until every bridge port forwards (no STP: at once, normally).
  local deadline=$((SECONDS + 5)) nports
  while :; do
    nports=$(bridge -n "$sw" link show 2>/dev/null | grep -c "state forwarding")
    (( nports >= SC_W + SC_A + 1 )) && break
    (( SECONDS >= deadline )) && { sc_log "warning: only $nports bridge ports forwarding"; break; }
    sleep 0.1
  done
  sc_log "topology up: $SC_W workers, $SC_A aggregators, ${SC_RATE} Mbit/s per worker link" \
    "(${SC_AGG_RATE} per aggregator link), tbf queue host $SC_HOST_LATENCY / switch $SC_SW_LATENCY," \
    "TCP ${SC_TCP_CC:-$(sysctl -n net.ipv4.tcp_congestion_control)},"  \
    "subnet $(sc_subnet), prefix $SC_PREFIX"
}

# Our namespaces (names start with "$SC_PREFIX-").
sc_our_netns() { ip netns list 2>/dev/null | awk '{print $1}' | grep "^${SC_PREFIX}-" || true; }

sc_topo_down() {
  local ns pids p n
  for ns in $(sc_our_netns); do
    pids=$(ip netns pids "$ns" 2>/dev/null)
    [[ -n $pids ]] && kill -TERM $pids 2>/dev/null
  done
  # Bounded wait for those processes to go, then force.
  for ((n = 0; n < 30; n++)); do
    p=""
    for ns in $(sc_our_netns); do p+=$(ip netns pids "$ns" 2>/dev/null); done
    [[ -z $p ]] && break
    sleep 0.1
  done
  for ns in $(sc_our_netns); do
    pids=$(ip netns pids "$ns" 2>/dev/null)
    [[ -n $pids ]] && kill -KILL $pids 2>/dev/null
  done
  for ns in $(sc_our_netns); do ip netns del "$ns" 2>/dev/null; done
  ip link del "$(sc_root_if)" 2>/dev/null || true
  SC_TOPO_UP=0
}

# Lists anything of ours still present (empty output == clean). Used by the smoke test.
sc_leftovers() {
  sc_our_netns
  ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -x "$(sc_root_if)" || true
}

# ---- link utilisation --------------------------------------------------------------------

# One snapshot of every host link's byte counters, seen from the switch side:
# "<time> <host> <host_tx_bytes> <host_rx_bytes>" (switch port rx == host tx), and
# "<time> cpu <busy_jiffies> <total_jiffies>" (all cores), and "<time> run <threads> 0" (the
# machine's runnable threads, procs_running: ours and any other work's). One `cat` reads the clock
# (/proc/uptime, 10 ms steps) and the counters back to back, so a slow fork under load does
# not skew the interval; SC_CLOCK_OFF turns uptime into wall-clock seconds (CLOCK_REALTIME,
# the clock of the benchmarks' t_start/t_end).
SC_CLOCK_OFF=""
sc_link_snapshot() {
  if [[ -z $SC_CLOCK_OFF ]]; then
    local now up; now=$(date +%s.%N); read -r up _ </proc/uptime
    SC_CLOCK_OFF=$(awk -v a="$now" -v b="$up" 'BEGIN { printf "%.3f", a - b }')
  fi
  ip netns exec "$(sc_ns_sw)" cat /proc/uptime /proc/net/dev /proc/stat 2>/dev/null |
    awk -v off="$SC_CLOCK_OFF" '
      NR == 1 { t = sprintf("%.3f", $1 + off); next }
      $1 == "cpu" { tot = 0; for (i = 2; i <= NF; i++) tot += $i
                    printf "%s cpu %d %d\n", t, tot - $5 - $6, tot; next }
      $1 == "procs_running" { printf "%s run %d 0\n", t, $2; next }
      { sub(/^ +/, ""); n = split($0, f, /[: ]+/)
        if (f[1] ~ /^[wa][0-9]+$/) printf "%s %s %s %s\n", t, f[1], f[2], f[10] }'
}

# Background sampler: a snapshot every $2 s (default 0.5) into file $1, until sc_sampler_stop
# or $3 seconds (default 3600) have passed, at most $3/$2 samples.
sc_sampler_start() {
  local file=$1 iv=${2:-0.5} max=${3:-3600}
  local n=$(awk -v m="$max" -v i="$iv" 'BEGIN{printf "%d", m/i}')
  (
    trap 'exit 0' TERM INT
    for ((k = 0; k < n; k++)); do sc_link_snapshot; sleep "$iv"; done
  ) >>"$file" &
  SC_SAMPLER_PID=$!
}

sc_sampler_stop() {
  if [[ -n $SC_SAMPLER_PID ]]; then
    kill -TERM "$SC_SAMPLER_PID" 2>/dev/null
    wait "$SC_SAMPLER_PID" 2>/dev/null
    SC_SAMPLER_PID=""
  fi
}

# sc_linktest SECONDS [PATTERN]: raw TCP streams between namespaces, no MPI, to find the
# rate the emulation sustains on this CPU. PATTERN "ring": worker i sends to worker i+1
# (every link loaded in both directions at once, as a ring allreduce does). Prints one JSON
# object per link with achieved tx/rx Mbit/s next to the configured rate.
sc_linktest() {
  local secs=${1:-5} i ns p pids=() spids=()
  (( SC_W >= 2 )) || sc_die "linktest needs at least 2 workers"
  for ((i = 0; i < SC_W; i++)); do
    ns=$(sc_ns_w "$i")
    ip netns exec "$ns" timeout -k 2 $((secs + 20)) python3 "$SC_LIB_DIR/stream.py" server \
      --bind "$(sc_ip_w "$i")" --port 5201 --seconds $((secs + 15)) >/dev/null 2>&1 &
    spids+=($!)
  done
  sleep 0.5
  for ((i = 0; i < SC_W; i++)); do
    ns=$(sc_ns_w "$i")
    ip netns exec "$ns" timeout -k 2 $((secs + 15)) python3 "$SC_LIB_DIR/stream.py" client \
      --host "$(sc_ip_w $(((i + 1) % SC_W)))" --port 5201 --seconds $((secs + 12)) >/dev/null 2>&1 &
    pids+=($!)
  done
  # Measure the steady state: wait (<= 10 s) until every worker link carries traffic (python
  # starts slowly on a loaded machine), then skip half a second of slow start.
  local s0 s1 k moving; s0=$(sc_link_snapshot)
  for ((k = 0; k < 100; k++)); do
    sleep 0.1; s1=$(sc_link_snapshot)
    moving=$(join <(echo "$s0" | awk '$2 ~ /^w/ { print $2, $3 }' | sort) \
                  <(echo "$s1" | awk '$2 ~ /^w/ { print $2, $3 }' | sort) |
             awk '$3 - $2 > 1000000 { n++ } END { print n + 0 }')
    (( moving >= SC_W )) && break
  done
  sleep 0.5
  local before after; before=$(sc_link_snapshot)
  local t0; t0=$(date +%s.%N)
  sleep "$secs"
  after=$(sc_link_snapshot); local t1; t1=$(date +%s.%N)
  # Measured: stop the streams (they would stop by themselves, at secs + 12 s at most).
  for p in "${pids[@]}" "${spids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${pids[@]}" "${spids[@]}"; do wait "$p" 2>/dev/null; done
  python3 - "$SC_RATE" "$t0" "$t1" "$SC_W" <<EOF
import sys, json
rate, t0, t1, w = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
def parse(s):
    d = {}
    for line in s.strip().splitlines():
        _, h, tx, rx = line.split(); d[h] = (int(tx), int(rx))
    return d
b, a = parse("""$before"""), parse("""$after""")
dt = t1 - t0
cpu = (a["cpu"][0] - b["cpu"][0]) / max(1, a["cpu"][1] - b["cpu"][1])
for h in sorted((h for h in a if h not in ("cpu", "run")), key=lambda h: (h[0], int(h[1:]))):
    if not h.startswith("w"): continue
    tx = (a[h][0] - b[h][0]) * 8 / dt / 1e6; rx = (a[h][1] - b[h][1]) * 8 / dt / 1e6
    print(json.dumps({"bench": "linktest", "workers": w, "link_mbit": rate, "host": h,
                      "tx_mbit": round(tx, 1), "rx_mbit": round(rx, 1),
                      "tx_util": round(tx / rate, 3), "rx_util": round(rx / rate, 3),
                      "cpu_busy": round(cpu, 3)}))
EOF
}

# tbf drop counters: "<worker_up> <worker_down> <agg_up> <agg_down>" packets dropped so far,
# up = host eth0 egress (host -> switch), down = switch port egress (switch -> host). TCP's
# losses show here: several flows into one port (aggregators: W workers -> 1 aggregator, and
# A aggregators -> 1 worker) overflow a tbf queue that one ring flow never fills.
sc_tbf_drops() {
  local i wu=0 wd=0 au=0 ad=0 d
  for ((i = 0; i < SC_W + SC_A; i++)); do
    local ns port
    if ((i < SC_W)); then ns=$(sc_ns_w "$i"); port="w$i"; else ns=$(sc_ns_a $((i - SC_W))); port="a$((i - SC_W))"; fi
    d=$(ip netns exec "$ns" tc -s qdisc show dev eth0 2>/dev/null | awk '/dropped/ { gsub(/[,()]/, ""); for (k = 1; k <= NF; k++) if ($k == "dropped") { print $(k + 1); exit } }')
    local e; e=$(ip netns exec "$(sc_ns_sw)" tc -s qdisc show dev "$port" 2>/dev/null | awk '/dropped/ { gsub(/[,()]/, ""); for (k = 1; k <= NF; k++) if ($k == "dropped") { print $(k + 1); exit } }')
    if ((i < SC_W)); then wu=$((wu + ${d:-0})); wd=$((wd + ${e:-0})); else au=$((au + ${d:-0})); ad=$((ad + ${e:-0})); fi
  done
  echo "$wu $wd $au $ad"
}

# TCP loss recovery, summed over every host namespace: "<RTO timeouts> <retransmitted segments>"
# (/proc/net/netstat TCPTimeouts, /proc/net/snmp RetransSegs). A timeout costs at least
# 200 ms (Linux's minimum RTO) whatever the link rate: a few per call dominate small messages.
sc_tcp_losses() {
  local i ns
  for ((i = 0; i < SC_W + SC_A; i++)); do
    if ((i < SC_W)); then ns=$(sc_ns_w "$i"); else ns=$(sc_ns_a $((i - SC_W))); fi
    ip netns exec "$ns" cat /proc/net/netstat /proc/net/snmp 2>/dev/null
  done | awk '
    $1 == "TcpExt:" && !h1 { for (k = 2; k <= NF; k++) c1[k] = $k; h1 = 1; next }
    $1 == "TcpExt:" && h1 { for (k = 2; k <= NF; k++) if (c1[k] == "TCPTimeouts") to += $k; h1 = 0; next }
    $1 == "Tcp:" && !h2 { for (k = 2; k <= NF; k++) c2[k] = $k; h2 = 1; next }
    $1 == "Tcp:" && h2 { for (k = 2; k <= NF; k++) if (c2[k] == "RetransSegs") rs += $k; h2 = 0; next }
    END { printf "%d %d\n", to, rs }'
}

# ---- MPI ---------------------------------------------------------------------------------

# Finds or builds the MPI benchmark; prints its path.
sc_mpi_bin() {
  local root; root=$(cd "$SC_LIB_DIR/../.." && pwd)
  local c
  for c in ${SUMCAST_BUILD_DIR:+"$SUMCAST_BUILD_DIR/bench/cluster/mpi_allreduce"} \
    "$root/build/bench/cluster/mpi_allreduce" "$root/build-cluster/bench/cluster/mpi_allreduce"; do
    [[ -x $c && $c -nt $SC_LIB_DIR/mpi_allreduce.c ]] && { echo "$c"; return 0; }
  done
  command -v mpicc >/dev/null || return 1
  [[ -n $SC_RUN_DIR ]] || SC_RUN_DIR=$(mktemp -d "/tmp/${SC_PREFIX}.XXXXXX")
  mpicc -O2 -I "$SC_LIB_DIR/../../common" -o "$SC_RUN_DIR/mpi_allreduce" "$SC_LIB_DIR/mpi_allreduce.c" \
    -lm >&2 || return 1
  echo "$SC_RUN_DIR/mpi_allreduce"
}

# sc_mpi_run TIMEOUT_S BIN ARGS...: one rank per worker namespace (rank r -> P-w<r>).
# SC_MPI_ENV: extra VAR=value words for mpirun's environment (OMPI_MCA_* reach the ranks).
SC_MPI_ENV=()
sc_mpi_run() {
  local tmo=$1; shift
  local wrap="$SC_RUN_DIR/rank-in-netns"
  cat >"$wrap" <<EOF
#!/bin/bash
# Enters the namespace of this MPI rank, then runs the rank.
exec ip netns exec "${SC_PREFIX}-w\${OMPI_COMM_WORLD_RANK:?not started by mpirun}" "\$@"
EOF
  chmod +x "$wrap"
  local sub; sub=$(sc_subnet)
  env "${SC_MPI_ENV[@]}" PMIX_MCA_ptl_tcp_remote_connections=1 PMIX_MCA_ptl_tcp_if_include="$sub" \
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    timeout -k 5 "$tmo" mpirun -np "$SC_W" --oversubscribe --allow-run-as-root \
      -x PMIX_MCA_ptl_tcp_remote_connections \
      --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include "$sub" \
      --mca oob_tcp_if_include "$sub" --mca btl_base_warn_component_unused 0 \
      "$wrap" "$@"
}

# ---- Sumcast daemons (aggregators) -------------------------------------------------------

# Finds sumcastd: $SUMCAST_BUILD_DIR/daemon/sumcastd or build/daemon/sumcastd.
sc_sumcastd_bin() {
  local root; root=$(cd "$SC_LIB_DIR/../.." && pwd)
  local c
  for c in ${SUMCAST_BUILD_DIR:+"$SUMCAST_BUILD_DIR/daemon/sumcastd"} "$root/build/daemon/sumcastd"; do
    [[ -x $c ]] && { echo "$c"; return 0; }
  done
  return 1
}

# Generated config of aggregator j: control, HTTP and fabric bound to its own address.
sc_agg_conf() {
  local j=$1 ip; ip=$(sc_ip_a "$j")
  cat <<EOF
# generated by bench/cluster/lib.sh for aggregator $j of run $SC_PREFIX
[control]
listen = $ip
port = 7800

[http]
listen = $ip
port = 7801

[fabric]
provider = $SC_FABRIC_PROVIDER
node = $ip
${SC_MC:+multicast = ${SC_MC_VIA:-ip}}
${SC_MC:+multicast-groups = 239.194.$j.0/24}
${SC_MC:+multicast-mtu = ${SC_MTU:-1500}}

[job]
${SC_MAX_WEIGHT:+max-weight = $SC_MAX_WEIGHT}
${SC_PACE:+pace = $SC_PACE}

[log]
level = info

[auth]
# The run's own namespaces, no key: a non-loopback daemon serves anonymous
# jobs only when told so. With SC_KEY_FILE (run --key) the jobs are signed
# and their data sealed (common/seal.h).
allow-anonymous = true
${SC_KEY_FILE:+key-file = $SC_KEY_FILE}
EOF
}

# "ip:7800,ip:7800,..." for SUMCAST_AGGREGATORS.
sc_agg_list() {
  local j s=""
  for ((j = 0; j < SC_A; j++)); do s+="${s:+,}$(sc_ip_a "$j"):7800"; done
  echo "$s"
}

# "ip:7801,ip:7801,...": their HTTP listeners (/stats, /metrics), in the same order.
sc_agg_http_list() {
  local j s=""
  for ((j = 0; j < SC_A; j++)); do s+="${s:+,}$(sc_ip_a "$j"):7801"; done
  echo "$s"
}

# Starts sumcastd in every aggregator namespace and waits (bounded) for its control port.
sc_daemons_start() {
  local bin=$1 j ns conf log
  for ((j = 0; j < SC_A; j++)); do
    ns=$(sc_ns_a "$j"); conf="$SC_RUN_DIR/agg$j.conf"; log="$SC_RUN_DIR/agg$j.log"
    sc_agg_conf "$j" >"$conf"
    ip netns exec "$ns" "$bin" -c "$conf" >"$log" 2>&1 &
    SC_DAEMON_PIDS+=($!)
  done
  local deadline=$((SECONDS + 15)) up
  for ((j = 0; j < SC_A; j++)); do
    ns=$(sc_ns_a "$j"); up=0
    while (( SECONDS < deadline )); do
      if ! kill -0 "${SC_DAEMON_PIDS[$j]}" 2>/dev/null; then
        sc_log "sumcastd $j exited; log:"; tail -n 20 "$SC_RUN_DIR/agg$j.log" >&2; return 1
      fi
      if ip netns exec "$ns" ss -Hltn "sport = :7800" 2>/dev/null | grep -q .; then up=1; break; fi
      sleep 0.1
    done
    (( up )) || { sc_log "sumcastd $j not listening on $(sc_ip_a "$j"):7800 after 15 s"; return 1; }
  done
  sc_log "sumcastd up on $(sc_agg_list)"
}

sc_daemons_stop() {
  local p n alive
  (( ${#SC_DAEMON_PIDS[@]} )) || return 0
  for p in "${SC_DAEMON_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for ((n = 0; n < 50; n++)); do          # 5 s for a clean drain, then SIGKILL
    alive=0
    for p in "${SC_DAEMON_PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    (( alive )) || break
    sleep 0.1
  done
  for p in "${SC_DAEMON_PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  SC_DAEMON_PIDS=()
}

# ---- the Sumcast harness (hook; the harness does not exist yet) ----------------------------

# Finds the plugin's NCCL-playing harness; prints its path or returns 1. SC_HARNESS overrides
# (the smoke test points it at tests/cluster/fake_harness.sh).
sc_harness_bin() {
  [[ -n ${SC_HARNESS:-} ]] && { [[ -x $SC_HARNESS ]] && echo "$SC_HARNESS"; return; }
  local root b c; root=$(cd "$SC_LIB_DIR/../.." && pwd)
  for b in ${SUMCAST_BUILD_DIR:+"$SUMCAST_BUILD_DIR"} "$root/build"; do
    for c in "$b/tests/plugin/plugin_harness" "$b/tests/plugin/harness" "$b/bench/allreduce"; do
      [[ -x $c ]] && { echo "$c"; return 0; }
    done
  done
  return 1
}

# sc_cleanup: everything we started or created, in reverse order. Safe to call twice.
sc_cleanup() {
  local p n
  sc_sampler_stop
  sc_daemons_stop
  for p in "${SC_CHILD_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${SC_CHILD_PIDS[@]}"; do      # timeout(1) passes TERM on to mpirun; 10 s at most
    for ((n = 0; n < 100; n++)); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  SC_CHILD_PIDS=()
  sc_topo_down
  [[ -n $SC_RUN_DIR && -d $SC_RUN_DIR && $SC_RUN_DIR == /tmp/${SC_PREFIX}.* ]] && rm -rf "$SC_RUN_DIR"
  SC_RUN_DIR=""
}
