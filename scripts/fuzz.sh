#!/usr/bin/env bash
# Coverage-guided fuzzing with libFuzzer (clang, ASan, UBSan) of every
# parser (wire, config) and of the daemon's two input surfaces as they run:
# fuzz_http (the evhttp listener, its limits and routes) and fuzz_control
# (the control connections, admission, the job lifecycle and a data thread,
# several connections per input). Corpora: tests/fuzz/corpus/<target>; what
# a run finds is kept in <build>/tests/fuzz/corpus-<target>.
# Usage: scripts/fuzz.sh [seconds per target, default 15]
# Exits 77 (skip) if clang or libFuzzer is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-15}
build=${SUMCAST_FUZZ_BUILD_DIR:-build-fuzz}
command -v clang >/dev/null || { echo "fuzz: SKIP: clang not found (apt-get install clang)" >&2; exit 77; }
ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 ||
	{ echo "fuzz: SKIP: libFuzzer runtime missing (apt-get install libclang-rt-14-dev)" >&2; exit 77; }
CC=clang cmake -S . -B "$build" -DSUMCAST_FUZZ=ON -DSUMCAST_FUZZ_SECONDS="$secs" >/dev/null
targets=$(cd tests/fuzz && ls fuzz_*.c | sed 's/\.c$//')
# shellcheck disable=SC2086
cmake --build "$build" -j"$(nproc)" --target $targets >/dev/null
cd "$build" && ctest --output-on-failure -L fuzz
