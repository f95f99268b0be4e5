#!/usr/bin/env bash
# Installs what `make demo` runs, and nothing more, on a fresh Debian 12
# machine, as root: iptables and iproute2 (apt, only when missing), and from
# the Go module proxy, only when bin/ does not already hold the pinned
# versions (checked by a version stamp):
#
#   bin/cni/   bridge host-local portmap tuning loopback firewall
#              ptp bandwidth (a Calico-shaped primary)          (CNI_PATH)
#   bin/       cnitool
#
# Cold, with no Go module or build cache, on a shared 2-core machine
# (2026-11-25): plugins 107 s and cnitool 62 s at a load average of 6 to 9,
# 202 s and 92 s at 9 to 15 (the downloads are 10 s of it); a second warm.
# scripts/install-deps.sh runs it first, then the heavy installs `make test`
# needs (containerd, buildah, Kubernetes).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/versions.env
. "${repo}/scripts/versions.env"
# shellcheck source=scripts/lib.sh
. "${repo}/scripts/lib.sh"

log() { printf 'install-demo-deps: %s\n' "$*" >&2; }

if [[ $(id -u) -ne 0 ]]; then
	log "warning: not running as root; apt installs will fail if packages are missing"
fi

# --- Debian packages and Go ---------------------------------------------------
ensure_apt_pkgs iptables iproute2
use_local_go

# --- CNI reference plugins ---------------------------------------------------
cni_dir="${repo}/bin/cni"
plugins_stamp="${cni_dir}/.version"
# Static, as upstream releases them: catena-agent's reconciler runs them in
# its FROM scratch container, where a dynamically linked plugin fails to exec.
plugins_want="plugins=${PLUGINS_VERSION} static"
plugin_pkgs=(
	github.com/containernetworking/plugins/plugins/main/bridge
	github.com/containernetworking/plugins/plugins/ipam/host-local
	github.com/containernetworking/plugins/plugins/meta/portmap
	github.com/containernetworking/plugins/plugins/meta/tuning
	github.com/containernetworking/plugins/plugins/main/loopback
	github.com/containernetworking/plugins/plugins/meta/firewall
	github.com/containernetworking/plugins/plugins/main/ptp
	github.com/containernetworking/plugins/plugins/meta/bandwidth
)

plugins_ok=1
if [[ "$(cat "$plugins_stamp" 2>/dev/null || true)" != "$plugins_want" ]]; then
	plugins_ok=0
fi
for pkg in "${plugin_pkgs[@]}"; do
	[[ -x "${cni_dir}/${pkg##*/}" ]] || plugins_ok=0
done

if ((plugins_ok)); then
	log "CNI plugins ${PLUGINS_VERSION} already in ${cni_dir}"
else
	start=$SECONDS
	log "building CNI plugins ${PLUGINS_VERSION} into ${cni_dir} (1 to 3 minutes cold, by the load on the machine)"
	mkdir -p "$cni_dir"
	rm -f "$plugins_stamp"
	installs=()
	for pkg in "${plugin_pkgs[@]}"; do
		installs+=("${pkg}@${PLUGINS_VERSION}")
	done
	# Run outside the repo so its go.mod plays no part in the install.
	(cd / && CGO_ENABLED=0 GOBIN="$cni_dir" go install -trimpath -ldflags='-s -w' "${installs[@]}")
	printf '%s\n' "$plugins_want" >"${plugins_stamp}.tmp"
	mv -f "${plugins_stamp}.tmp" "$plugins_stamp"
	log "CNI plugins built in $((SECONDS - start)) s"
fi

# --- cnitool -----------------------------------------------------------------
bin_dir="${repo}/bin"
cnitool_stamp="${bin_dir}/.cnitool.version"
cnitool_want="cni=${CNI_VERSION}"
if [[ -x "${bin_dir}/cnitool" && "$(cat "$cnitool_stamp" 2>/dev/null || true)" == "$cnitool_want" ]]; then
	log "cnitool ${CNI_VERSION} already in ${bin_dir}"
else
	start=$SECONDS
	log "building cnitool ${CNI_VERSION} into ${bin_dir} (under a minute and a half cold)"
	mkdir -p "$bin_dir"
	rm -f "$cnitool_stamp"
	# Static too: built with the plugins' flags, it reuses their compiled
	# standard library instead of compiling it again with cgo.
	(cd / && CGO_ENABLED=0 GOBIN="$bin_dir" go install -trimpath -ldflags='-s -w' "github.com/containernetworking/cni/cnitool@${CNI_VERSION}")
	printf '%s\n' "$cnitool_want" >"${cnitool_stamp}.tmp"
	mv -f "${cnitool_stamp}.tmp" "$cnitool_stamp"
	log "cnitool built in $((SECONDS - start)) s"
fi

log "done"
