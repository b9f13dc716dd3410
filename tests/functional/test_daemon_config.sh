#!/bin/sh
# conf/sumcastd.conf must be exactly what `sumcastd --dump-config` prints, so
# the documented defaults never drift from the table; the file must pass
# --check-config, and a bad file must fail with its line number.
# Usage: test_daemon_config.sh <sumcastd> <conf/sumcastd.conf>
set -u
bin=$1 conf=$2
fail=0 pass=0
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
# Overrides from the caller's environment would change the dump.
for v in $(env | sed -n 's/^\(SUMCASTD_[A-Z0-9_]*\)=.*/\1/p'); do unset "$v"; done

ok() { pass=$((pass + 1)); }
ko() { fail=$((fail + 1)); echo "FAIL: $*"; }

"$bin" --dump-config > "$tmp/dump" || ko "--dump-config exited $?"
if diff -u "$conf" "$tmp/dump"; then ok; else
	ko "conf/sumcastd.conf differs from --dump-config (regenerate: sumcastd --dump-config > conf/sumcastd.conf)"
fi
"$bin" -c "$conf" --check-config > /dev/null && ok || ko "--check-config rejects $conf"
"$bin" -c "$conf" --dump-config | diff -q - "$tmp/dump" > /dev/null && ok || ko "dump of the file differs"
printf '[job]\nmax-jobs = 5\n[bogus]\nkey = 1\n' > "$tmp/bad.conf"
out=$("$bin" -c "$tmp/bad.conf" --check-config 2>&1); rc=$?
[ $rc -ne 0 ] && ok || ko "unknown section accepted"
echo "$out" | grep -q 'bad.conf:4:' && ok || ko "error does not name line 4: $out"
# Errors that once passed: each must fail --check-config and say where.
check_bad() { # name text expected-substring
	printf "$2" > "$tmp/$1"
	out=$("$bin" -c "$tmp/$1" --check-config 2>&1); rc=$?
	[ $rc -ne 0 ] && ok || ko "$1 accepted: $out"
	echo "$out" | grep -qF -- "$3" && ok || ko "$1: error does not say '$3': $out"
}
out=$("$bin" -c "$tmp" --check-config 2>&1); rc=$?
[ $rc -ne 0 ] && ok || ko "a directory as the config file was accepted (started with defaults)"
echo "$out" | grep -q 'Is a directory' && ok || ko "directory: $out"
check_bad dup.conf '[job]\nmax-jobs = 5\ntimeout = 3s\nmax-jobs = 6\n' 'dup.conf:4: [job] max-jobs is set again (first set on line 2)'
check_bad sect.conf '[job]\nmax-jobs = 5\n[control\nport = 1\n' 'sect.conf:3: syntax error'
check_bad host.conf '[control]\nlisten = localhost\n' 'control.listen = "localhost": not an IP address'
check_bad hhost.conf '[http]\nlisten = localhost\n' 'http.listen = "localhost": not an IP address'
check_bad anon.conf '[control]\nlisten = 0.0.0.0\n' 'auth.allow-anonymous'
check_bad mc.conf '[fabric]\nmulticast = yes\n' 'fabric.multicast = "yes": expected off, ip, auto or ib'
check_bad mcg.conf '[fabric]\nmulticast = ip\nmulticast-groups = 10.0.0.0/8\n' 'fabric.multicast-groups = "10.0.0.0/8"'
check_bad mcg2.conf '[fabric]\nmulticast-groups = 239.1.2.3/16\n' 'no host bits set'
check_bad mci.conf '[fabric]\nmulticast = auto\nmulticast-iface = eth0\n' 'multicast needs an interface'
# Not only --check-config: the daemon itself refuses to start (ports 0, so
# an old daemon that starts is stopped by timeout: 124).
printf '[control]\nlisten = 0.0.0.0\nport = 0\n[http]\nport = 0\n' > "$tmp/anon-start.conf"
out=$(timeout 10 "$bin" -c "$tmp/anon-start.conf" 2>&1); rc=$?
[ $rc -eq 1 ] && ok || ko "a keyless daemon on 0.0.0.0 started (exit $rc): $(echo "$out" | tail -2)"
printf '[control]\nlisten = 0.0.0.0\n[auth]\nallow-anonymous = true\n' > "$tmp/anon-ok.conf"
"$bin" -c "$tmp/anon-ok.conf" --check-config > /dev/null 2>&1 && ok || ko "allow-anonymous = true not accepted"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$tmp/key"
chmod 0644 "$tmp/key"
printf '[control]\nlisten = ::\n[auth]\nkey-file = %s\n' "$tmp/key" > "$tmp/key.conf"
out=$("$bin" -c "$tmp/key.conf" --check-config 2>&1) && ok || ko "keyed non-loopback config rejected: $out"
echo "$out" | grep -q 'readable by every user (mode 0644)' && ok || ko "world-readable key file: no warning: $out"
chmod 0600 "$tmp/key"
out=$("$bin" -c "$tmp/key.conf" --check-config 2>&1)
echo "$out" | grep -q 'every user' && ko "mode 0600 key file warned: $out" || ok
# multicast = ib passes the check; at start it needs an RDMA device on the
# interface (127.0.0.1 never is one): the daemon refuses, saying why; auto
# starts with IP multicast and says why not ib.
printf '[fabric]\nmulticast = ib\nnode = 127.0.0.1\n[control]\nport = 0\n[http]\nport = 0\n' > "$tmp/mcib.conf"
"$bin" -c "$tmp/mcib.conf" --check-config > /dev/null 2>&1 && ok || ko "multicast = ib fails --check-config"
out=$(timeout 10 "$bin" -c "$tmp/mcib.conf" 2>&1); rc=$?
[ $rc -eq 1 ] && ok || ko "multicast = ib without an RDMA device: exit $rc: $(echo "$out" | tail -2)"
echo "$out" | grep -q 'fabric.multicast = ib: .*\(RDMA device\|without librdmacm\)' && ok ||
	ko "multicast = ib: no reason given: $(echo "$out" | tail -2)"
sed 's/multicast = ib/multicast = auto/' "$tmp/mcib.conf" > "$tmp/mcauto.conf"
"$bin" -c "$tmp/mcauto.conf" > "$tmp/mcauto.log" 2>&1 &
dpid=$!
for _ in $(seq 100); do grep -q 'ready:' "$tmp/mcauto.log" && break; sleep 0.1; done
kill "$dpid" 2>/dev/null; wait "$dpid" 2>/dev/null
out=$(cat "$tmp/mcauto.log")
echo "$out" | grep -q 'fabric.multicast = auto: IP multicast (ib: .*)' && ok ||
	ko "multicast = auto: no line choosing ip over ib: $(echo "$out" | tail -3)"
echo "$out" | grep -q 'ready:' && ok || ko "multicast = auto: the daemon did not start: $(echo "$out" | tail -3)"
SUMCASTD_JOB_MAX_JOBS=7 "$bin" --dump-config | grep -q '^max-jobs = 7$' && ok || ko "env override not applied"
SUMCASTD_JOB_MAX_JOBZ=7 "$bin" --check-config > /dev/null 2>&1 && ko "misspelt env override accepted" || ok
echo "test_daemon_config: $pass passed, $fail failed"
[ $fail -eq 0 ]
