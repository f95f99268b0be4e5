#!/usr/bin/env bash
# Installs what Catena's tests, demo and bench need on a fresh Debian 12
# machine, as root. Idempotent: apt runs only when a package is missing, and
# the Go installs run only when bin/ does not already hold the pinned versions.
#
#   bin/cni/   bridge host-local portmap tuning loopback firewall  (CNI_PATH)
#   bin/       cnitool
#   bin/k8s/   etcd and the Kubernetes components (scripts/install-k8s.sh)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/versions.env
. "${repo}/scripts/versions.env"
# shellcheck source=scripts/lib.sh
. "${repo}/scripts/lib.sh"

log() { printf 'install-deps: %s\n' "$*" >&2; }

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
	log "installing CNI plugins ${PLUGINS_VERSION} into ${cni_dir}"
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
fi

# --- cnitool -----------------------------------------------------------------
bin_dir="${repo}/bin"
cnitool_stamp="${bin_dir}/.cnitool.version"
cnitool_want="cni=${CNI_VERSION}"
if [[ -x "${bin_dir}/cnitool" && "$(cat "$cnitool_stamp" 2>/dev/null || true)" == "$cnitool_want" ]]; then
	log "cnitool ${CNI_VERSION} already in ${bin_dir}"
else
	log "installing cnitool ${CNI_VERSION} into ${bin_dir}"
	mkdir -p "$bin_dir"
	rm -f "$cnitool_stamp"
	(cd / && GOBIN="$bin_dir" go install -trimpath -ldflags='-s -w' "github.com/containernetworking/cni/cnitool@${CNI_VERSION}")
	printf '%s\n' "$cnitool_want" >"${cnitool_stamp}.tmp"
	mv -f "${cnitool_stamp}.tmp" "$cnitool_stamp"
fi

bash "${repo}/scripts/install-containerd.sh"
bash "${repo}/scripts/install-buildah.sh"
bash "${repo}/scripts/install-k8s.sh"

log "done"
