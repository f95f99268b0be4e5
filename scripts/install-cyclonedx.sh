#!/usr/bin/env bash
# Builds CycloneDX's cyclonedx-gomod, pinned (CYCLONEDX_GOMOD_VERSION in
# versions.env), from the Go module proxy into bin/tools/, for make sbom.
# Idempotent by a version file. Cold, about a minute on 2 cores (62 s
# measured with its modules to download); instant warm.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/versions.env
. "${repo}/scripts/versions.env"
# shellcheck source=scripts/lib.sh
. "${repo}/scripts/lib.sh"
log() { printf 'install-cyclonedx: %s\n' "$*" >&2; }
use_local_go

tools="${repo}/bin/tools"
vfile="${tools}/.cyclonedx-gomod.version"
want="cyclonedx-gomod=${CYCLONEDX_GOMOD_VERSION}"
if version_current "$vfile" "$want" "$tools" cyclonedx-gomod; then
	log "cyclonedx-gomod ${CYCLONEDX_GOMOD_VERSION} already in ${tools}"
	exit 0
fi
start=$SECONDS
log "building cyclonedx-gomod ${CYCLONEDX_GOMOD_VERSION} into ${tools}"
rm -f "$vfile"
go_install_pinned "$tools" "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@${CYCLONEDX_GOMOD_VERSION}"
write_version "$vfile" "$want"
log "cyclonedx-gomod built in $((SECONDS - start)) s"
