#!/usr/bin/env bash
# Operations checks against a real sumcastd with a real job flowing.
#
#   live.sh MODE SUMCASTD SC_JOBGEN SUMCASTCTL SRCDIR PYTHON
#
# Starts sumcastd (ports 0 + port file, tcp;ofi_rxm on 127.0.0.1, 2 data
# threads), then sc_jobgen: 4 ranks, f32 sum allreduces for a few seconds,
# rank 2 sleeping before each call so it is the straggler. While the job runs
# and after it ends, MODE checks:
#   metrics    /metrics passes promlint.py (strict grammar + naming) and
#              `promtool check metrics` when installed; counters move; the
#              gauges see the job; 4 joins, a job started and finished; no
#              errors, aborts or refusals counted; process_* sane.
#   dashboard  two daemons, the job over both. Every metric
#              conf/grafana/sumcast.json queries exists in the scrape, every
#              metric docs/operations.md documents has a panel
#              (dashboard_check.py). With the prometheus server installed, it
#              scrapes both daemons every 500 ms with
#              conf/prometheus/sumcast-alerts.yml loaded: every panel's query
#              returns data, the targets are up, the job shows as the daemons
#              saw it, every metric the rules use is there, every rule
#              evaluates and none fires (prom_check.py job); daemon 2 stopped,
#              SumcastAggregatorDown goes pending for it (prom_check.py down).
#   ctl        sumcastctl status/jobs/top/config/metrics, human and --json;
#              the straggler is rank 2; unreachable and silent daemons give
#              exit 2 within the timeout; usage errors give 64; every
#              command's --help asks no daemon; global options (--daemon)
#              before or after the command; metrics NAME matching nothing
#              exits 1; config shows the ports bound.
# SUMCAST_OPS_EVIDENCE=DIR keeps the outputs (scrapes, sumcastctl, PNGs).
# Exit 0 pass, 1 fail, 77 skip.
set -u
mode=$1 sumcastd=$2 jobgen=$3 ctl=$4 src=$5 py=$6
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d /tmp/sumcast-ops.XXXXXX) || exit 1
evidence=${SUMCAST_OPS_EVIDENCE:-}
pass=0 fail=0
dpid= jpid= ppid= bpid=
ok() { pass=$((pass + 1)); }
ko() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
cleanup() {
	for p in $jpid $ppid $bpid $dpid; do kill "$p" 2>/dev/null; done
	for p in $jpid $ppid $bpid $dpid; do wait "$p" 2>/dev/null; done
	if [ $fail -ne 0 ]; then
		for f in "$tmp/sumcastd.log" "$tmp/b/sumcastd.log" "$tmp/prometheus.log"; do
			[ -f "$f" ] && { echo "--- $f (tail)" >&2; tail -30 "$f" >&2; }
		done
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
for v in $(env | sed -n 's/^\(SUMCASTD_[A-Z0-9_]*\)=.*/\1/p'); do unset "$v"; done
command -v curl >/dev/null || { echo "SKIP: curl not installed"; exit 77; }
if [ "$mode" = ctl ] && [ -z "$ctl" ]; then
	echo "SKIP: sumcastctl not built (needs libcurl4-openssl-dev, libjansson-dev)"; exit 77
fi

# start_daemon DIR: sumcastd on 127.0.0.1 with ports 0 and DIR/ports; sets
# spid, shttp and sctl once /healthz answers (15 s at most).
start_daemon() {
	local dir=$1
	mkdir -p "$dir"
	cat > "$dir/sumcastd.conf" <<EOF
[control]
port = 0
port-file = $dir/ports
drain-timeout = 2s
[http]
port = 0
[fabric]
provider = tcp;ofi_rxm
node = 127.0.0.1
[data]
threads = 2
EOF
	"$sumcastd" -c "$dir/sumcastd.conf" > "$dir/sumcastd.log" 2>&1 &
	spid=$!
	shttp= sctl=
	for _ in $(seq 150); do
		if [ -s "$dir/ports" ]; then
			sctl=$(sed -n 's/.*control=\([0-9]*\).*/\1/p' "$dir/ports")
			shttp=$(sed -n 's/.*http=\([0-9]*\).*/\1/p' "$dir/ports")
			curl -sf --max-time 2 "http://127.0.0.1:$shttp/healthz" >/dev/null && return 0
		fi
		kill -0 $spid 2>/dev/null || { echo "sumcastd exited at start" >&2; cat "$dir/sumcastd.log" >&2; exit 1; }
		sleep 0.1
	done
	echo "sumcastd not healthy within 15 s" >&2
	exit 1
}
start_daemon "$tmp"
dpid=$spid http=$shttp ctlport=$sctl
aggs=127.0.0.1:$ctlport
# dashboard: a second daemon, so that Prometheus has two aggregators.
bhttp=
if [ "$mode" = dashboard ]; then
	start_daemon "$tmp/b"
	bpid=$spid bhttp=$shttp
	aggs=$aggs,127.0.0.1:$sctl
fi
base="http://127.0.0.1:$http"
scrape() { curl -sf --max-time 5 "$base/metrics" > "$1"; }
metric() { # metric FILE NAME{labels}: value, summed over label sets when no labels given
	awk -v n="$2" '$1 == n || index($1, n "{") == 1 { s += $2; f = 1 } END { if (f) print s; else print "nan" }' "$1"
}

# Prometheus server (dashboard mode): scrapes every second during the job.
prom_port=
if [ "$mode" = dashboard ] && command -v prometheus >/dev/null; then
	prom_port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	cat > "$tmp/prometheus.yml" <<EOF
global:
  scrape_interval: 500ms
  evaluation_interval: 500ms
rule_files:
  - $src/conf/prometheus/sumcast-alerts.yml
scrape_configs:
  - job_name: sumcast
    static_configs:
      - targets: ['127.0.0.1:$http', '127.0.0.1:$bhttp']
EOF
	prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/tsdb" \
		--web.listen-address="127.0.0.1:$prom_port" > "$tmp/prometheus.log" 2>&1 &
	ppid=$!
	# Scrapes must cover the whole job: wait until the server has both.
	for _ in $(seq 300); do
		curl -sf --max-time 1 "http://127.0.0.1:$prom_port/api/v1/query?query=count(sumcast_build_info)" |
			grep -q '"2"\]' && break
		kill -0 $ppid 2>/dev/null || { ko "prometheus exited: $(tail -5 "$tmp/prometheus.log")"; break; }
		sleep 0.1
	done
fi

scrape "$tmp/idle.prom" && ok || ko "idle scrape failed"
seconds=${SUMCAST_OPS_JOB_SECONDS:-6}
[ "$mode" != metrics ] && seconds=${SUMCAST_OPS_JOB_SECONDS:-12}
"$jobgen" --aggs "$aggs" --ranks 4 --seconds "$seconds" --count 262144 \
	--slow-rank 2 --slow-us 20000 --job-id 0x5eed > "$tmp/jobgen.log" 2>&1 &
jpid=$!
# Wait until the job is serving (jobs gauge 1 and chunks moving), at most 20 s.
for _ in $(seq 200); do
	scrape "$tmp/busy.prom"
	[ "$(metric "$tmp/busy.prom" sumcast_jobs)" = 1 ] &&
		[ "$(metric "$tmp/busy.prom" sumcast_chunks_reduced_total)" != 0 ] && break
	kill -0 $jpid 2>/dev/null || break
	sleep 0.1
done
sleep 1.5
scrape "$tmp/busy.prom" && ok || ko "scrape during the job failed"
[ "$(metric "$tmp/busy.prom" sumcast_jobs)" = 1 ] && ok || ko "sumcast_jobs is not 1 during the job"

mode_during() {
	case $mode in
	metrics)
		[ "$(metric "$tmp/busy.prom" sumcast_ranks)" = 4 ] && ok || ko "sumcast_ranks is not 4 during the job"
		;;
	ctl)
		"$ctl" -p "$http" status > "$tmp/status.txt" 2>&1 && ok || ko "sumcastctl status: $(cat "$tmp/status.txt")"
		"$ctl" -p "$http" jobs > "$tmp/jobs.txt" 2>&1 && ok || ko "sumcastctl jobs: $(cat "$tmp/jobs.txt")"
		"$ctl" -p "$http" --json status > "$tmp/status.json" 2>&1 && ok || ko "sumcastctl --json status"
		"$ctl" -p "$http" --json jobs > "$tmp/jobs.json" 2>&1 && ok || ko "sumcastctl --json jobs"
		timeout 20 "$ctl" -p "$http" --iterations 2 --interval 0.5 top > "$tmp/top.txt" 2>&1 && ok ||
			ko "sumcastctl top --iterations 2: $(cat "$tmp/top.txt")"
		timeout 20 "$ctl" -p "$http" --json -n 2 -i 0.5 top > "$tmp/top.json" 2>&1 && ok || ko "sumcastctl --json top"
		"$py" - "$tmp" <<'EOF' && ok || ko "sumcastctl output checks"
