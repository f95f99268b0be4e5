#!/usr/bin/env bash
# The IP leak of containerd issue 12130, through cnitool, with and without
# Catena. The chain is [bridge + host-local, failer]; failer fails both ADD
# and DEL. Like a runtime, each attempt ADDs into a fresh netns, sees the
# failure, DELs, and drops the netns. The table counts what leaked.
#
# The second part of `make demo`; `make leak-demo` runs it alone (ATTEMPTS=n
# for another number of attempts, default 5). It exits 1 unless the plain
# conflist leaked one IP per attempt and catena none.
#
# Needs root, bin/cnitool and bin/cni (run `make leak-demo`, which installs
# and builds them first). Everything it creates is private and removed on
# exit.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
attempts="${ATTEMPTS:-5}"
cnitool="${repo}/bin/cnitool"
cni_path="${repo}/bin/cni"

if [[ $(id -u) -ne 0 ]]; then
	echo "leak-demo: must run as root (netns, bridges)" >&2
	exit 1
fi
for f in "$cnitool" "${cni_path}/catena" "${cni_path}/failer" "${cni_path}/bridge" "${cni_path}/host-local"; do
	if [[ ! -x "$f" ]]; then
		echo "leak-demo: ${f} missing: run \`make leak-demo\` (or \`make demo-deps build-demo\`)" >&2
		exit 1
	fi
done

id="ld$$"
tmp="$(mktemp -d /tmp/catena-leak-demo.XXXXXX)"
netns=()
cleanup() {
	for n in "${netns[@]}"; do
		ip netns del "$n" 2>/dev/null || true
	done
	for m in plain catena; do
		ip link del "${id}${m:0:1}" 2>/dev/null || true
		rm -f /var/lib/cni/results/"${id}-${m}"-*
	done
	rm -rf "$tmp"
}
trap cleanup EXIT

mkdir -p "${tmp}/net.d"
# bridge + host-local on a private bridge, subnet and data dir per network
bridge() {
	local m="$1" octet="$2"
	printf '{"type":"bridge","bridge":"%s","isGateway":true,"ipam":{"type":"host-local","dataDir":"%s","ranges":[[{"subnet":"10.%d.%d.0/24"}]]}}' \
		"${id}${m:0:1}" "${tmp}/ipam" "$octet" $(($$ % 250))
}
failer='{"type":"failer","failAdd":true,"failDel":true}'
cat >"${tmp}/net.d/10-plain.conflist" <<EOF
{"cniVersion":"1.1.0","name":"${id}-plain","plugins":[$(bridge plain 231),${failer}]}
EOF
cat >"${tmp}/net.d/20-catena.conflist" <<EOF
{"cniVersion":"1.1.0","name":"${id}-catena","plugins":[{"type":"catena","cacheDir":"${tmp}/catena",
  "delegates":[$(bridge catena 232),${failer}]}]}
EOF

# leaked counts host-local's allocations (IP files) for a network
leaked() {
	local dir="${tmp}/ipam/$1"
	[[ -d "$dir" ]] || {
		echo 0
		return
	}
	find "$dir" -maxdepth 1 -type f ! -name lock ! -name 'last_reserved_ip*' | wc -l
}

declare -A add_fail del_fail leak
for m in plain catena; do
	net="${id}-${m}"
	add_fail[$m]=0
	del_fail[$m]=0
	for ((i = 0; i < attempts; i++)); do
		ns="${id}-${m}-${i}"
		ip netns add "$ns"
		netns+=("$ns")
		export NETCONFPATH="${tmp}/net.d" CNI_PATH="$cni_path"
		if ! "$cnitool" add "$net" "/var/run/netns/${ns}" >/dev/null 2>>"${tmp}/errors.log"; then
			add_fail[$m]=$((add_fail[$m] + 1))
		fi
		if ! "$cnitool" del "$net" "/var/run/netns/${ns}" >/dev/null 2>>"${tmp}/errors.log"; then
			del_fail[$m]=$((del_fail[$m] + 1))
		fi
		ip netns del "$ns"
	done
	leak[$m]=$(leaked "$net")
done

echo "chain: bridge + host-local, then a plugin failing ADD and DEL; ${attempts} attempts, each ADD then DEL"
printf '%-16s %9s %13s %13s %11s\n' "" attempts "ADD failures" "DEL failures" "IPs leaked"
printf '%-16s %9d %13d %13d %11d\n' "plain conflist" "$attempts" "${add_fail[plain]}" "${del_fail[plain]}" "${leak[plain]}"
printf '%-16s %9d %13d %13d %11d\n' "catena" "$attempts" "${add_fail[catena]}" "${del_fail[catena]}" "${leak[catena]}"
echo
echo "plain conflist: libcni's DEL stops at the failing plugin's error, so bridge and"
echo "  host-local never hear DEL: one IP leaks per attempt, until the range is exhausted."
echo "catena: the failed ADD rolled back bridge and host-local, in reverse; the DEL that"
echo "  followed found no record and succeeded: nothing leaks, nothing wedges."
if ((leak[plain] != attempts || leak[catena] != 0 || del_fail[catena] != 0)); then
	echo "leak-demo: expected ${attempts} IPs leaked by the plain conflist and none, with no DEL failure, by catena" >&2
	exit 1
fi
