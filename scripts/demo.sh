#!/usr/bin/env bash
# Catena demo: runs a real chain (bridge + host-local, portmap, tuning) through
# catena in a throwaway network namespace, shows the result and catena's
# durable record, then DELs and shows that the record is gone.
#
# Run as root, after `make plugins build` (or simply `make demo`).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${repo}/bin"
cni_path="${bin}/cni"

if [[ $(id -u) -ne 0 ]]; then
	echo "demo: must run as root (creates a netns, a bridge and iptables rules)" >&2
	exit 1
fi
for f in "${bin}/cnitool" "${cni_path}/catena" "${cni_path}/bridge" "${cni_path}/host-local" "${cni_path}/portmap" "${cni_path}/tuning"; do
	if [[ ! -x "$f" ]]; then
		echo "demo: missing ${f}; run 'make demo' (or 'make plugins build') first" >&2
		exit 1
	fi
done

network="catena-demo"
ns="catena-demo-$$"
netns_path="/var/run/netns/${ns}"
bridge="cdemo$$"
bridge="${bridge:0:15}"
subnet="10.250.$(($$ % 250 + 1)).0/24"
host_port=18080
tmp="$(mktemp -d "${TMPDIR:-/tmp}/catena-demo.XXXXXX")"
netconf_dir="${tmp}/net.d"
cache_dir="${tmp}/cache"
added=0

step() { printf '\n==> %s\n' "$*"; }

cnitool() {
	CNI_PATH="$cni_path" NETCONFPATH="$netconf_dir" \
		CAP_ARGS="{\"portMappings\":[{\"hostPort\":${host_port},\"containerPort\":80,\"protocol\":\"tcp\"}]}" \
		"${bin}/cnitool" "$@"
}

# show_json prints a record file's newest entry: a record is a short journal,
# one self-checking JSON envelope per line, the newest last; the first is a
# full snapshot ("schema":1), later ones are usually deltas ("schema":2)
# whose "steps" are null where a step did not change.
show_json() {
	echo "($(wc -l <"$1") journal entries, a full snapshot then deltas; the newest:)"
	if command -v python3 >/dev/null 2>&1; then
		tail -n 1 "$1" | python3 -m json.tool
	else
		tail -n 1 "$1"
	fi
}

cleanup() {
	local rc=$?
	set +e
	if ((added)); then
		echo "demo: cleaning up: DEL of the attachment" >&2
		cnitool del "$network" "$netns_path" >/dev/null 2>&1
	fi
	ip netns del "$ns" >/dev/null 2>&1
	ip link del "$bridge" >/dev/null 2>&1
	rm -rf "$tmp" "/var/lib/cni/networks/${network}"
	rm -f /var/lib/cni/results/"${network}"-cnitool-*
	exit "$rc"
}
trap cleanup EXIT INT TERM

mkdir -p "$netconf_dir" "$cache_dir"
cat >"${netconf_dir}/10-${network}.conflist" <<JSON
{
  "cniVersion": "1.1.0",
  "name": "${network}",
  "plugins": [
    {
      "type": "catena",
      "cacheDir": "${cache_dir}",
      "lockTimeout": "30s",
      "delegateTimeout": "60s",
      "capabilities": {"portMappings": true},
      "delegates": [
        {
          "type": "bridge",
          "bridge": "${bridge}",
          "isGateway": true,
          "ipam": {"type": "host-local", "ranges": [[{"subnet": "${subnet}"}]]}
        },
        {"type": "portmap", "capabilities": {"portMappings": true}},
        {"type": "tuning", "sysctl": {"net.core.somaxconn": "512"}}
      ]
    }
  ]
}
JSON

step "network config (${netconf_dir}/10-${network}.conflist)"
cat "${netconf_dir}/10-${network}.conflist"

step "creating netns ${ns}"
ip netns add "$ns"

step "cnitool add ${network} ${netns_path}  (hostPort ${host_port} -> 80/tcp)"
added=1
cnitool add "$network" "$netns_path"

step "ip -n ${ns} addr"
ip -n "$ns" addr

step "sysctl net.core.somaxconn inside ${ns} (set by tuning)"
ip netns exec "$ns" cat /proc/sys/net/core/somaxconn

step "port mapping rules for ${host_port} (set by portmap)"
if command -v iptables-save >/dev/null 2>&1 && iptables-save -t nat 2>/dev/null | grep -e "--dport ${host_port}"; then
	:
else
	echo "(no iptables nat rule mentions ${host_port})"
fi

shopt -s nullglob
records=("${cache_dir}/records/${network}/"*.json)
step "catena record (${#records[@]} file(s) under ${cache_dir}/records/${network}/)"
if ((${#records[@]} == 0)); then
	echo "demo: no record found under ${cache_dir}/records/${network}" >&2
	exit 1
fi
for r in "${records[@]}"; do
	echo "--- ${r}"
	show_json "$r"
done

step "cnitool del ${network} ${netns_path}"
cnitool del "$network" "$netns_path"
added=0
echo "DEL ok"

step "records after DEL"
left=("${cache_dir}/records/${network}/"*.json)
if ((${#left[@]} == 0)); then
	echo "no record left under ${cache_dir}/records/${network}/: the attachment is gone"
else
	echo "demo: records still present after DEL: ${left[*]}" >&2
	exit 1
fi

step "demo complete; cleaning up netns ${ns}, bridge ${bridge} and ${tmp}"