import json, sys
d = sys.argv[1]
bad = []
st = json.load(open(d + "/status.json"))
if st["jobs"] != 1 or st["ranks"] != 4: bad.append("status: jobs %s ranks %s" % (st["jobs"], st["ranks"]))
if not st["rate"]["received_bytes_per_second"] > 0: bad.append("status: no input rate")
if not st["rate"]["sent_bytes_per_second"] > 0: bad.append("status: no output rate")
if st["rate"]["method"] != "sampled" or not 0.5 < st["rate"]["interval_seconds"] < 3: bad.append("status: rate %r" % st["rate"])
if st["health"] != "ok" or st["threads"] != 2 or "tcp" not in st["provider"]: bad.append("status: %r" % st)
if "p99" not in st["reduce_duration_seconds"]: bad.append("status: no reduce p99")
if st["errors"]["total"] != 0: bad.append("status: errors %r" % st["errors"])
jobs = json.load(open(d + "/jobs.json"))
if len(jobs) != 1: bad.append("jobs: %d entries" % len(jobs))
else:
    j = jobs[0]
    if j["nranks"] != 4 or j["joined"] != 4 or j["state"] != "ready": bad.append("jobs: %r" % j)
    if not j["chunks"] > 0 or not j["received_bytes"] > 0: bad.append("jobs: no traffic")
    s = j["slowest_rank"]
    if not s or s["rank"] != 2: bad.append("jobs: slowest rank %r, want rank 2" % s)
    elif not (s["last_share"] > 0.4 and s["mean_wait_seconds"] > 0): bad.append("jobs: straggler %r" % s)
    if j["id"] != "0x5eed": bad.append("jobs: id %s, want 0x5eed" % j["id"])
