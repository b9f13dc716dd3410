#!/bin/sh
# conf/client.env must name every SUMCAST_* setting the plugin knows, with the
# plugin's default, and nothing the plugin does not read.
#  * the plugin's settings table, as the plugin itself logs it at init
#    (sc_plugin_settings dlopens it as NCCL does): names and defaults;
#  * variables read with getenv("SUMCAST_...") outside the table (plugin/,
#    common/), e.g. SUMCAST_ISA.
# Usage: test_client_env.sh SC_PLUGIN_SETTINGS PLUGIN.so SRCDIR
set -u
probe=$1 plugin=$2 src=$3
env_file=$src/conf/client.env
pass=0 fail=0
ok() { pass=$((pass + 1)); }
ko() { fail=$((fail + 1)); echo "FAIL: $*"; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
# The caller's SUMCAST_* would change the logged values.
for v in $(env | sed -n 's/^\(SUMCAST_[A-Z0-9_]*\)=.*/\1/p'); do unset "$v"; done

"$probe" "$plugin" --log > "$tmp/log" 2>&1 || { ko "plugin did not load: $(cat "$tmp/log")"; }
# "NET/Sumcast : SUMCAST_CHUNK_BYTES=256K (default)" -> "SUMCAST_CHUNK_BYTES 256K"
sed -n 's/.* : \(SUMCAST_[A-Z0-9_]*\)=\([^ ]*\) (default)$/\1 \2/p; s/.* : \(SUMCAST_[A-Z0-9_]*\)= (default)$/\1 /p' \
	"$tmp/log" | sort -u > "$tmp/table"
[ "$(wc -l < "$tmp/table")" -ge 10 ] && ok || ko "plugin logged only $(wc -l < "$tmp/table") settings: $(cat "$tmp/log")"
grep -rhoE 'getenv\("SUMCAST_[A-Z0-9_]+"\)' "$src/plugin" "$src/common" |
	sed 's/getenv("\(.*\)")/\1/' | sort -u > "$tmp/getenv"

# Names in client.env, set or commented out ("#SUMCAST_X=default").
sed -n 's/^#\{0,1\}\(SUMCAST_[A-Z0-9_]*\)=\(.*\)$/\1 \2/p' "$env_file" | sort -u > "$tmp/env"
cut -d' ' -f1 "$tmp/env" > "$tmp/env_names"

while read -r name def; do
	if ! grep -qx "$name" "$tmp/env_names"; then
		ko "$name (plugin default '$def') is missing from conf/client.env"
		continue
	fi
	ok
	# Commented lines document the default; they must say the plugin's.
	line=$(grep -E "^#$name=" "$env_file" | head -1)
	if [ -n "$line" ]; then
		[ "${line#*=}" = "$def" ] && ok || ko "conf/client.env says $line, the plugin's default is '$def'"
	fi
done < "$tmp/table"
while read -r name; do
	grep -qx "$name" "$tmp/env_names" && ok || ko "$name (getenv in the source) is missing from conf/client.env"
done < "$tmp/getenv"
# Nothing in client.env the plugin does not read.
cut -d' ' -f1 "$tmp/table" | cat - "$tmp/getenv" | sort -u > "$tmp/known"
while read -r name; do
	grep -qx "$name" "$tmp/known" && ok || ko "conf/client.env sets $name, which the plugin does not read"
done < "$tmp/env_names"
grep -q '^NCCL_NET_PLUGIN=sumcast$' "$env_file" && ok || ko "NCCL_NET_PLUGIN=sumcast missing"
grep -q '^NCCL_COLLNET_ENABLE=1$' "$env_file" && ok || ko "NCCL_COLLNET_ENABLE=1 missing"
grep -q '^NCCL_COLLNET_PLUGIN' "$env_file" && ko "NCCL_COLLNET_PLUGIN does not exist in NCCL 2.28" || ok
echo "test_client_env: $(wc -l < "$tmp/table") table settings, $(wc -l < "$tmp/getenv") getenv; $pass passed, $fail failed"
[ $fail -eq 0 ]
