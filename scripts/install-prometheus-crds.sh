#!/usr/bin/env bash
# Fetches the Prometheus Operator's ServiceMonitor and PrometheusRule CRDs,
# pinned (PROMETHEUS_OPERATOR_VERSION in versions.env), from the Go module
# proxy (the module's example/prometheus-operator-crd/) into
# bin/tools/prometheus-operator-crds/, for the Kubernetes node test, which
# has the API server validate the chart's monitoring objects against them.
# Idempotent by a version file; seconds cold (a 4 MiB module), instant warm.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/versions.env
. "${repo}/scripts/versions.env"
# shellcheck source=scripts/lib.sh
. "${repo}/scripts/lib.sh"
log() { printf 'install-prometheus-crds: %s\n' "$*" >&2; }
use_local_go

dest="${repo}/bin/tools/prometheus-operator-crds"
vfile="${dest}/.version"
want="prometheus-operator=${PROMETHEUS_OPERATOR_VERSION}"
crds=(monitoring.coreos.com_servicemonitors.yaml monitoring.coreos.com_prometheusrules.yaml)
if [[ "$(cat "$vfile" 2>/dev/null || true)" == "$want" ]] && [[ -f "${dest}/${crds[0]}" && -f "${dest}/${crds[1]}" ]]; then
	log "the CRDs of prometheus-operator ${PROMETHEUS_OPERATOR_VERSION} already in ${dest}"
	exit 0
fi
mod="github.com/prometheus-operator/prometheus-operator@${PROMETHEUS_OPERATOR_VERSION}"
log "fetching ${mod}"
# outside the repo, so that its go.mod plays no part; checked against the
# checksum database as GOSUMDB says
dir="$(cd / && go mod download -json "$mod" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
if [[ -z "$dir" || ! -d "${dir}/example/prometheus-operator-crd" ]]; then
	log "no example/prometheus-operator-crd in ${mod} (${dir:-not downloaded})"
	exit 1
fi
mkdir -p "$dest"
rm -f "$vfile"
for c in "${crds[@]}"; do
	install -m 0644 "${dir}/example/prometheus-operator-crd/${c}" "${dest}/${c}"
done
write_version "$vfile" "$want"
log "${crds[*]} of ${PROMETHEUS_OPERATOR_VERSION} in ${dest}"
