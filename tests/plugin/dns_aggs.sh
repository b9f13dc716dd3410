#!/usr/bin/env bash
# SUMCAST_AGGREGATORS by name against a real DNS server (docs/client.md,
# "Aggregators by name"), and the fleet view over the daemons it names
# (docs/operations.md, "A fleet in one view").
#
#   dns_aggs.sh HARNESS SUMCASTD SUMCASTCTL
#
# In a network namespace of its own (ip netns exec bind-mounts
# /etc/netns/NAME/resolv.conf over /etc/resolv.conf, so glibc asks the
# test's dnsmasq and the host is not touched): dnsmasq on 127.0.0.1:53 with
#   aggs.sumcast.test      A 127.0.0.3, A 127.0.0.2 (a headless Service)
#   agg-a / agg-b          A 127.0.0.2 / 127.0.0.3
#   _sumcast._tcp.pool     SRV agg-b:7800 (priority 10), agg-a:7800 (20)
# and two sumcastd, on 127.0.0.2 and 127.0.0.3, control 7800, http 7801.
# Then the plugin harness plays NCCL, 3 nodes, allreduces checked:
#   a-records  every node SUMCAST_AGGREGATORS=aggs.sumcast.test (no port:
#              7800): both daemons hold the job, the label SLURM_JOB_ID gave
#   srv        srv:pool.sumcast.test on rank 0 (b, a); rank 1 lists the
#              daemons by address in the other order, rank 2 only one of
#              them from a file: every node must use rank 0's list (any
#              other order would sum the wrong shards: the harness checks
#              every element), and nodes 1 and 2 say once that theirs
#              differs; rank 0 does not
#   nofit      12 daemons behind big.sumcast.test: more than the handle
#              holds beside tcp's address; every node its own list, sorted,
#              rank 2's from a file in reverse order: all agree; a node
#              whose list does not match rank 0's digest says so
#   fleet      sumcastctl -D srv:... jobs / status across both daemons and
#              one address nobody answers at: the job by id and label on
#              both, the dead one a row, exit 2
# Exit 0 pass, 1 fail, 77 skip (not root, no dnsmasq, no netns).
set -u
harness=$1 sumcastd=$2 ctl=${3:-}

