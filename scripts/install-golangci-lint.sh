#!/usr/bin/env bash
# Builds golangci-lint, pinned (GOLANGCI_LINT_VERSION in versions.env), from
# the Go module proxy into bin/tools/, for make lint (.golangci.yml).
# Idempotent by a version file. Cold, about 3 minutes on 2 cores; instant
# warm.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/versions.env
. "${repo}/scripts/versions.env"
# shellcheck source=scripts/lib.sh
. "${repo}/scripts/lib.sh"
log() { printf 'install-golangci-lint: %s\n' "$*" >&2; }
use_local_go

tools="${repo}/bin/tools"
vfile="${tools}/.golangci-lint.version"
want="golangci-lint=${GOLANGCI_LINT_VERSION}"
if version_current "$vfile" "$want" "$tools" golangci-lint; then
	log "golangci-lint ${GOLANGCI_LINT_VERSION} already in ${tools}"
	exit 0
fi
start=$SECONDS
log "building golangci-lint ${GOLANGCI_LINT_VERSION} into ${tools}"
rm -f "$vfile"
go_install_pinned "$tools" "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@${GOLANGCI_LINT_VERSION}"
write_version "$vfile" "$want"
log "golangci-lint built in $((SECONDS - start)) s"
