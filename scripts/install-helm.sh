#!/usr/bin/env bash
# Builds Helm, pinned (HELM_VERSION in versions.env), from the Go module
# proxy into bin/tools/, for make manifests, make chart, make lint and the
# Kubernetes node test's helm install, upgrade and uninstall. Idempotent by
# a version file.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/versions.env
. "${repo}/scripts/versions.env"
# shellcheck source=scripts/lib.sh
. "${repo}/scripts/lib.sh"
log() { printf 'install-helm: %s\n' "$*" >&2; }
use_local_go

tools="${repo}/bin/tools"
vfile="${tools}/.helm.version"
want="helm=${HELM_VERSION}"
if version_current "$vfile" "$want" "$tools" helm; then
	log "helm ${HELM_VERSION} already in ${tools}"
	exit 0
fi
start=$SECONDS
log "building helm ${HELM_VERSION} into ${tools}"
rm -f "$vfile"
# helm version prints the release it was built as (Helm's own Makefile
# sets the same variable).
go_install_pinned --ldflags="-X helm.sh/helm/v4/internal/version.version=${HELM_VERSION}" \
	"$tools" "helm.sh/helm/v4/cmd/helm@${HELM_VERSION}"
write_version "$vfile" "$want"
log "helm built in $((SECONDS - start)) s: $("${tools}/helm" version --short)"