lines = [l for l in open(d + "/top.json") if l.strip()]
if len(lines) != 2: bad.append("top --json: %d frames, want 2" % len(lines))
for l in lines:
    f = json.loads(l)
    if f["jobs"] != 1 or len(f["jobs_detail"]) != 1: bad.append("top frame: %r" % f["jobs"])
top = open(d + "/top.txt").read()
if top.count("sumcastctl top") != 2 or "rank 2" not in top: bad.append("top text:\n" + top)
txt = open(d + "/jobs.txt").read()
if "0x5eed" not in txt or "rank 2" not in txt: bad.append("jobs text:\n" + txt)
txt = open(d + "/status.txt").read()
for w in ("throughput", "uptime", "reduce time", "straggler", "errors", "jobs"):
    if w not in txt: bad.append("status text lacks %r:\n%s" % (w, txt))
for b in bad: print(b)
sys.exit(1 if bad else 0)
EOF
		;;
	esac
}
mode_during

wait $jpid; jrc=$?; jpid=
if [ $jrc -eq 77 ]; then echo "SKIP: $(cat "$tmp/jobgen.log")"; exit 77; fi
[ $jrc -eq 0 ] && ok || ko "sc_jobgen exited $jrc: $(tail -5 "$tmp/jobgen.log")"
sleep 1.5 # let Prometheus take a scrape after the job
scrape "$tmp/after.prom" && ok || ko "scrape after the job failed"

