#!/bin/sh
# The plugin exports exactly NCCL's entry points, every table version it
# has (ncclNet, ncclCollNet, ncclTuner; nothing from its static
# dependencies), and the installed NCCL looks up each of those names up to
# the newest version it knows of each (an NCCL older than the plugin's
# newest table loads the newest one it knows; versions older than the
# oldest it knows are for older NCCLs: ncclTunerPlugin_v1, NCCL 2.19-2.20).
# The first part always runs (it needs only nm) and decides the result; the
# second needs NCCL's library and is skipped, with the reason, where there is
# none (no CUDA on the machine): the test still passes on the first part.
# Usage: check_exports.sh PLUGIN.so
set -u
so=$1
want="ncclCollNetPlugin_v10 ncclCollNetPlugin_v11 ncclCollNetPlugin_v12 ncclCollNetPlugin_v8 ncclCollNetPlugin_v9 ncclNetPlugin_v10 ncclNetPlugin_v11 ncclNetPlugin_v12 ncclNetPlugin_v8 ncclNetPlugin_v9 ncclTunerPlugin_v1 ncclTunerPlugin_v2 ncclTunerPlugin_v3 ncclTunerPlugin_v4 ncclTunerPlugin_v5 ncclTunerPlugin_v6"
command -v nm >/dev/null || { echo "FAIL: nm not found (binutils)"; exit 1; }
[ -f "$so" ] || { echo "FAIL: $so does not exist"; exit 1; }
# Linker-made entries that every shared object may carry.
got=$(nm -D --defined-only "$so" | awk '{print $3}' | grep -v -E '^(_init|_fini|_edata|_end|__bss_start)$' | sort | tr '\n' ' ' | sed 's/ $//')
if [ "$got" != "$want" ]; then
	echo "FAIL: $so exports:"
	echo "  $got"
	echo "want exactly:"
	echo "  $want"
	exit 1
fi
echo "ok: $so exports exactly: $want"

# NCCL: CUDA's tree, then whatever the loader knows (Debian's libnccl2 in
# /usr/lib/<triplet>, NVIDIA's repositories, LD_LIBRARY_PATH).
nccl=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
	$(echo "${LD_LIBRARY_PATH:-}" | tr ':' ' '); do
	[ -e "$d/libnccl.so.2" ] && nccl="$d/libnccl.so.2" && break
done
if [ -z "$nccl" ] && command -v ldconfig >/dev/null; then
	nccl=$(ldconfig -p 2>/dev/null | awk '$1 == "libnccl.so.2" { print $NF; exit }')
fi
if [ -z "$nccl" ]; then
	echo "skip (NCCL part): no libnccl.so.2 (not under /usr/local/cuda, LD_LIBRARY_PATH or ldconfig): the names NCCL looks up are not checked"
	exit 0
fi
command -v strings >/dev/null || { echo "FAIL: strings not found (binutils)"; exit 1; }
names=$(strings "$nccl" | grep -E '^nccl(CollNet|Net|Tuner)Plugin_v[0-9]+$' | sort -u)
# Per family, the newest version this NCCL looks up (it tries newest first).
report=""
for fam in ncclNetPlugin ncclCollNetPlugin ncclTunerPlugin; do
	newest=$(printf '%s\n' "$names" | sed -n "s/^${fam}_v//p" | sort -n | tail -n 1)
	oldest=$(printf '%s\n' "$names" | sed -n "s/^${fam}_v//p" | sort -n | head -n 1)
	if [ -z "$newest" ]; then
		echo "FAIL: $nccl looks up no ${fam}_v* name"
		exit 1
	fi
	newer="" older="" loads=0
	for s in $want; do
		[ "${s%_v*}" = "$fam" ] || continue
		v=${s##*_v}
		if [ "$v" -gt "$newest" ]; then
			newer="$newer $s"
			continue
		fi
		if [ "$v" -lt "$oldest" ]; then
			older="$older $s"
			continue
		fi
		[ "$v" -gt "$loads" ] && loads=$v
		if ! printf '%s\n' "$names" | grep -qx "$s"; then
			echo "FAIL: $nccl does not look up $s (it knows: $(echo $names))"
			exit 1
		fi
	done
	if [ "$loads" -eq 0 ]; then
		echo "FAIL: $nccl knows ${fam} up to v$newest, older than every one exported:$newer"
		exit 1
	fi
	report="$report; $fam: every exported name from v$oldest up to v$newest, loads v$loads${newer:+ (newer than it:$newer)}${older:+ (older than it:$older)}"
done
echo "ok: $nccl looks up${report#;}"
