#!/usr/bin/env bash
# Catena demo, in two parts, under a minute once installed:
#
#  1. a healthy chain (bridge + host-local, portmap, tuning) through catena
#     and cnitool in a throwaway network namespace: the result, the interface,
#     the sysctl and the port mapping, then catena's record as an operator
#     sees it (catenactl list and show), then DEL, after which no record is
#     left;
#  2. the seed failure side by side (scripts/leak-demo.sh): the same bridge +
#     host-local followed by a plugin failing ADD and DEL, retried as a
#     runtime would, as a plain conflist and through catena: the plain one
#     leaks one IP per attempt, catena none. It exits non-zero otherwise.
#
# Run as root, after `make demo-deps build-demo` (or simply `make demo`).
# Everything it creates is private and removed on exit.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${repo}/bin"
cni_path="${bin}/cni"

if [[ $(id -u) -ne 0 ]]; then
	echo "demo: must run as root (creates a netns, a bridge and iptables rules)" >&2
	exit 1
fi
for f in "${bin}/cnitool" "${bin}/catenactl" "${cni_path}/catena" "${cni_path}/failer" "${cni_path}/bridge" "${cni_path}/host-local" "${cni_path}/portmap" "${cni_path}/tuning"; do
	if [[ ! -x "$f" ]]; then
		echo "demo: missing ${f}; run 'make demo' (or 'make demo-deps build-demo') first" >&2
		exit 1
	fi
done

network="catena-demo"
ns="catena-demo-$$"
netns_path="/var/run/netns/${ns}"
# cnitool's container ID: "cnitool-" and the first 10 bytes of the sha512 of
# the netns path, in hex.
container="cnitool-$(printf '%s' "$netns_path" | sha512sum | cut -c1-20)"
bridge="cdemo$$"
bridge="${bridge:0:15}"
subnet="10.250.$(($$ % 250 + 1)).0/24"
host_port=18080
tmp="$(mktemp -d "${TMPDIR:-/tmp}/catena-demo.XXXXXX")"
netconf_dir="${tmp}/net.d"
cache_dir="${tmp}/cache"
added=0

step() { printf '\n==> %s\n' "$*"; }
part() { printf '\n\n######## %s\n' "$*"; }

cnitool() {
	CNI_PATH="$cni_path" NETCONFPATH="$netconf_dir" \
		CAP_ARGS="{\"portMappings\":[{\"hostPort\":${host_port},\"containerPort\":80,\"protocol\":\"tcp\"}]}" \
		"${bin}/cnitool" "$@"
}

catenactl() {
	echo "\$ catenactl $* --cache-dir ${cache_dir}"
	"${bin}/catenactl" "$@" --cache-dir "$cache_dir"
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
	rm -rf "$tmp"
	rm -f "/var/lib/cni/results/${network}-${container}-eth0"
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
          "ipam": {"type": "host-local", "dataDir": "${tmp}/ipam", "ranges": [[{"subnet": "${subnet}"}]]}
        },
        {"type": "portmap", "capabilities": {"portMappings": true}},
        {"type": "tuning", "sysctl": {"net.core.somaxconn": "512"}}
      ]
    }
  ]
}
JSON

part "1. a healthy chain through catena"

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

step "catena's records: one per attachment, every delegate added"
catenactl list

step "the record of container ${container}: what each delegate did, with the config DEL will reuse"
catenactl show "$container" --network "$network"

step "cnitool del ${network} ${netns_path}"
cnitool del "$network" "$netns_path"
added=0
echo "DEL ok"

step "records after DEL"
catenactl list
left="$("${bin}/catenactl" list --json --cache-dir "$cache_dir")"
if [[ "$(tr -d '[:space:]' <<<"$left")" != "[]" ]]; then
	echo "demo: records still present after DEL: ${left}" >&2
	exit 1
fi
echo "no record left: the attachment is gone"

part "2. why Catena: a plugin of the chain fails ADD and DEL, the runtime retries"
echo
ATTEMPTS="${ATTEMPTS:-5}" bash "${repo}/scripts/leak-demo.sh"

step "demo complete; cleaning up netns ${ns}, bridge ${bridge} and ${tmp}"