case $mode in
metrics)
	"$py" "$here/promlint.py" --self-test && ok || ko "promlint.py self-test: the linter misses problems"
	for f in idle busy after; do
		"$py" "$here/promlint.py" "$tmp/$f.prom" && ok || ko "promlint: $f.prom"
	done
	if command -v promtool >/dev/null; then
		for f in idle busy after; do
			out=$(promtool check metrics < "$tmp/$f.prom" 2>&1) && [ -z "$out" ] && ok ||
				ko "promtool check metrics ($f.prom): $out"
		done
	else
		echo "note: promtool not installed (apt-get install prometheus); strict parser only"
	fi
	b=$(metric "$tmp/busy.prom" sumcast_received_bytes_total) a=$(metric "$tmp/after.prom" sumcast_received_bytes_total)
	awk -v a="$a" -v b="$b" 'BEGIN { exit !(a > b && b > 0) }' && ok || ko "received bytes did not grow: $b -> $a"
	c=$(metric "$tmp/after.prom" sumcast_chunks_reduced_total)
	n=$(metric "$tmp/after.prom" sumcast_reduce_duration_seconds_count)
	[ "$c" = "$n" ] && ok || ko "chunks reduced ($c) != reduce histogram count ($n)"
	e=$(metric "$tmp/after.prom" sumcast_errors_total)
	[ "$e" = 0 ] && ok || ko "errors counted in a clean job: $(grep '^sumcast_errors_total' "$tmp/after.prom" | grep -v ' 0$')"
	[ "$(metric "$tmp/after.prom" sumcast_jobs)" = 0 ] && ok || ko "sumcast_jobs is not 0 after the job"
	for m in sumcast_joins_total:4 sumcast_jobs_started_total:1 sumcast_jobs_finished_total:1 \
		sumcast_jobs_aborted_total:0 sumcast_joins_refused_total:0 sumcast_shutdown_jobs_aborted_total:0; do
		v=$(metric "$tmp/after.prom" "${m%%:*}")
		[ "$v" = "${m#*:}" ] && ok || ko "${m%%:*} is $v after the job, want ${m#*:}"
	done
	awk '$1 == "process_open_fds" { o = $2 } $1 == "process_max_fds" { m = $2 }
		$1 == "process_resident_memory_bytes" { r = $2 } END { exit !(o > 3 && o < m && r > 1e6) }' \
		"$tmp/after.prom" && ok || ko "process_*: $(grep '^process_' "$tmp/after.prom" | tr '\n' ' ')"
	;;
dashboard)
	"$py" "$here/dashboard_check.py" "$src/conf/grafana/sumcast.json" "$tmp/busy.prom" \
		--docs "$src/docs/operations.md" \
		${prom_port:+--prometheus "http://127.0.0.1:$prom_port"} \
		${evidence:+--render "$evidence"} && ok || ko "dashboard check"
	if [ -n "$prom_port" ]; then
		purl=http://127.0.0.1:$prom_port
		"$py" "$here/prom_check.py" "$purl" job "$src/conf/prometheus/sumcast-alerts.yml" 4 \
			"127.0.0.1:$http" "127.0.0.1:$bhttp" && ok || ko "prometheus: the job, the targets, the alerts"
		# A normal stop of daemon 2 (no jobs: it exits at once): its target goes down.
		kill -TERM $bpid; wait $bpid; brc=$?; bpid=
		[ $brc -eq 0 ] && ok || ko "daemon 2 exited $brc on SIGTERM"
		"$py" "$here/prom_check.py" "$purl" down "127.0.0.1:$bhttp" && ok || ko "prometheus: daemon 2 down"
	else
		echo "note: prometheus not installed (apt-get install prometheus); no server-side checks"
	fi
	;;
