#!/bin/sh
# The p2p test with NCCL's profiler side played by the harness and the
# profiler being tests/gpu's recorder (libnccl-profiler-sumcast-rec.so,
# loaded as NCCL loads a profiler plugin), then tests/gpu/prof_check.py on
# what it wrote: the chain tests/gpu/run.sh uses under real NCCL, here on
# the CPU. Fails when the harness fails, or when the files hold fewer than
# 100 Sumcast events, an unclosed one, or one not nested in an open step.
# Usage: prof_record_p2p.sh HARNESS PROFILER.so CHECKER.py [harness options]
set -u
h=$1 lib=$2 check=$3
shift 3
command -v python3 >/dev/null || { echo "SKIP: no python3 for $check"; exit 77; }
dir=$(mktemp -d /tmp/sumcast-prof-XXXXXX) || exit 1
trap 'rm -rf "$dir"' EXIT
SUMCAST_PROF_RECORD=$dir/prof "$h" p2p --profiler "$lib" "$@" || exit 1
python3 "$check" "$dir/prof" --min 100
