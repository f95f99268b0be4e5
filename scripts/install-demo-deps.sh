#!/usr/bin/env bash
# Installs what `make demo` runs, and nothing more, on a fresh Debian 12
# machine, as root: iptables and iproute2 (apt, only when missing), and from
# the Go module proxy, only when bin/ does not already hold the pinned
# versions (checked by a version file):
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
plugins_vfile="${cni_dir}/.version"
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

if version_current "$plugins_vfile" "$plugins_want" "$cni_dir" "${plugin_pkgs[@]##*/}"; then
	log "CNI plugins ${PLUGINS_VERSION} already in ${cni_dir}"
else
	start=$SECONDS
	log "building CNI plugins ${PLUGINS_VERSION} into ${cni_dir} (1 to 3 minutes cold, by the load on the machine)"
	rm -f "$plugins_vfile"
	go_install_pinned "$cni_dir" "${plugin_pkgs[@]/%/@${PLUGINS_VERSION}}"
	write_version "$plugins_vfile" "$plugins_want"
	log "CNI plugins built in $((SECONDS - start)) s"
fi

# --- cnitool -----------------------------------------------------------------
bin_dir="${repo}/bin"
cnitool_vfile="${bin_dir}/.cnitool.version"
cnitool_want="cni=${CNI_VERSION}"
if version_current "$cnitool_vfile" "$cnitool_want" "$bin_dir" cnitool; then
	log "cnitool ${CNI_VERSION} already in ${bin_dir}"
else
	start=$SECONDS
	log "building cnitool ${CNI_VERSION} into ${bin_dir} (under a minute and a half cold)"
	rm -f "$cnitool_vfile"
	# Static too: built with the plugins' flags, it reuses their compiled
	# standard library instead of compiling it again with cgo.
	go_install_pinned "$bin_dir" "github.com/containernetworking/cni/cnitool@${CNI_VERSION}"
	write_version "$cnitool_vfile" "$cnitool_want"
	log "cnitool built in $((SECONDS - start)) s"
fi

log "done"