ctl)
	"$ctl" -p "$http" config > "$tmp/config.txt" 2>&1 && grep -q provider "$tmp/config.txt" && ok ||
		ko "sumcastctl config: $(cat "$tmp/config.txt")"
	"$ctl" -p "$http" --json config | "$py" -c 'import json,sys; json.load(sys.stdin)' && ok || ko "sumcastctl --json config"
	"$ctl" -p "$http" metrics sumcast_jobs | grep -q '^sumcast_jobs 0$' && ok || ko "sumcastctl metrics PREFIX"
	"$ctl" -p "$http" --json metrics | "$py" -c '
import json, sys
m = json.load(sys.stdin)
assert any(s["name"] == "sumcast_build_info" and "version" in s["labels"] for s in m)
assert any(s["name"] == "sumcast_errors_total" and "kind" in s["labels"] for s in m)' && ok || ko "sumcastctl --json metrics"
	"$ctl" -p "$http" -i 0 status | grep -q "average since start" && ok || ko "status -i 0"
	"$ctl" -p "$http" jobs | grep -q "no jobs" && ok || ko "jobs after the job ended"
	# A port nobody listens on: exit 2 at once, with a message.
	dead=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	t0=$(date +%s%N)
	"$ctl" -p "$dead" status > "$tmp/dead.txt" 2>&1; rc=$?
	t1=$(date +%s%N)
	[ $rc -eq 2 ] && grep -q "cannot read" "$tmp/dead.txt" && ok || ko "closed port: exit $rc: $(cat "$tmp/dead.txt")"
	[ $(((t1 - t0) / 1000000)) -lt 3000 ] && ok || ko "closed port took $(((t1 - t0) / 1000000)) ms"
	# --help of every command answers at once with a port nobody listens on:
	# it asks no daemon (one that did would exit 2).
	for c in status jobs top config metrics drain plan profile; do
		out=$("$ctl" -p "$dead" $c --help 2>&1); rc=$?
		[ $rc -eq 0 ] && printf '%s' "$out" | grep -q "^Usage: sumcastctl" && ok ||
			ko "$c --help: exit $rc: $out"
	done
	# Global options before or after the command, --daemon in both places.
	for args in "--daemon 127.0.0.1:$http status" "status --daemon 127.0.0.1:$http" \
		"--daemon http://127.0.0.1:$http/ -i 0 status" "status -i 0 -p $http" "status --port=$http -i0"; do
		"$ctl" -p "$dead" $args > "$tmp/g.txt" 2>&1 && grep -q "sumcastd .* at 127.0.0.1:$http: ok" "$tmp/g.txt" &&
			ok || ko "sumcastctl $args: $(cat "$tmp/g.txt")"
	done
	# status --json (the flag after the command) is JSON with the daemon's ports
	"$ctl" -p "$http" status --json -i 0 > "$tmp/sj.json" 2>&1 && "$py" - "$tmp/sj.json" "$http" <<'PYEOF' && ok || ko "status --json: $(cat "$tmp/sj.json")"
