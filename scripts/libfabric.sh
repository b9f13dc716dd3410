#!/usr/bin/env bash
# Builds libfabric 2.6 from its release source into a prefix of its own, for
# building and testing Sumcast against it beside Debian's 1.17
# (docs/client.md, "libfabric versions"; scripts/test.sh's lf26 stage).
#
# Usage: scripts/libfabric.sh [--tarball PATH] [--prefix DIR] [--no-cuda]
#   --tarball PATH  the release source as git archive makes it (run
#                   autogen.sh first); default libfabric-2.6.0.tar.gz in
#                   shared/vendor/ of the directory that holds the
#                   repository (SUMCAST_LF26_TARBALL)
#   --prefix DIR    where it is installed; default build/libfabric-2.6/prefix
#                   (SUMCAST_LF26_PREFIX)
#   --no-cuda       do not try --with-cuda (SUMCAST_LF26_CUDA=0)
# Exit 0 when the prefix holds the build (a second run does nothing), 77
# (skip) when the tarball is absent, 1 on a failed build.
#
# Providers: tcp, rxm and shm, and verbs and efa where rdma-core's headers
# are (configure --enable-only builds only those named). CUDA: tried with
# --with-cuda=/usr/local/cuda --enable-cuda-dlopen where that directory has
# cuda_runtime.h; configure accepts it, but src/hmem_cuda.c includes
# <nvml.h> (NVML is dlopened beside libcudart) and this image's CUDA ships
# no nvml.h (Debian 12 main has no package with it: libnvidia-ml-dev is in
# non-free), so the build stops there; the script then builds without CUDA
# and says so. What configure chose and the CUDA outcome are kept in
# DIR/../build-info.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
tarball=${SUMCAST_LF26_TARBALL:-$(dirname "$repo")/shared/vendor/libfabric-2.6.0.tar.gz}
prefix=${SUMCAST_LF26_PREFIX:-$repo/build/libfabric-2.6/prefix}
cuda=${SUMCAST_LF26_CUDA:-1}
cuda_dir=/usr/local/cuda
while [ $# -gt 0 ]; do
	case "$1" in
	--tarball) tarball=$2; shift 2 ;;
	--prefix) prefix=$2; shift 2 ;;
	--no-cuda) cuda=0; shift ;;
	*) echo "usage: $0 [--tarball PATH] [--prefix DIR] [--no-cuda]" >&2; exit 2 ;;
	esac
done
case "$prefix" in /*) ;; *) prefix=$repo/$prefix ;; esac

echo "libfabric.sh: source $tarball, prefix $prefix"
if [ -f "$prefix/lib/pkgconfig/libfabric.pc" ] && [ -f "$prefix/.sumcast-built" ]; then
	echo "libfabric.sh: $(cat "$prefix/.sumcast-built") already in $prefix: nothing to do"
	exit 0
fi
if [ ! -f "$tarball" ]; then
	echo "libfabric.sh: $tarball not found (looked for shared/vendor/ in the repository's parent directory); skipping" >&2
	exit 77
fi

scripts/deps.sh autoconf automake libtool make gcc pkg-config librdmacm-dev libibverbs-dev
top=$(dirname "$prefix")
src=$top/src
info=$top/build-info.txt
jobs=$(nproc)
rm -rf "$src" "$prefix"
mkdir -p "$src"
tar -xzf "$tarball" -C "$src" --strip-components=1
cd "$src"
[ -f src/fabric.c ] || { echo "libfabric.sh: $tarball is not libfabric's source" >&2; exit 1; }
echo "libfabric.sh: autogen.sh"
./autogen.sh >autogen.log 2>&1 || { tail -n 30 autogen.log; exit 1; }

# Providers: the ones Sumcast runs, the RDMA ones where their headers are.
provs=(--enable-only --enable-tcp=yes --enable-rxm=yes --enable-shm=yes)
[ -f /usr/include/infiniband/verbs.h ] && [ -f /usr/include/rdma/rdma_cma.h ] && provs+=(--enable-verbs=yes)
[ -f /usr/include/infiniband/efadv.h ] && provs+=(--enable-efa=yes)
base=(--prefix="$prefix" --disable-static --enable-debug=no "${provs[@]}")

cfg() { # configure with extra args, log in configure.log
	echo "libfabric.sh: configure ${base[*]} $*"
	./configure "${base[@]}" "$@" >configure.log 2>&1
}
build() { make -j"$jobs" >make.log 2>&1; }

: >"$info"
with_cuda=no
if [ "$cuda" != 0 ] && [ -f "$cuda_dir/include/cuda_runtime.h" ]; then
	# The CUDA source first: where it stops, it stops within seconds.
	if cfg --with-cuda="$cuda_dir" --enable-cuda-dlopen &&
		make src/hmem_cuda.lo >make.log 2>&1 && build; then
		with_cuda=yes
	else
		why=$(grep -h -m1 -E 'error:|Error' make.log configure.log 2>/dev/null | head -n 1 || true)
		echo "libfabric.sh: with CUDA ($cuda_dir, dlopen) the build stopped: ${why:-see $src/make.log}"
		echo "libfabric.sh: building without CUDA"
		echo "cuda: --with-cuda=$cuda_dir --enable-cuda-dlopen stopped: $why" >>"$info"
		make distclean >/dev/null 2>&1 || true
	fi
else
	echo "cuda: not tried (${cuda_dir}/include/cuda_runtime.h absent or --no-cuda)" >>"$info"
fi
if [ "$with_cuda" = no ]; then
	cfg --without-cuda || { tail -n 30 configure.log; exit 1; }
	build || { tail -n 30 make.log; exit 1; }
else
	echo "cuda: built with --with-cuda=$cuda_dir --enable-cuda-dlopen" >>"$info"
fi
make install >install.log 2>&1 || { tail -n 30 install.log; exit 1; }
# What configure built in (its summary: "*** Built-in providers: ...").
sed -n '/^\*\*\* Built-in providers:/p; /^\*\*\* DSO providers:/p' configure.log | tee -a "$info"
"$prefix/bin/fi_info" --version | tee -a "$info"
echo "libfabric 2.6.0 (cuda: $with_cuda)" >"$prefix/.sumcast-built"
echo "libfabric.sh: installed into $prefix ($info)"
