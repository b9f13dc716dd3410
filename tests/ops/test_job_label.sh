#!/bin/sh
# SUMCAST_JOB_LABEL as the plugin takes it (plugin/plugin.c, docs/client.md
# "Job labels"): set, or Slurm's SLURM_JOB_ID, else POD_NAME, never
# HOSTNAME; a set label that is too long or not printable fails init with a
# sentence; one from the scheduler that is not is left out with a WARN.
# The plugin is dlopened and initialised as NCCL does (sc_plugin_settings).
# Usage: test_job_label.sh SC_PLUGIN_SETTINGS PLUGIN.so
set -u
probe=$1 plugin=$2
pass=0 fail=0
ok() { pass=$((pass + 1)); }
ko() { fail=$((fail + 1)); echo "FAIL: $*"; }
for v in $(env | sed -n 's/^\(SUMCAST_[A-Z0-9_]*\)=.*/\1/p'); do unset "$v"; done
unset SLURM_JOB_ID POD_NAME
log() { env "$@" "$probe" "$plugin" --log 2>&1; }
long=$(printf '%065d' 0)

out=$(log SLURM_JOB_ID=4242 POD_NAME=trainer-0 HOSTNAME=node7)
echo "$out" | grep -q 'SUMCAST_JOB_LABEL=4242 (from SLURM_JOB_ID)$' && ok || ko "SLURM_JOB_ID first: $out"
out=$(log POD_NAME=trainer-0 HOSTNAME=node7)
echo "$out" | grep -q 'SUMCAST_JOB_LABEL=trainer-0 (from POD_NAME)$' && ok || ko "POD_NAME: $out"
out=$(log HOSTNAME=node7)
echo "$out" | grep -q '(from ' && ko "HOSTNAME taken: $out" || ok
out=$(log SUMCAST_JOB_LABEL=llm-7b-run3 SLURM_JOB_ID=4242)
echo "$out" | grep -q 'SUMCAST_JOB_LABEL=llm-7b-run3 (env)$' && ok || ko "set label: $out"
echo "$out" | grep -q '(from SLURM_JOB_ID)' && ko "set label overridden: $out" || ok
out=$(log SUMCAST_JOB_LABEL="$long")
echo "$out" | grep -q 'WARN .*bad setting: SUMCAST_JOB_LABEL: "0*\.\.\." is 65 bytes: at most 64' && ok ||
	ko "too long: $out"
echo "$out" | grep -q '^init returned 0$' && ko "init took a 65-byte label" || ok
out=$(log SUMCAST_JOB_LABEL="$(printf 'ab\tc')")
echo "$out" | grep -q 'bad setting: SUMCAST_JOB_LABEL: byte 2 (0x09) is not printable ASCII' && ok ||
	ko "tab: $out"
echo "$out" | grep -q '^init returned 0$' && ko "init took a label with a tab" || ok
out=$(log POD_NAME="$long")
echo "$out" | grep -q 'WARN .*SUMCAST_JOB_LABEL from POD_NAME: .* is 65 bytes: at most 64; the job goes without a label' &&
	ok || ko "long POD_NAME: $out"
echo "$out" | grep -q 'bad setting' && ko "a long POD_NAME failed init: $out" || ok
echo "test_job_label: $pass passed, $fail failed"
[ $fail -eq 0 ]
