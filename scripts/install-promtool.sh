#!/usr/bin/env bash
# Builds Prometheus's promtool, pinned (PROMETHEUS_VERSION in versions.env),
# from the Go module proxy into bin/tools/, for the alerting rules' checks
# (deploy/monitoring, node/metrics/rules_test.go). Idempotent by a version stamp.
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
stamp="${tools}/.promtool.version"
want="prometheus=${PROMETHEUS_VERSION}"
if stamp_current "$stamp" "$want" "$tools" promtool; then
	log "promtool ${PROMETHEUS_VERSION} already in ${tools}"
	exit 0
fi
start=$SECONDS
log "building promtool ${PROMETHEUS_VERSION} into ${tools}"
rm -f "$stamp"
go_install_pinned "$tools" "github.com/prometheus/prometheus/cmd/promtool@${PROMETHEUS_VERSION}"
write_stamp "$stamp" "$want"
log "promtool built in $((SECONDS - start)) s"
