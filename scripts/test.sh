#!/usr/bin/env bash
# The whole test suite: installs what it needs, builds with -Werror, runs
# every test under ctest (unit, functional, fuzz smoke, NEON under qemu).
# Usage: scripts/test.sh [extra ctest args]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh gcc-aarch64-linux-gnu qemu-user
build=${SUMCAST_BUILD_DIR:-build}
cmake -S . -B "$build" -DSUMCAST_WERROR=ON >/dev/null
cmake --build "$build" -j"$(nproc)"
cd "$build"
ctest --output-on-failure -j"$(nproc)" --timeout 600 "$@"
