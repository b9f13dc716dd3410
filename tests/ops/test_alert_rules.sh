#!/usr/bin/env bash
# conf/prometheus/sumcast-alerts.yml with the real promtool:
#
#   test_alert_rules.sh SRCDIR
#
# `promtool check rules` (syntax, PromQL), `promtool test rules` on
# sumcast-alerts.test.yml (each rule fires on the series it is meant for, at
# the time its `for` allows, and not on the healthy ones), every alert of the
# rules file has a case there, and every metric a rule names is one
# docs/operations.md documents. Exit 0 pass, 1 fail, 77 skip (no promtool).
set -u
src=$1
dir=$src/conf/prometheus
command -v promtool >/dev/null || { echo "SKIP: promtool not installed (apt-get install prometheus)"; exit 77; }
fail=0
ko() { fail=1; echo "FAIL: $*" >&2; }

out=$(promtool check rules "$dir/sumcast-alerts.yml" 2>&1) || ko "promtool check rules: $out"
echo "$out"
# promtool resolves rule_files from the test file's directory.
out=$(cd "$dir" && promtool test rules sumcast-alerts.test.yml 2>&1) || ko "promtool test rules: $out"
echo "$out"

alerts=$(sed -n 's/^ *- alert: *\([A-Za-z0-9_]*\).*/\1/p' "$dir/sumcast-alerts.yml")
[ -n "$alerts" ] || ko "no alerts found in sumcast-alerts.yml"
for a in $alerts; do
	grep -q "alertname: *$a *$" "$dir/sumcast-alerts.test.yml" || ko "alert $a has no case in sumcast-alerts.test.yml"
	# The ops table in the docs names every alert.
	grep -q "\`$a\`" "$src/docs/operations.md" || ko "alert $a is not in docs/operations.md (Alerts)"
done
# Every metric a rule uses is documented (up is Prometheus' own).
for m in $(grep -o '\b\(sumcast\|process\)_[a-z_]*' "$dir/sumcast-alerts.yml" | sed 's/_bucket$//' | sort -u); do
	grep -q "\`$m\`\|\`$m{" "$src/docs/operations.md" || ko "the rules use $m, which docs/operations.md does not document"
done
echo "alerts: $(echo $alerts | wc -w) rules, each with a case"
exit $fail
