#!/usr/bin/env bash
# Coverage-guided fuzzing of every parser with libFuzzer (clang, ASan, UBSan).
# Usage: scripts/fuzz.sh [seconds per target, default 15]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-15}
build=${SUMCAST_FUZZ_BUILD_DIR:-build-fuzz}
CC=clang cmake -S . -B "$build" -DSUMCAST_FUZZ=ON -DSUMCAST_FUZZ_SECONDS="$secs" >/dev/null
targets=$(cd tests/fuzz && ls fuzz_*.c | sed 's/\.c$//')
# shellcheck disable=SC2086
cmake --build "$build" -j"$(nproc)" --target $targets
cd "$build" && ctest --output-on-failure -L fuzz