if [ -z "${SC_DNS_INSIDE:-}" ]; then
	[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (a network namespace)"; exit 77; }
	command -v dnsmasq >/dev/null || { echo "SKIP: dnsmasq not installed (dnsmasq-base)"; exit 77; }
	ns=scdns$$
	ip netns add "$ns" 2>/dev/null || { echo "SKIP: cannot create a network namespace"; exit 77; }
	mkdir -p "/etc/netns/$ns"
	echo "nameserver 127.0.0.1" > "/etc/netns/$ns/resolv.conf"
	SC_DNS_INSIDE=1 ip netns exec "$ns" "$0" "$@"
	rc=$?
	ip netns del "$ns"
	rm -rf "/etc/netns/$ns"
	exit $rc
fi

tmp=$(mktemp -d /tmp/sumcast-dns.XXXXXX) || exit 1
pass=0 fail=0 pids=()
ok() { pass=$((pass + 1)); echo "ok: $*"; }
ko() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	if [ $fail -ne 0 ]; then
		for f in "$tmp"/*.log; do echo "--- $f (tail)" >&2; tail -20 "$f" >&2; done
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
for v in $(env | sed -n 's/^\(SUMCAST_[A-Z0-9_]*\)=.*/\1/p'); do unset "$v"; done
ip link set lo up

dnsmasq --keep-in-foreground --conf-file=/dev/null --no-resolv --no-hosts --no-poll \
	--user=root --group=root --listen-address=127.0.0.1 --bind-interfaces --port=53 \
	--log-queries --log-facility="$tmp/dnsmasq.log" \
	--host-record=agg-a.sumcast.test,127.0.0.2 --host-record=agg-b.sumcast.test,127.0.0.3 \
	--host-record=aggs.sumcast.test,127.0.0.3 --host-record=aggs.sumcast.test,127.0.0.2 \
	$(for i in $(seq 13 -1 2); do printf -- '--host-record=big.sumcast.test,127.0.0.%s ' "$i"; done) \
	--srv-host=_sumcast._tcp.pool.sumcast.test,agg-b.sumcast.test,7800,10,0 \
	--srv-host=_sumcast._tcp.pool.sumcast.test,agg-a.sumcast.test,7800,20,0 &
pids+=($!)

start_daemon() { # start_daemon IP: control IP:7800, http IP:7801
	cat > "$tmp/d$1.conf" <<EOF
[control]
listen = $1
port = 7800
port-file = $tmp/ports.$1
[http]
listen = $1
port = 7801
[fabric]
provider = tcp;ofi_rxm
node = $1
[data]
threads = 1
EOF
	"$sumcastd" -c "$tmp/d$1.conf" > "$tmp/sumcastd.$1.log" 2>&1 &
	pids+=($!)
}
start_daemon 127.0.0.2
start_daemon 127.0.0.3
for _ in $(seq 150); do
	[ -s "$tmp/ports.127.0.0.2" ] && [ -s "$tmp/ports.127.0.0.3" ] &&
		getent hosts aggs.sumcast.test >/dev/null && break
	sleep 0.1
done
[ -s "$tmp/ports.127.0.0.2" ] && [ -s "$tmp/ports.127.0.0.3" ] || { ko "daemons not up"; exit 1; }
getent hosts aggs.sumcast.test > "$tmp/getent.log" && ok "glibc resolves through the test's dnsmasq" ||
	{ ko "glibc does not resolve aggs.sumcast.test"; exit 1; }

export FI_PROVIDER=tcp SUMCAST_PROVIDER='tcp;ofi_rxm' SUMCAST_IFACE=127.0.0.1
# the allreduces' elements are checked; split 0.5 sends half through the aggregators
run() { # run NAME [VAR=VALUE...] [harness args...]
	local name=$1 envs=()
	shift
	while [ $# -gt 0 ] && [[ $1 == [A-Z]*=* ]]; do envs+=("$1"); shift; done
	env "${envs[@]}" "$harness" coll --nranks 3 --split 0.5 -b 4K -e 1M --expect agg --verbose \
		"$@" > "$tmp/$name.log" 2>&1
}
label_on() { # label_on IP: the labels of the jobs the daemon at IP holds
	curl -sf --max-time 3 "http://$1:7801/stats" | grep -o '"label":"[^"]*"' | sort -u | tr '\n' ' '
}

# --- a-records: a name, no port; the label from SLURM_JOB_ID ---
(
	run a-records SLURM_JOB_ID=4242 --aggs aggs.sumcast.test &
	wait
) &
hp=$!
seen2= seen3=
for _ in $(seq 300); do
	[ -z "$seen2" ] && seen2=$(label_on 127.0.0.2)
	[ -z "$seen3" ] && seen3=$(label_on 127.0.0.3)
	[ -n "$seen2" ] && [ -n "$seen3" ] && break
	kill -0 $hp 2>/dev/null || break
	sleep 0.05
done
wait $hp && ok "a-records: allreduces right through aggs.sumcast.test" ||
	ko "a-records: harness failed"
grep -q '2 aggregators (127.0.0.2:7800,127.0.0.3:7800) + ring' "$tmp/a-records.log" &&
	ok "a-records: both addresses of the name, sorted, port 7800" ||
	ko "a-records: the connect line does not list 127.0.0.2:7800,127.0.0.3:7800"
[[ "$seen2 $seen3" == *'"label":"4242"'*'"label":"4242"'* ]] &&
	ok "a-records: both daemons show the label SLURM_JOB_ID gave" ||
	ko "a-records: labels seen on the daemons: '$seen2' '$seen3'"
! grep -q "differs from rank 0's" "$tmp/a-records.log" && ok "a-records: no node's list differs" ||
	ko "a-records: a node said its list differs"

# --- srv: rank 0 by SRV (b, a); rank 1 by address (a, b); rank 2 a file (a) ---
echo "127.0.0.2:7800  # rack 1" > "$tmp/aggs.txt"
run srv SUMCAST_JOB_LABEL=train-llm-7 \
	SUMCAST_HARNESS_AGGREGATORS="srv:pool.sumcast.test|127.0.0.2:7800,127.0.0.3:7800|@$tmp/aggs.txt" \
	--aggs srv:pool.sumcast.test && ok "srv: allreduces right with three different lists" ||
	ko "srv: harness failed"
n=$(grep -c '2 aggregators (127.0.0.3:7800,127.0.0.2:7800) + ring' "$tmp/srv.log")
[ "$n" = 3 ] && ok "srv: every node uses rank 0's list in SRV priority order (b, a)" ||
	ko "srv: $n of 3 nodes connected with 127.0.0.3:7800,127.0.0.2:7800"
for r in 1 2; do
	c=$(grep -c "\[rank $r\] WARN.*differs from rank 0's (127.0.0.3:7800,127.0.0.2:7800): using rank 0's" "$tmp/srv.log")
	[ "$c" = 1 ] && ok "srv: rank $r says once that its list differs" || ko "srv: rank $r said it $c times"
done
! grep -q "\[rank 0\] WARN.*differs" "$tmp/srv.log" && ok "srv: rank 0 does not" || ko "srv: rank 0 said its list differs"
grep -q "query\[SRV\] _sumcast._tcp.pool.sumcast.test" "$tmp/dnsmasq.log" &&
	ok "srv: the SRV query went to the DNS server" || ko "srv: dnsmasq saw no SRV query"

# --- nofit: 12 aggregators, more than rank 0's handle holds beside tcp's
# address: every node its own list, sorted; rank 2's file lists them in
# the reverse order and must still agree ---
big=() rev=
for i in $(seq 2 13); do big+=("127.0.0.$i"); rev="127.0.0.$i:7800 $rev"; done
for ip in "${big[@]:2}"; do start_daemon "$ip"; done
echo "$rev" > "$tmp/big.txt"
for _ in $(seq 150); do
	n=0; for ip in "${big[@]}"; do [ -s "$tmp/ports.$ip" ] && n=$((n + 1)); done
	[ $n = 12 ] && break
	sleep 0.1
done
sorted=$(printf '%s:7800,' "${big[@]}"); sorted=${sorted%,}
run nofit SUMCAST_HARNESS_AGGREGATORS="big.sumcast.test|big.sumcast.test|@$tmp/big.txt" \
	--aggs big.sumcast.test && ok "nofit: allreduces right through 12 aggregators" ||
	ko "nofit: harness failed"
grep -q "\[rank 0\] INFO.*12 aggregators do not fit in NCCL's handle (48 bytes free after this provider's 16-byte address)" \
	"$tmp/nofit.log" && ok "nofit: rank 0 says its list does not fit" || ko "nofit: no 'do not fit' line"
n=$(grep -c "12 aggregators ($sorted) + ring" "$tmp/nofit.log")
[ "$n" = 3 ] && ok "nofit: every node uses the 12 in sorted order" || ko "nofit: $n of 3 nodes sorted"
! grep -q "differs from rank 0's" "$tmp/nofit.log" && ok "nofit: the same lists sorted: no node differs" ||
	ko "nofit: a node said its list differs"
# a node whose list does not match rank 0's digest says so
echo "127.0.0.2:7800" > "$tmp/one.txt"
run nofit-differs SUMCAST_HARNESS_AGGREGATORS="big.sumcast.test|big.sumcast.test|@$tmp/one.txt" \
	--aggs big.sumcast.test --expect ring && ok "nofit: lists that differ: the ring on every node, sums right" ||
	ko "nofit: lists that differ: harness failed"
grep -q "\[rank 2\] WARN.*differs from rank 0's (12 aggregators, too many for NCCL's handle)" \
	"$tmp/nofit-differs.log" && ok "nofit: a node whose list differs from rank 0's digest says so" ||
	ko "nofit: rank 2 did not say its list differs"

# --- fleet: a job running, sumcastctl across both daemons and a dead one ---
if [ -n "$ctl" ]; then
	run fleet SUMCAST_JOB_LABEL=fleet-job-1 --aggs srv:pool.sumcast.test -e 64M &
	hp=$!
	for _ in $(seq 300); do
		[[ "$(label_on 127.0.0.2)$(label_on 127.0.0.3)" == *fleet-job-1*fleet-job-1* ]] && break
		sleep 0.05
	done
	# the three views at once, while the job runs (one after another, the
	# last could come after the job's end on a fast host)
	"$ctl" -t 1 -D "agg-a.sumcast.test:7801,agg-b.sumcast.test:7801,127.0.0.99:7801" jobs \
		> "$tmp/ctl-jobs.txt" 2> "$tmp/ctl-jobs.err" &
	p1=$!
	"$ctl" -t 1 -A "srv:pool.sumcast.test,127.0.0.99" -j jobs > "$tmp/ctl-jobs.json" 2>/dev/null &
	p2=$!
	"$ctl" -t 1 -i 0 -A "aggs.sumcast.test" status > "$tmp/ctl-status.txt" 2>&1 &
	p3=$!
	wait $p1; rc=$?
	wait $p2; rcj=$?
	wait $p3; rcs=$?
	wait $hp || ko "fleet: harness failed"
	cat "$tmp/ctl-jobs.txt"
	[ $rc = 2 ] && [ $rcj = 2 ] && [ $rcs = 0 ] && ok "fleet: exit 2 with a daemon down, 0 with all up" ||
		ko "fleet: exits $rc, $rcj (want 2) and $rcs (want 0)"
	grep -Eq '^0x[0-9a-f]+ +fleet-job-1 +[a-z]+ +3/3 +2 ' "$tmp/ctl-jobs.txt" &&
		ok "fleet: one row for the job, by id and label, on 2 aggregators, 3/3 ranks" ||
		ko "fleet: no job row with label fleet-job-1 on 2 aggregators"
	[ "$(grep -c '^  on 127.0.0.[23]:7801' "$tmp/ctl-jobs.txt")" = 2 ] &&
		ok "fleet: the job's row per aggregator" || ko "fleet: not one row per aggregator"
	grep -q '127.0.0.99:7801 DOWN: ' "$tmp/ctl-jobs.txt" && ok "fleet: the dead daemon is a row" ||
		ko "fleet: no DOWN row for 127.0.0.99:7801"
	grep -q 'did not answer' "$tmp/ctl-jobs.err" || ko "fleet: no word on stderr of the dead daemon"
	"${PYTHON:-python3}" - "$tmp/ctl-jobs.json" <<'EOF' && ok "fleet: --json jobs and daemons" || ko "fleet: --json"
import json, sys
j = json.load(open(sys.argv[1]))
d = {x["endpoint"]: x for x in j["daemons"]}
assert d["127.0.0.99:7801"]["up"] is False and d["127.0.0.99:7801"]["error"], d
assert d["127.0.0.2:7801"]["up"] and d["127.0.0.3:7801"]["up"], d
job = [x for x in j["jobs"] if x["label"] == "fleet-job-1"]
assert len(job) == 1, j["jobs"]
job = job[0]
assert [a["daemon"] for a in job["aggregators"]] == ["127.0.0.3:7801", "127.0.0.2:7801"], job
assert job["nranks"] == 3 and job["joined"] == 3, job
EOF
	grep -q '^127.0.0.2:7801 *ok' "$tmp/ctl-status.txt" && grep -q '^127.0.0.3:7801 *ok' "$tmp/ctl-status.txt" &&
		ok "fleet: status, one row per daemon of a name" || ko "fleet: status rows"
fi

echo "dns_aggs: $pass passed, $fail failed"
[ $fail -eq 0 ]
