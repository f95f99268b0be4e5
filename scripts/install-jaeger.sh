#!/usr/bin/env bash
# Builds Jaeger v2 (its cmd/jaeger, an OpenTelemetry Collector with Jaeger's
# storage and query API), pinned (JAEGER_VERSION in versions.env), from the
# Go module proxy into bin/tools/, for the integration tests that read back
# the spans sent to it (integration/jaeger_test.go). Idempotent by a
# version file. Jaeger's go.mod has replace directives, which go install
# PKG@VERSION refuses: it is built in a throwaway module that requires it as
# a tool and carries the same replace lines. Cold, about 7 minutes on 2
# cores with its modules in the module cache (7.5 minutes of CPU) and some
# 3 more to download them; instant warm.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/versions.env
. "${repo}/scripts/versions.env"
# shellcheck source=scripts/lib.sh
. "${repo}/scripts/lib.sh"
log() { printf 'install-jaeger: %s\n' "$*" >&2; }
use_local_go

tools="${repo}/bin/tools"
vfile="${tools}/.jaeger.version"
want="jaeger=${JAEGER_VERSION}"
if version_current "$vfile" "$want" "$tools" jaeger; then
	log "jaeger ${JAEGER_VERSION} already in ${tools}"
	exit 0
fi
start=$SECONDS
log "building jaeger ${JAEGER_VERSION} into ${tools}"
rm -f "$vfile"
mkdir -p "$tools"

mod="github.com/jaegertracing/jaeger"
build="$(mktemp -d)"
trap 'rm -rf "$build"' EXIT
# Jaeger's own go.mod, from the module cache (downloaded if need be).
if ! info="$(cd "$build" && go mod download -json "${mod}@${JAEGER_VERSION}")"; then
	log "error: ${mod}@${JAEGER_VERSION} cannot be downloaded: ${info}"
	exit 1
fi
gomod="$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p' <<<"$info")"
if [[ -z "$gomod" || ! -f "$gomod" ]]; then
	log "error: go mod download names no go.mod for ${mod}@${JAEGER_VERSION}: ${info}"
	exit 1
fi
(
	cd "$build"
	go mod init catena-jaeger-build >/dev/null 2>&1
	# Its replace directives, one a line ("replace A => B v") or in a block.
	awk '
		/^replace[[:space:]]*\($/ { block = 1; next }
		block && /^\)/ { block = 0; next }
		block { print "replace " $0; next }
		/^replace[[:space:]]/ { print }
	' "$gomod" >>go.mod
	# Its hundreds of "go: added" lines only when it fails.
	if ! go get -tool "${mod}/cmd/jaeger@${JAEGER_VERSION}" >get.log 2>&1; then
		cat get.log >&2
		exit 1
	fi
	# Its version, which `jaeger version` prints, as Jaeger's Makefile sets it.
	CGO_ENABLED=0 go build -trimpath \
		-ldflags="-s -w -X ${mod}/internal/version.latestVersion=${JAEGER_VERSION}" \
		-o "${tools}/jaeger.tmp" "${mod}/cmd/jaeger"
)
mv -f "${tools}/jaeger.tmp" "${tools}/jaeger"
write_version "$vfile" "$want"
log "jaeger built in $((SECONDS - start)) s"
