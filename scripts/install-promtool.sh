#!/usr/bin/env bash
# Builds Prometheus's promtool, pinned (PROMETHEUS_VERSION in versions.env),
# from the Go module proxy into bin/tools/, for the alerting rules' checks
# (deploy/monitoring, metrics/rules_test.go). Idempotent by a version stamp.
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
if [[ -x "${tools}/promtool" && "$(cat "$stamp" 2>/dev/null || true)" == "$want" ]]; then
	log "promtool ${PROMETHEUS_VERSION} already in ${tools}"
	exit 0
fi
start=$SECONDS
log "building promtool ${PROMETHEUS_VERSION} into ${tools}"
mkdir -p "$tools"
rm -f "$stamp"
(cd / && CGO_ENABLED=0 GOBIN="$tools" go install -trimpath -ldflags='-s -w' \
	"github.com/prometheus/prometheus/cmd/promtool@${PROMETHEUS_VERSION}")
printf '%s\n' "$want" >"${stamp}.tmp"
mv -f "${stamp}.tmp" "$stamp"
log "promtool built in $((SECONDS - start)) s"
