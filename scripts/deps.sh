#!/usr/bin/env bash
# Installs the Debian 12 packages Sumcast needs to build, test and demo.
# Idempotent: installs only what is missing. Needs root (or sudo) when
# something is missing.
set -euo pipefail

pkgs=(build-essential cmake pkg-config clang libclang-rt-14-dev libfuzzer-14-dev
      libfabric-dev libfabric-bin libevent-dev libinih-dev libcmocka-dev libssl-dev
      libsystemd-dev iproute2 procps curl python3
      libcurl4-openssl-dev libjansson-dev
      prometheus)
# libcurl + jansson: sumcastctl. prometheus: promtool lints /metrics and the
# server evaluates the Grafana dashboard's queries in tests/ops (~30 s to
# install; on a host booted with systemd, Debian's package also enables a
# prometheus.service on :9090 -- `systemctl disable --now prometheus` if unwanted).
# Extra packages a caller may ask for (e.g. cross compilers for the NEON test).
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
echo "deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
