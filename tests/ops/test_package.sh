#!/bin/sh
# Builds the .deb from this build tree (cpack -G DEB into a scratch dir),
# unpacks it with dpkg -x into a scratch root and checks the layout an
# operator relies on: daemon, ctl, plugin where NCCL's dlopen finds it, unit
# and sysusers where systemd looks, the config as a conffile, docs as the
# source tree has them (every relative link in the installed Markdown
# resolves inside the installed tree); the unit names files that exist in
# the package; the packaged binaries run. tests/ops/test_systemd.sh installs
# the same package in a booted Debian 12 container.
# Usage: test_package.sh BUILD_DIR CMAKE_COMMAND
set -u
build=$1 cmake=$2
cpack=$(dirname "$cmake")/cpack
[ -x "$cpack" ] || cpack=$(command -v cpack) || { echo "SKIP: no cpack"; exit 77; }
command -v dpkg-deb >/dev/null || { echo "SKIP: no dpkg-deb (not Debian?)"; exit 77; }
# CPack's DEB generator runs file(1) on every packaged file; without it cpack
# fails with a message that does not say so.
command -v file >/dev/null || { echo "FAIL: file(1) not found, cpack -G DEB needs it (apt-get install file)"; exit 1; }
[ -x "$build/daemon/sumcastd" ] || { echo "SKIP: sumcastd not built"; exit 77; }
pass=0 fail=0
ok() { pass=$((pass + 1)); }
ko() { fail=$((fail + 1)); echo "FAIL: $*"; }
tmp=$(mktemp -d /tmp/sumcast-pkg.XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT

(cd "$build" && timeout 240 "$cpack" -G DEB -B "$tmp/out" > "$tmp/cpack.log" 2>&1) ||
	{ cat "$tmp/cpack.log"; echo "FAIL: cpack -G DEB"; exit 1; }
deb=$(ls "$tmp"/out/*.deb 2>/dev/null | head -1)
[ -n "$deb" ] || { cat "$tmp/cpack.log"; echo "FAIL: no .deb"; exit 1; }
echo "built $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB)"
root=$tmp/root
dpkg -x "$deb" "$root" && ok || ko "dpkg -x failed"
mkdir -p "$tmp/ctl" && dpkg-deb -e "$deb" "$tmp/ctl" && ok || ko "dpkg-deb -e failed"

for f in usr/sbin/sumcastd usr/bin/sumcastctl usr/bin/sumcast-perf \
	usr/lib/systemd/system/sumcastd.service usr/lib/sysusers.d/sumcast.conf \
	etc/sumcast/sumcastd.conf usr/share/doc/sumcast/README.md \
	usr/share/doc/sumcast/examples/client.env usr/share/doc/sumcast/examples/grafana/sumcast.json \
	usr/share/sumcast/prometheus/sumcast-alerts.yml usr/share/sumcast/prometheus/sumcast-alerts.test.yml \
	usr/share/doc/sumcast/LICENSE usr/share/doc/sumcast/docs/operations.md \
	usr/share/doc/sumcast/docs/journal/README.md; do
	[ -f "$root/$f" ] && ok || ko "/$f is not in the package"
done

# The docs keep their tree: every relative link of every installed .md
# resolves to a file or directory in the installed tree, and stays inside it.
doc=$root/usr/share/doc/sumcast
nimg=$(find "$doc/docs/img" -name '*.png' 2>/dev/null | wc -l)
[ "$nimg" -gt 0 ] && ok || ko "docs/img is not in the package"
nlinks=0 nbroken=0
mds=$(find "$doc" -name '*.md')
for md in $mds; do
	dir=$(dirname "$md")
	for l in $(grep -o '](\([^)#[:space:]]*\)' "$md" | sed 's/^](//' | sort -u); do
		case $l in '' | *:*) continue ;; esac # anchors, http:, mailto:
		nlinks=$((nlinks + 1))
		t=$(realpath -m "$dir/$l")
		case $t in "$doc" | "$doc"/*) ;; *) t= ;; esac
		if [ -z "$t" ] || [ ! -e "$t" ]; then
			nbroken=$((nbroken + 1))
			ko "link in ${md#"$root"} does not resolve in the package: $l"
		fi
	done
done
[ "$nlinks" -ge 50 ] && ok || ko "only $nlinks relative links found in the installed docs"
echo "installed docs: $(find "$doc" -name '*.md' | wc -l) .md files, $nimg images, $nlinks relative links, $nbroken broken"
# The packaged alert rules load and pass their cases where they are installed.
if command -v promtool >/dev/null; then
	(cd "$root/usr/share/sumcast/prometheus" && promtool check rules sumcast-alerts.yml &&
		promtool test rules sumcast-alerts.test.yml) > "$tmp/promtool.log" 2>&1 && ok ||
		ko "packaged alert rules: $(cat "$tmp/promtool.log")"
fi
for f in usr/sbin/sumcastd usr/bin/sumcastctl usr/bin/sumcast-perf; do
	[ -x "$root/$f" ] && ok || ko "/$f is not executable"
done
# NCCL dlopens "libnccl-net-sumcast.so": it must be in a directory the loader
# searches by default.
plugin=
for d in usr/lib/x86_64-linux-gnu usr/lib/aarch64-linux-gnu usr/lib lib; do
	[ -f "$root/$d/libnccl-net-sumcast.so" ] && plugin=$root/$d/libnccl-net-sumcast.so && break
done
[ -n "$plugin" ] && ok || ko "libnccl-net-sumcast.so not in /usr/lib or /usr/lib/<triplet>: $(cd "$root" && find . -name '*.so*')"
if [ -n "$plugin" ] && ! command -v nm >/dev/null; then
	ko "nm not found (binutils): plugin exports not checked"
elif [ -n "$plugin" ]; then
	nm -D --defined-only "$plugin" | grep -q ' ncclCollNetPlugin_v8$' && ok || ko "plugin does not export ncclCollNetPlugin_v8"
fi
# Nothing under /usr/local, nothing owned by the build machine's paths.
[ ! -e "$root/usr/local" ] && ok || ko "package installs under /usr/local"
grep -q "$build" "$root/usr/lib/systemd/system/sumcastd.service" && ko "unit names the build dir" || ok

# Control files.
grep -qx '/etc/sumcast/sumcastd.conf' "$tmp/ctl/conffiles" && ok || ko "sumcastd.conf is not a conffile"
[ "$(grep -c . "$tmp/ctl/conffiles")" = 1 ] && ok || ko "conffiles: $(cat "$tmp/ctl/conffiles")"
for s in postinst prerm postrm; do
	[ -x "$tmp/ctl/$s" ] && sh -n "$tmp/ctl/$s" && ok || ko "$s missing or not valid sh"
done
grep -q systemd-sysusers "$tmp/ctl/postinst" && ok || ko "postinst does not create the user"
dpkg-deb -f "$deb" Depends | grep -q libfabric && ok || ko "Depends lacks libfabric: $(dpkg-deb -f "$deb" Depends)"
echo "Depends: $(dpkg-deb -f "$deb" Depends)"

# The unit names the packaged files.
unit=$root/usr/lib/systemd/system/sumcastd.service
exe=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$unit")
conf=$(sed -n 's/^ExecStart=.*--config \([^ ]*\).*/\1/p' "$unit")
[ "$exe" = /usr/sbin/sumcastd ] && [ -x "$root$exe" ] && ok || ko "ExecStart=$exe"
[ "$conf" = /etc/sumcast/sumcastd.conf ] && [ -f "$root$conf" ] && ok || ko "config in the unit: $conf"
grep -q '^Type=notify$' "$unit" && grep -q '^LimitMEMLOCK=infinity$' "$unit" && ok || ko "unit: Type=notify, LimitMEMLOCK"
grep -q '^PrivateDevices=yes' "$unit" && ko "PrivateDevices hides /dev/infiniband" || ok
grep -q '^User=sumcast$' "$unit" && grep -q '^u sumcast ' "$root/usr/lib/sysusers.d/sumcast.conf" && ok || ko "unit user vs sysusers"
if command -v systemd-analyze >/dev/null; then
	# Against this host's systemd, with the commands pointed into the package.
	sed "s#=\(-\{0,1\}\)/usr/sbin/#=\1$root/usr/sbin/#g" "$unit" > "$tmp/sumcastd.service"
	out=$(SYSTEMD_LOG_LEVEL=warning systemd-analyze verify "$tmp/sumcastd.service" 2>&1)
	[ -z "$out" ] && ok || ko "systemd-analyze verify: $out"
else
	echo "note: no systemd-analyze (systemd): the unit is not verified"
fi

# The packaged binaries run, and the packaged config is valid.
LD_LIBRARY_PATH= "$root/usr/sbin/sumcastd" --version > /dev/null && ok || ko "sumcastd --version"
"$root/usr/sbin/sumcastd" -c "$root/etc/sumcast/sumcastd.conf" --check-config > /dev/null && ok || ko "packaged config invalid"
"$root/usr/bin/sumcastctl" --version > /dev/null && ok || ko "sumcastctl --version"
"$root/usr/bin/sumcast-perf" --version > /dev/null && ok || ko "sumcast-perf --version"
echo "test_package: $pass passed, $fail failed"
[ $fail -eq 0 ]