import json, sys
st = json.load(open(sys.argv[1]))
assert st["health"] == "ok" and st["port"] == int(sys.argv[2]), st
PYEOF
	"$ctl" -p "$http" --json jobs --json > "$tmp/jj.json" 2>&1 && "$py" -c 'import json,sys; assert json.load(open(sys.argv[1])) == []' "$tmp/jj.json" &&
		ok || ko "--json jobs --json: $(cat "$tmp/jj.json")"
	# usage errors after the command: exit 64 with the command named
	"$ctl" -p "$http" status bogus > /dev/null 2> "$tmp/u.txt"; rc=$?
	[ $rc -eq 64 ] && grep -q "sumcastctl status: unexpected argument bogus" "$tmp/u.txt" && ok ||
		ko "status bogus: exit $rc: $(cat "$tmp/u.txt")"
	"$ctl" -p "$http" jobs --frob > /dev/null 2> "$tmp/u.txt"; rc=$?
	[ $rc -eq 64 ] && grep -q "unknown option --frob" "$tmp/u.txt" && ok || ko "jobs --frob: exit $rc: $(cat "$tmp/u.txt")"
	"$ctl" -p 7801.5 status > /dev/null 2> "$tmp/u.txt"; rc=$?
	[ $rc -eq 64 ] && grep -q "not a whole number" "$tmp/u.txt" && ok || ko "-p 7801.5: exit $rc: $(cat "$tmp/u.txt")"
	# metrics NAME that matches nothing: exit 1, a sentence on stderr, nothing on stdout
	"$ctl" -p "$http" metrics sumcast_no_such_family > "$tmp/m.out" 2> "$tmp/m.err"; rc=$?
	[ $rc -eq 1 ] && [ ! -s "$tmp/m.out" ] && grep -q 'no metric starts with "sumcast_no_such_family"' "$tmp/m.err" &&
		ok || ko "metrics with no match: exit $rc, stdout $(cat "$tmp/m.out"), stderr $(cat "$tmp/m.err")"
	"$ctl" -p "$http" --json metrics sumcast_no_such_family > "$tmp/m.out" 2> "$tmp/m.err"; rc=$?
	[ $rc -eq 1 ] && [ ! -s "$tmp/m.out" ] && ok || ko "--json metrics with no match: exit $rc"
	# config: the ports bound (the file says 0), both of them
	"$ctl" -p "$http" config > "$tmp/config.txt" 2>&1
	grep -q "^port = $http    # bound; configured 0" "$tmp/config.txt" &&
		grep -q "^port = $ctlport    # bound; configured 0" "$tmp/config.txt" &&
		! grep -q "^port = 0" "$tmp/config.txt" && ok || ko "config ports: $(grep -n port "$tmp/config.txt")"
	"$ctl" -p "$http" config --json | "$py" -c '
import json, sys
s = {(e["section"], e["key"]): e for e in json.load(sys.stdin)["settings"]}
assert s[("http", "port")]["bound"] == sys.argv[1] and s[("control", "port")]["bound"] == sys.argv[2], s[("http", "port")]' "$http" "$ctlport" &&
		ok || ko "config --json: no bound ports"
	# A daemon that accepts and never answers: exit 2 after --timeout, not a hang.
	"$py" -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
print(s.getsockname()[1], flush=True)
c, _ = s.accept(); time.sleep(30)' > "$tmp/silent.port" &
spid=$!
	for _ in $(seq 50); do [ -s "$tmp/silent.port" ] && break; sleep 0.1; done
	t0=$(date +%s%N)
	timeout 10 "$ctl" -p "$(cat "$tmp/silent.port")" --timeout 1 jobs > "$tmp/silent.txt" 2>&1; rc=$?
	t1=$(date +%s%N)
	kill $spid 2>/dev/null; wait $spid 2>/dev/null
	[ $rc -eq 2 ] && ok || ko "silent daemon: exit $rc (124 = hung): $(cat "$tmp/silent.txt")"
	ms=$(((t1 - t0) / 1000000))
	[ $ms -ge 900 ] && [ $ms -lt 3000 ] && ok || ko "silent daemon took $ms ms with --timeout 1"
	"$ctl" bogus > /dev/null 2>&1; [ $? -eq 64 ] && ok || ko "unknown command: exit not 64"
	"$ctl" --port 0 status > /dev/null 2>&1; [ $? -eq 64 ] && ok || ko "--port 0: exit not 64"
	;;
esac

if [ -n "$evidence" ]; then
	mkdir -p "$evidence"
	cp "$tmp"/*.prom "$tmp"/*.txt "$tmp"/*.json "$tmp/jobgen.log" "$evidence/" 2>/dev/null
fi
kill -TERM $dpid; wait $dpid; drc=$?; dpid=
[ $drc -eq 0 ] && ok || ko "sumcastd exited $drc on SIGTERM"
echo "ops/$mode: $pass passed, $fail failed"
[ $fail -eq 0 ]
