#!/bin/sh
# The plugin exports exactly NCCL's entry points (nothing from its static
# dependencies), and the installed NCCL looks those names up.
set -u
so=$1
want="ncclCollNetPlugin_v10 ncclCollNetPlugin_v11 ncclCollNetPlugin_v8 ncclCollNetPlugin_v9 ncclNetPlugin_v10 ncclNetPlugin_v11 ncclNetPlugin_v8 ncclNetPlugin_v9"
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
nccl=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
	[ -e "$d/libnccl.so.2" ] && nccl="$d/libnccl.so.2" && break
done
if [ -z "$nccl" ]; then
	echo "SKIP: no libnccl.so.2 under /usr/local/cuda: cannot check the names NCCL looks up"
	exit 77
fi
names=$(strings "$nccl" | grep -E '^nccl(Coll)?NetPlugin_v[0-9]+$' | sort -u)
for s in $want; do
	if ! printf '%s\n' "$names" | grep -qx "$s"; then
		echo "FAIL: $nccl does not look up $s (it knows: $(echo $names))"
		exit 1
	fi
done
echo "ok: $nccl looks up every exported name"
