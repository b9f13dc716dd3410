#!/usr/bin/env bash
# The README's Quick start on a fresh Debian 12, as a new user runs it:
# debootstraps a minbase bookworm root, bind-mounts /proc /sys /dev into it,
# clones this repository's HEAD commit to /root/sumcast there, and runs, as
# root in the chroot, `bash scripts/demo.sh` and then `bash scripts/test.sh`.
# Prints the last lines of each; exits 1 if either fails. Unmounts and
# removes the root on exit, also on failure or Ctrl-C.
#
# Usage: scripts/fresh-check.sh [--logs DIR] [--keep] [--tail N]
#   --logs DIR  keep demo.log and test.log in DIR
#   --keep      leave the root (unmounted) for a look; its path is printed
#   --tail N    lines of each log to print (40)
# Needs root, the Debian mirror this host's apt uses, ~6 GB under /var/tmp
# (SUMCAST_FRESH_DIR to put it elsewhere). About 10 min on 2 cores with a
# near mirror (debootstrap 30 s, demo 1 min with its packages, test.sh
# 8-9 min with its packages and the ASan stage; the libfabric 2.6 stage
# skips, shared/vendor/ not being beside the clone). Only committed work
# is checked: the clone is of HEAD.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
logs="" keep=0 ntail=40
while [ $# -gt 0 ]; do
	case "$1" in
	--logs) logs=$2; shift 2 ;;
	--keep) keep=1; shift ;;
	--tail) ntail=$2; shift 2 ;;
	*) echo "usage: $0 [--logs DIR] [--keep] [--tail N]" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" -eq 0 ] || { echo "fresh-check: needs root (debootstrap, chroot, mounts)" >&2; exit 1; }
if ! command -v debootstrap >/dev/null; then
	echo "fresh-check: installing debootstrap" >&2
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi
commit=$(git -C "$src" rev-parse HEAD)
if [ -n "$(git -C "$src" status --porcelain --untracked-files=no)" ]; then
	echo "fresh-check: note: uncommitted changes in $src are not checked (clone of $commit)" >&2
fi

work=$(mktemp -d "${SUMCAST_FRESH_DIR:-/var/tmp}/sumcast-fresh.XXXXXX")
root=$work/root
t0=$SECONDS

# Everything mounted under the root, deepest first.
mounts_under() { findmnt -rn -o TARGET | grep -E "^$1(/|$)" | sort -r || true; }
cleanup() {
	local rc=$? pid left
	trap - EXIT INT TERM
	# Processes still running in the root (a daemon of an interrupted run).
	for pid in $(ls /proc | grep -E '^[0-9]+$'); do
		[ "$(readlink "/proc/$pid/root" 2>/dev/null)" = "$root" ] && kill -KILL "$pid" 2>/dev/null
	done
	for m in $(mounts_under "$root"); do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
	left=$(mounts_under "$root")
	if [ -n "$left" ]; then
		echo "fresh-check: still mounted, $work NOT removed: $left" >&2
		exit 1
	fi
	if [ -n "$logs" ]; then
		mkdir -p "$logs" && cp "$work"/*.log "$logs"/ 2>/dev/null && echo "fresh-check: logs in $logs"
	fi
	if [ "$keep" -eq 1 ]; then
		echo "fresh-check: root kept in $root (unmounted)"
	else
		rm -rf --one-file-system "$work"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The mirror this host's apt uses for bookworm (the default one otherwise).
mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
	python3 -c '
import re, sys
text = sys.stdin.read()
for m in re.finditer(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+bookworm\s", text, re.M):
    print(m.group(1)); sys.exit()
for st in re.split(r"\n\s*\n", text):
    u = re.search(r"^URIs:\s*(\S+)", st, re.M)
    s = re.search(r"^Suites:(.*)$", st, re.M)
    if u and s and "bookworm" in s.group(1).split() and re.search(r"^Types:.*\bdeb\b", st, re.M):
        print(u.group(1)); sys.exit()
' 2>/dev/null || true)
mirror=${mirror:-http://deb.debian.org/debian}
echo "== debootstrap --variant=minbase bookworm $root $mirror"
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
	{ tail -n 20 "$work/debootstrap.log"; echo "fresh-check: debootstrap failed"; exit 1; }

# The host's Debian sources (bookworm-updates, -security, its mirror) in
# place of debootstrap's one-line sources.list: only files whose keyrings
# the new root has (third-party repositories are not part of the check).
copied=0
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
	[ -s "$f" ] && grep -qE '^[^#]*(deb |URIs:)' "$f" || continue
	ok=1
	for k in $(sed -n 's/.*[Ss]igned-[Bb]y[:=] *\([^] ]*\).*/\1/p' "$f"); do
		[ -e "$root$k" ] || ok=0
	done
	[ "$ok" -eq 1 ] || { echo "   not copied (keyring not in the root): $f"; continue; }
	cp "$f" "$root$f" && copied=$((copied + 1))
done
[ "$copied" -gt 0 ] && [ ! -s /etc/apt/sources.list ] && rm -f "$root/etc/apt/sources.list"
# Acquire settings this host's apt needs to reach that mirror (proxy, an
# archive snapshot whose Release files are past Valid-Until).
apt-config dump | grep -E '^Acquire::(https?::Proxy|Check-Valid-Until|Check-Date) ' \
	>"$root/etc/apt/apt.conf.d/99fresh-check-host" || rm -f "$root/etc/apt/apt.conf.d/99fresh-check-host"
# The chroot shares this host's network: the same names resolve.
cp /etc/hosts "$root/etc/hosts"
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true

# The root a mount point of its own: `ip netns exec` (cluster/smoke) makes
# "/" a slave mount in its namespace, which fails on a plain directory.
mount --bind "$root" "$root"
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys" && mount --make-rslave "$root/sys"
mount --rbind /dev "$root/dev" && mount --make-rslave "$root/dev"   # with /dev/pts, /dev/shm
mount -t tmpfs -o mode=755 tmpfs "$root/run"                          # ip netns: /run/netns

echo "== git clone $src ($commit) -> /root/sumcast"
git -c safe.directory='*' clone -q --no-hardlinks "$src" "$root/root/sumcast"
git -c safe.directory='*' -C "$root/root/sumcast" checkout -q --detach "$commit"

# One README command in the root, as root, with a login's environment.
in_root() {
	env -i HOME=/root LANG=C.UTF-8 TERM=dumb USER=root LOGNAME=root \
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		chroot "$root" /bin/bash -c "cd /root/sumcast && $1"
}
status=0
for step in demo test; do
	echo "== [$(((SECONDS - t0) / 60)) min] bash scripts/$step.sh (in the root; log $work/$step.log)"
	s=$SECONDS
	# In the background, so that a signal ends this script at once (the
	# cleanup kills what runs in the root).
	in_root "bash scripts/$step.sh" </dev/null >"$work/$step.log" 2>&1 &
	if wait $!; then
		r=PASS
	else
		r="FAIL (exit $?)" status=1
	fi
	echo "-- last $ntail lines of bash scripts/$step.sh:"
	tail -n "$ntail" "$work/$step.log" | sed 's/^/   /'
	echo "== bash scripts/$step.sh: $r in $(((SECONDS - s) / 60)) min $(((SECONDS - s) % 60)) s"
done
echo "== fresh-check of $commit: $([ $status -eq 0 ] && echo PASS || echo FAIL), $(((SECONDS - t0) / 60)) min in all"
exit $status
