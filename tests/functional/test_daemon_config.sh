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
SUMCASTD_JOB_MAX_JOBS=7 "$bin" --dump-config | grep -q '^max-jobs = 7$' && ok || ko "env override not applied"
SUMCASTD_JOB_MAX_JOBZ=7 "$bin" --check-config > /dev/null 2>&1 && ko "misspelt env override accepted" || ok
echo "test_daemon_config: $pass passed, $fail failed"
[ $fail -eq 0 ]
