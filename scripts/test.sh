#!/usr/bin/env bash
# The whole test suite: installs what it needs, builds with -Werror, runs
# every test under ctest (unit, functional with real daemons, plugin
# harness, ops, emulated cluster smoke, fuzzing, NEON under qemu).
# Usage: scripts/test.sh [extra ctest args]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh gcc-aarch64-linux-gnu qemu-user
# The NEON test links the arm64 cmocka (multiarch).
if ! dpkg-query -W -f='${Status}' libcmocka-dev:arm64 2>/dev/null | grep -q "install ok installed"; then
	if [ "$(id -u)" -eq 0 ]; then
		echo "deps: installing libcmocka-dev:arm64 (multiarch)" >&2
		dpkg --add-architecture arm64
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			libcmocka-dev:arm64 >/dev/null || echo "deps: no arm64 cmocka; the NEON test will skip" >&2
	fi
fi
build=${SUMCAST_BUILD_DIR:-build}
cmake -S . -B "$build" -DSUMCAST_WERROR=ON >/dev/null
cmake --build "$build" -j"$(nproc)"
cd "$build"
ctest --output-on-failure -j"$(nproc)" --timeout 900 "$@"
