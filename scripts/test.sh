#!/usr/bin/env bash
# shellcheck disable=SC2317  # functions called through beside and $(...)
# The whole test suite: installs what it needs, builds with -Werror, runs
# every test under ctest (unit, functional with real daemons, plugin
# harness, ops, emulated cluster smoke, fuzzing, NEON under qemu), then the
# plugin and daemon protocol tests again under ASan + UBSan.
#
# Usage: scripts/test.sh [extra ctest args, passed to every ctest run]
# Environment: SUMCAST_BUILD_DIR (build), SUMCAST_ASAN=0 skips the ASan stage,
# SUMCAST_LF26=0 the libfabric 2.6 stage.
#
# Every stage runs the fabric layer in its strict mode (common/fabric_strict.h:
# RDMA's registration, context and size rules checked on every operation):
# the main and libfabric 2.6 stages as verbs would (rdma), the ASan stage
# with efa's limits (efa). SUMCAST_FABRIC_STRICT set in the environment
# (off, rdma, efa) is used for all of them instead.
#
# Each test runs once. The tests labelled plugin or daemon, except those also
# labelled scale or preload (64 to 128 processes; an LD_PRELOADed double),
# run in the ASan stage only: a second build tree, $build/asan
# (-DSUMCAST_SANITIZE=ON), that builds only the targets they run, beside the
# main ctest (below), and runs them after it. A sanitizer report
# ends the daemon or the harness with an error (UBSan does not recover), so
# the test fails. The plain build's binaries meet those paths in the main
# run's other tests (functional, ops, cluster, scale) and the lf26 stage's
# (label core, which holds plugin and daemon tests of every component).
# SUMCAST_ASAN=0 runs them in the main run instead.
#
# The lf26 stage runs the tests labelled core again against libfabric 2.6:
# scripts/libfabric.sh builds it from shared/vendor/ beside the repository
# into $build/libfabric-2.6/prefix (once: a second run finds it there; the
# stage is skipped, and says so, where the tarball is absent), then a third
# build tree, $build/lf26 (-DSUMCAST_LIBFABRIC_PREFIX=...), builds only what
# those tests run (docs/client.md, "libfabric versions"). Its ctest runs
# beside the ASan ctest, whose tests mostly wait.
set -euo pipefail
cd "$(dirname "$0")/.."
# Debian's libfabric (1.17) reads all of /proc/kallsyms (some 120,000
# lines the kernel formats on each read, ~45 ms of its time) twice in each
# process's first fi_getinfo: its verbs provider looking for the kernel's
# peer-memory and dma-buf symbols, whether or not a verbs device is there.
# The suite starts hundreds of such processes in each stage, and the reads
# were 16 % of the ASan stage's CPU. So the suite runs in a mount namespace
# of its own where /proc/kallsyms is empty (this host has no verbs device
# to use either symbol); where unshare or the mount is not allowed, as it is.
if [ -z "${SUMCAST_TEST_NS:-}" ] && unshare -m --propagation private true 2>/dev/null; then
	export SUMCAST_TEST_NS=1
	exec unshare -m --propagation private sh -c \
		'mount --bind /dev/null /proc/kallsyms 2>/dev/null || echo "test.sh: /proc/kallsyms left as it is"; exec bash "$0" "$@"' \
		"$PWD/scripts/test.sh" "$@"
fi
scripts/deps.sh --test
build=${SUMCAST_BUILD_DIR:-build}
jobs=$(nproc)
# The plugin harness's ranks, waiting for a request, nap (16 us doubling to
# 1 ms while nothing completes; tests/plugin/harness_nccl.c) instead of
# yielding in a loop: the suite keeps both cores busy, and a spinning rank
# takes its share of them from the daemons and the other tests' processes
# (the ASan stage: 9 % less CPU). Set in the environment, it is kept.
export SUMCAST_HARNESS_POLL_US=${SUMCAST_HARNESS_POLL_US:-nap}
t0=$SECONDS
rc=0
rm -f "$build/ctest.log" "$build/asan/ctest.log"

