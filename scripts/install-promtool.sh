#!/usr/bin/env bash
# Builds Prometheus's promtool, pinned (PROMETHEUS_VERSION in versions.env),
# from the Go module proxy into bin/tools/, for the alerting rules' checks
# (deploy/monitoring, node/metrics/rules_test.go). Idempotent by a version file.
# Cold, about 10 minutes of CPU on 2 cores (it links Prometheus's service
# discovery, client-go among it); seconds warm.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/versions.env
. "${repo}/scripts/versions.env"
# shellcheck source=scripts/lib.sh
. "${repo}/scripts/lib.sh"
log() { printf 'install-promtool: %s\n' "$*" >&2; }
use_local_go

tools="${repo}/bin/tools"
vfile="${tools}/.promtool.version"
want="prometheus=${PROMETHEUS_VERSION}"
if version_current "$vfile" "$want" "$tools" promtool; then
	log "promtool ${PROMETHEUS_VERSION} already in ${tools}"
	exit 0
fi
start=$SECONDS
log "building promtool ${PROMETHEUS_VERSION} into ${tools}"
rm -f "$vfile"
go_install_pinned "$tools" "github.com/prometheus/prometheus/cmd/promtool@${PROMETHEUS_VERSION}"
write_version "$vfile" "$want"
log "promtool built in $((SECONDS - start)) s"
