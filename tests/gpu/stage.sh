#!/bin/bash
# tests/gpu/stage.sh BUILD DIR: what tests/gpu/run.sh needs on a GPU machine
# that has none of this project's packages: sumcastd, the plugin, the
# GPU benchmark and its kernel, bench/ingest and bench/allreduce (for
# bench/cores), the recording profiler plugin where built,
# and in DIR/lib every library they load that is not the C library itself
# (`ldd` lists them: libfabric, libinih, libevent, rdma-core's, ...).
# DIR is made anew. Name it build-*/ in the repository so git ignores it.
set -eu
B=$(cd "$1" && pwd) D=$2
rm -rf "$D" && mkdir -p "$D/lib"
bins=("$B/daemon/sumcastd" "$B/plugin/libnccl-net-sumcast.so")
for f in "$B/bench/gpusum" "$B/bench/gpusum.ptx" "$B/bench/ingest" "$B/bench/allreduce" \
	"$B"/tests/gpu/*.so; do
  [[ -e $f ]] && bins+=("$f")
done
cp "${bins[@]}" "$D/"
ldd "${bins[@]}" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*|libstdc\+\+|libgcc_s)\.so' |
  xargs -r cp -L -t "$D/lib/"
du -sh "$D" | awk '{print "staged " $1 " in '"$D"'"}'
