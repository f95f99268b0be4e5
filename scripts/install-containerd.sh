#!/usr/bin/env bash
# Installs the two containerd versions the CRI integration tests drive, as
# root on Debian 12. Idempotent: apt runs only when a package is missing, and
# the Go install runs only when bin/containerd2 does not hold the pinned
# version (checked by a version file).
#
#   /usr/bin/containerd, ctr, containerd-shim-runc-v2   Debian's 1.6 (legacy leg)
#   /usr/sbin/runc                                      Debian's runc, used by both
#   bin/containerd2/  containerd ctr containerd-shim-runc-v2   v2.4.2 (primary)
#
# No registry is reachable: the tests build their own pause image.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/versions.env
. "${repo}/scripts/versions.env"
# shellcheck source=scripts/lib.sh
. "${repo}/scripts/lib.sh"

log() { printf 'install-containerd: %s\n' "$*" >&2; }

# --- Debian packages: runc, iptables, containerd 1.6; and Go ------------------
ensure_apt_pkgs --with-recommends runc iptables containerd
use_local_go

dest="${repo}/bin/containerd2"
vfile="${dest}/.version"
want="containerd=${CONTAINERD2_VERSION}"
ok=1
[[ "$(cat "$vfile" 2>/dev/null || true)" == "$want" ]] || ok=0
for b in containerd ctr containerd-shim-runc-v2; do
	[[ -x "${dest}/${b}" ]] || ok=0
done
if ((ok)); then
	log "containerd ${CONTAINERD2_VERSION} already in ${dest}"
else
	start=$SECONDS
	log "building containerd ${CONTAINERD2_VERSION} into ${dest} (about 3 minutes cold on 2 cores)"
	mkdir -p "$dest"
	rm -f "$vfile"
	# Run outside the repo so its go.mod plays no part in the install.
	(cd / && GOBIN="$dest" go install \
		"github.com/containerd/containerd/v2/cmd/containerd@${CONTAINERD2_VERSION}" \
		"github.com/containerd/containerd/v2/cmd/ctr@${CONTAINERD2_VERSION}" \
		"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@${CONTAINERD2_VERSION}")
	printf '%s\n' "$want" >"$vfile.tmp"
	mv -f "$vfile.tmp" "$vfile"
	log "containerd ${CONTAINERD2_VERSION} built in $((SECONDS - start)) s"
fi

log "done"
