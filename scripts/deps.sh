#!/usr/bin/env bash
# Installs the Debian 12 packages Sumcast needs. Idempotent: installs only
# what is missing (nothing to do: no apt, no root needed). Needs root (or
# sudo) when something is missing. Every package the README's two commands
# need is named here, so they work on a fresh minbase Debian 12
# (scripts/fresh-check.sh checks that): apt installs no recommends.
#
# Usage: scripts/deps.sh [--test] [extra packages...]
#   (none)   build everything and run the demo (scripts/demo.sh)
#   --test   also what the whole suite runs (scripts/test.sh)
#   extra    more packages; NAME:arch (e.g. libcmocka-dev:arm64) adds that
#            architecture to dpkg first (multiarch)
set -euo pipefail

# Build and run: compiler, CMake, the libraries (libfabric, libevent, inih,
# cmocka, libcrypto, libsystemd, libcurl + jansson for sumcastctl, rdma-core's
# librdmacm + libibverbs for InfiniBand/RoCE multicast results), and the
# tools the demo and the daemon's scripts call.
pkgs=(build-essential cmake pkg-config
      libfabric-dev libfabric-bin libevent-dev libinih-dev libcmocka-dev libssl-dev
      libsystemd-dev libcurl4-openssl-dev libjansson-dev librdmacm-dev libibverbs-dev
      iproute2 procps python3)
# The suite, by test:
#   fuzz/libfuzzer  clang + libFuzzer runtime (ASan, UBSan)
#   cross/neon      arm64 cross compiler, its C library (crt*.o, libc.so:
#                   a recommend of gcc-aarch64-linux-gnu, so not pulled in
#                   here), qemu-user, the arm64 cmocka (multiarch)
#   ops/*           curl (live daemon), prometheus (promtool lints /metrics,
#                   the server evaluates the Grafana dashboard's queries;
#                   ~30 s to install; on a host booted with systemd Debian's
#                   package also enables prometheus.service on :9090 --
#                   `systemctl disable --now prometheus` if unwanted),
#                   file (cpack -G DEB runs it on every packaged file),
#                   systemd (systemd-analyze verify of the packaged unit),
#                   systemd-container + debootstrap (ops/systemd boots the
#                   .deb in systemd-nspawn; it skips until its cached root
#                   is made: docs/operations.md, Tests)
#   plugin/exports  binutils (nm -D)
#   plugin/dns_*    dnsmasq-base (a real DNS server with A and SRV records for
#                   SUMCAST_AGGREGATORS by name, in a network namespace)
#   cluster/smoke   OpenMPI (mpirun, mpicc: the MPI peer), gnuplot (plots)
#   lf26 stage      autoconf, automake, libtool (scripts/libfabric.sh builds
#                   libfabric 2.6 from its release source: autogen.sh)
test_pkgs=(clang libclang-rt-14-dev libfuzzer-14-dev
           gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user libcmocka-dev:arm64
           curl prometheus file systemd systemd-container debootstrap binutils dnsmasq-base
           openmpi-bin libopenmpi-dev gnuplot-nox
           autoconf automake libtool)

if [ "${1:-}" = --test ]; then
	shift
	pkgs+=("${test_pkgs[@]}")
fi
pkgs+=("$@")

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null || { echo "deps: need root to install: ${missing[*]}" >&2; exit 1; }
	SUDO=sudo
fi
# Foreign architectures the missing packages name (multiarch).
for p in "${missing[@]}"; do
	case "$p" in
	*:*)
		arch=${p##*:}
		if [ "$arch" != "$(dpkg --print-architecture)" ] &&
			! dpkg --print-foreign-architectures | grep -qx "$arch"; then
			echo "deps: dpkg --add-architecture $arch (for $p)" >&2
			$SUDO dpkg --add-architecture "$arch"
		fi
		;;
	esac
done
echo "deps: installing ${missing[*]}" >&2
$SUDO apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive \
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
