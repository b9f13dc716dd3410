#!/bin/sh
# Cross-builds the reduce kernels for aarch64 (SUMCAST_NEON_ONLY: common/
# reduce + log, test_reduce, bench reduce) and runs the unit test, plus a
# quick bench smoke, under qemu-user. Needs gcc-aarch64-linux-gnu, its C
# library libc6-dev-arm64-cross (only a recommend of the compiler), qemu-user
# and the arm64 cmocka (dpkg --add-architecture arm64 && apt-get install
# libcmocka-dev:arm64); `scripts/deps.sh --test` installs them all. Exits 77
# (skip) with the reason if any of them is missing.
#
# Usage: scripts/test-neon.sh [build-dir]   (default: build-neon)
set -eu

src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-neon}
cc=aarch64-linux-gnu-gcc
sysroot=/usr/aarch64-linux-gnu

skip() { echo "test-neon: SKIP: $*" >&2; exit 77; }

command -v "$cc" >/dev/null 2>&1 || skip "$cc not found (apt-get install gcc-aarch64-linux-gnu)"
qemu=$(command -v qemu-aarch64 || command -v qemu-aarch64-static || true)
[ -n "$qemu" ] || skip "qemu-aarch64 not found (apt-get install qemu-user)"
[ -d "$sysroot" ] || skip "$sysroot missing (aarch64 libc for qemu -L)"
[ -e "$sysroot/lib/Scrt1.o" ] ||
	skip "no arm64 C library to link with: $sysroot/lib/Scrt1.o (apt-get install libc6-dev-arm64-cross)"
PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig
export PKG_CONFIG_LIBDIR
pkg-config --exists cmocka ||
	skip "no arm64 cmocka (dpkg --add-architecture arm64 && apt-get install libcmocka-dev:arm64)"

mkdir -p "$build"
cmake -S "$src" -B "$build" -DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=aarch64 \
	-DCMAKE_C_COMPILER="$cc" -DSUMCAST_NEON_ONLY=ON -DSUMCAST_WERROR=ON \
	-DCMAKE_FIND_ROOT_PATH="$sysroot" >"$build/configure.log" 2>&1 ||
	{ cat "$build/configure.log"; exit 1; }
cmake --build "$build" -j2

# libcmocka.so.0 for arm64 lives in the multiarch dir, libc in the sysroot.
QEMU_LD_PREFIX=$sysroot
LD_LIBRARY_PATH=/usr/lib/aarch64-linux-gnu
export QEMU_LD_PREFIX LD_LIBRARY_PATH
echo "== test_reduce under $qemu"
"$qemu" -L "$sysroot" "$build/tests/test_reduce"
echo "== bench reduce --quick under qemu (emulated: the numbers mean nothing)"
"$qemu" -L "$sysroot" "$build/bench/reduce" --quick --type f32,f16,bf16 >/dev/null
echo "test-neon: OK"