marks=""   # "name N s" for each stage's start, for the summary
# The targets the tests labelled $2 in build tree $1 run (configured, not
# built): every file under the build tree that a test's command names
# (executables, libnccl-net-sumcast.so given to a script) and that is a
# target; their dependencies (sumcastd, the plugin) come with them. Read
# from the CTestTestfiles: before the build ctest does not know the
# commands of executables that do not exist yet.
test_targets() {
	local known
	known=$(cmake --build "$1" --target help | sed -n 's/^\.\.\. \([^ ]*\).*/\1/p')
	(cd "$1" && ctest --show-only=json-v1 -L "$2" | python3 -c '
import json, os, re, sys
build, known = os.getcwd(), set(sys.argv[1].split())
want = {t["name"] for t in json.load(sys.stdin)["tests"]}
add = re.compile(r"add_test\(\[=\[(.*?)\]=\]\s+(.*)\)$")
names = set()
for d, _, files in os.walk(build):
    if "CTestTestfile.cmake" not in files:
        continue
    for line in open(os.path.join(d, "CTestTestfile.cmake")):
        m = add.match(line.strip())
        if not m or m.group(1) not in want:
            continue
        for a in re.findall(r"\"([^\"]*)\"", m.group(2)):
            if a.startswith(build + "/"):
                b = os.path.basename(a)
                names.update({b, re.sub(r"^lib(.*)\.so$", r"\1", b)} & known)
print(" ".join(sorted(names)))' "$known")
}
stage() { echo "== [$((SECONDS - t0)) s] $2"; marks="$marks${marks:+, }$1 $((SECONDS - t0)) s"; }
stage build "build ($build, -Werror)"
cmake -S . -B "$build" -DSUMCAST_WERROR=ON >/dev/null
cmake --build "$build" -j"$jobs"
# The ASan stage's tests (above): labelled $labels and not $unlabels.
labels='plugin|daemon' unlabels='scale|preload'
asan_on=${SUMCAST_ASAN:-1} lf26_on=${SUMCAST_LF26:-1}
asan=$build/asan lf26=$build/lf26
prefix=$build/libfabric-2.6/prefix
case $prefix in /*) ;; *) prefix=$PWD/$prefix ;; esac
main_skip=()
if [ "$asan_on" != 0 ]; then
	names=$(cd "$build" && ctest --show-only=json-v1 -L "$labels" -LE "$unlabels" |
		python3 -c 'import json, re, sys
print("|".join(re.escape(t["name"]) for t in json.load(sys.stdin)["tests"]))')
	[ -z "$names" ] || main_skip=(-E "^($names)\$")
fi

# The ASan and libfabric 2.6 trees build beside the main ctest, at the
# tests' priority: the suite keeps both cores busy, so a build at nice 19
# was starved (the 2.6 build until the ASan stage's end; the ASan build,
# with other work on the host, past the main ctest's end) and its tests
# then waited for it. Each writes its log and "STATUS SECONDS" (its exit
# status, when it ended) into the tree: asan_build 0 or 1; lf26_build 0, 1
# (the build failed), 2 (libfabric 2.6 did not build) or 77 (no
# tarball).
asan_build() {
	cmake -S . -B "$asan" -DSUMCAST_SANITIZE=ON -DSUMCAST_WERROR=ON >/dev/null || return 1
	local targets
	targets=$(test_targets "$asan" "$labels")
	[ -n "$targets" ] || { echo "no targets found for the tests labelled $labels"; return 1; }
	echo "targets: $targets"
	# shellcheck disable=SC2086
	cmake --build "$asan" -j"$jobs" --target $targets
}
lf26_build() {
	local lrc=0 targets
	# --no-cuda: the CUDA attempt is scripts/libfabric.sh's own record; the
	# tests use host memory
	SUMCAST_LF26_PREFIX=$prefix scripts/libfabric.sh --no-cuda || lrc=$?
	[ "$lrc" -eq 0 ] || return $((lrc == 77 ? 77 : 2))
	cmake -S . -B "$lf26" -DSUMCAST_WERROR=ON -DSUMCAST_LIBFABRIC_PREFIX="$prefix" >/dev/null || return 1
	targets=$(test_targets "$lf26" core)
	[ -n "$targets" ] || { echo "no targets found for the tests labelled core"; return 1; }
	echo "targets: $targets"
	# shellcheck disable=SC2086
	cmake --build "$lf26" -j"$jobs" --target $targets
}
mkdir -p "$asan" "$lf26"
rm -f "$asan/build.rc" "$lf26/build.rc" "$lf26/ctest.log" "$lf26/stage.state" "$lf26/stage.log"
# beside FUNCTION TREE: FUNCTION in the background; its PID in $!
beside() {
	(
		r=0
		"$1" >"$2/build.log" 2>&1 || r=$?
		echo "$r $((SECONDS - t0))" >"$2/build.rc"
	) &
}
asan_pid="" lf26_pid=""
if [ "$asan_on" != 0 ] || [ "$lf26_on" != 0 ]; then
	stage beside "ASan + UBSan and libfabric 2.6 builds, beside the tests ($asan, $lf26)"
	[ "$asan_on" = 0 ] || { beside asan_build "$asan"; asan_pid=$!; }
	# the 2.6 build goes on beside the ASan ctest too, if it must
	[ "$lf26_on" = 0 ] || { beside lf26_build "$lf26"; lf26_pid=$!; }
fi

stage ctest "ctest ($build)${main_skip:+, less the tests of the ASan stage}"
# ops/systemd makes its cached Debian 12 root when absent (once per machine,
# tests/ops/test_systemd.sh; SUMCAST_NSPAWN_MAKE_ROOT=0 leaves it skipped).
# One test more than cores: many of these tests wait (timers, scrapes,
# rate-limited links) and would leave a core idle.
(cd "$build" && SUMCAST_FABRIC_STRICT=${SUMCAST_FABRIC_STRICT:-rdma} \
	SUMCAST_NSPAWN_MAKE_ROOT=${SUMCAST_NSPAWN_MAKE_ROOT:-1} ctest --output-on-failure -j"$((jobs + 1))" \
	--timeout 900 "${main_skip[@]}" "$@") 2>&1 | tee "$build/ctest.log" || rc=1

# built TREE NAME: 0 when the tree built (its status file says 0), else its
# status; says when it ended, or shows its log's end
built() {
	local r=1 at='?'
	[ -f "$1/build.rc" ] && read -r r at <"$1/build.rc"
	if [ "$r" = 0 ]; then
		echo "   $2 built at $at s; $(grep -m1 '^targets:' "$1/build.log")"
	elif [ "$r" != 77 ]; then
		tail -n 50 "$1/build.log" 2>/dev/null
	fi
	return "$r"
}

# The lf26 stage (above), run beside the ASan ctest: it waits for its
# build (the file build.rc), checks what the binaries load, and runs its
# ctest. Its output goes to $lf26/stage.log, shown after the ASan stage; a
# state line for the summary to $lf26/stage.state when it did not run its
# ctest. Returns 1 when it failed. (The build is the main shell's child,
# not this subshell's: it is watched through its file and kill -0.)
lf26_stage() {
	local lrc=0 at=$SECONDS
	until [ -f "$lf26/build.rc" ] || ! kill -0 "$lf26_pid" 2>/dev/null; do sleep 1; done
	echo "== [$((at - t0)) s] libfabric 2.6 (beside the ASan stage): waited $((SECONDS - at)) s for its build"
	built "$lf26" "libfabric 2.6 ($prefix)" || lrc=$?
	if [ $lrc -eq 77 ]; then
		echo "skipped: no libfabric-2.6.0.tar.gz in shared/vendor/ beside the repository" >"$lf26/stage.state"
		return 0
	elif [ $lrc -eq 2 ]; then
		echo "libfabric 2.6 did not build ($lf26/build.log)" >"$lf26/stage.state"
	elif [ $lrc -ne 0 ]; then
		echo "build failed ($lf26/build.log)" >"$lf26/stage.state"
	elif ! grep -q "=> $prefix/lib/libfabric\.so" <<<"$(ldd "$lf26/daemon/sumcastd")"; then
		# what the binaries load must be the prefix's library, not the
		# system's (ldd's whole output read first: grep -q closing the
		# pipe early can kill ldd, which pipefail takes for a failure)
		echo "$lf26/daemon/sumcastd does not load $prefix/lib/libfabric.so" >"$lf26/stage.state"
	else
		echo "   sumcastd loads$(ldd "$lf26/daemon/sumcastd" | grep -m1 -o ' => [^ ]*libfabric[^ ]*')"
		echo "   ctest -L core, from $((SECONDS - t0)) s"
		(cd "$lf26" && SUMCAST_FABRIC_STRICT=${SUMCAST_FABRIC_STRICT:-rdma} ctest --output-on-failure \
			-j"$jobs" --timeout 300 -L core "$@") >"$lf26/ctest.log" 2>&1 || return 1
		return 0
	fi
	return 1
}
lf26_job=""
if [ "$lf26_on" != 0 ]; then
	stage lf26 "libfabric 2.6: ctest -L core beside the ASan stage ($lf26/stage.log)"
	lf26_stage "$@" >"$lf26/stage.log" 2>&1 &
	lf26_job=$!
fi

if [ "$asan_on" != 0 ]; then
	stage asan-wait "ASan + UBSan: waiting for its build"
	wait "$asan_pid" || true
	if built "$asan" "ASan + UBSan"; then
		stage asan-ctest "ASan + UBSan: ctest -L '$labels' -LE '$unlabels'"
		# The fault tests (300 collectives each by default) take 200 here:
		# the same faults and paths (the second fault at 133, its fallback
		# by 183), fewer collectives after them. The scale tests (64 and
		# 128 processes) run in the main run; their code runs here in
		# plugin/scale_h2_n4. Two tests per core: these mostly wait
		# (PING deadlines, re-admission, drains, rate-limited links); one
		# per core left the cores a quarter idle.
		(cd "$asan" && HARNESS_FAULT_OPS=200 SUMCAST_FABRIC_STRICT=${SUMCAST_FABRIC_STRICT:-efa} ctest \
			--output-on-failure -j"$((jobs * 2))" --timeout 900 -L "$labels" -LE "$unlabels" "$@") 2>&1 |
			tee "$asan/ctest.log" || rc=1
	else
		echo "ASan stage: build failed ($asan/build.log)" >&2
		rc=1
	fi
fi
if [ -n "$lf26_job" ]; then
	stage lf26-wait "libfabric 2.6: its stage's end"
	wait "$lf26_job" || rc=1
	cat "$lf26/stage.log"
	[ -f "$lf26/ctest.log" ] && cat "$lf26/ctest.log"
fi
# What each ctest run said, skipped and failed tests by name.
summary() {
	[ -f "$2" ] || return 0
	echo "   $1: $(grep -E '^[0-9]+% tests passed' "$2" || echo 'no result')"
	sed -n '/^The following tests \(did not run\|FAILED\):/,/^$/p' "$2" | sed '/^$/d; /^Errors while running CTest/d; s/^/   /'
}
stage end "summary"
echo "   stages started at: $marks"
summary "ctest" "$build/ctest.log"
[ "$asan_on" = 0 ] || summary "ASan + UBSan" "$asan/ctest.log"
if [ "$lf26_on" != 0 ]; then
	if [ -f "$lf26/stage.state" ]; then echo "   libfabric 2.6: $(cat "$lf26/stage.state")"; else summary "libfabric 2.6" "$lf26/ctest.log"; fi
fi
echo "== test.sh: $([ $rc -eq 0 ] && echo PASS || echo FAIL) in $((SECONDS - t0)) s"
exit $rc
