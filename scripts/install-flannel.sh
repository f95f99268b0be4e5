#!/usr/bin/env bash
# Builds flannel's CNI plugin, pinned in scripts/versions.env, into
# bin/cni/flannel (static, CGO_ENABLED=0 -trimpath), for the integration
# tests and the Kubernetes node test (CATENA_FLANNEL_OUT names another
# output dir), from the first of:
#
#   1. the Go module proxy (GOPROXY): github.com/flannel-io/cni-plugin at
#      FLANNEL_VERSION, checked against the checksum database as GOSUMDB
#      says, built with go_install_pinned (scripts/lib.sh). The script asks
#      the proxy first, bounded by CATENA_FLANNEL_PROBE_TIMEOUT (20 s), and
#      goes on to 2. when it does not serve the module (on the project's
#      network, proxy.golang.org answers 403 at once);
#   2. the pinned source in the shared vendor-src dir beside the repo
#      (../shared/vendor-src; for a git worktree, beside the main checkout;
#      or $CATENA_VENDOR_SRC), whose README pins the release and commit. The
#      script checks that README's row and the tree's sha256 against
#      versions.env, copies the tree to a temp dir (the source is never
#      written to, nor copied into the repo) and builds it there, its
#      dependencies from the module proxy.
#
# With neither, it stops (in the probe's bound at most) with one message
# naming both. Idempotent: a version file in the output dir names what was built,
# and is checked first: a built flannel needs neither. 6 to 15 s cold here.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/versions.env
. "${repo}/scripts/versions.env"
# shellcheck source=scripts/lib.sh
. "${repo}/scripts/lib.sh"

log() { printf 'install-flannel: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

module=github.com/flannel-io/cni-plugin
probe_timeout="${CATENA_FLANNEL_PROBE_TIMEOUT:-20}"

use_local_go
cni_dir="${CATENA_FLANNEL_OUT:-${repo}/bin/cni}"
vfile="${cni_dir}/.flannel.version"
built="flannel=${FLANNEL_VERSION} commit=${FLANNEL_COMMIT}"
want_proxy="${built} module=${module} static"
want_src="${built} src=${FLANNEL_SRC_SHA256} static"
if version_current "$vfile" "$want_proxy" "$cni_dir" flannel ||
	version_current "$vfile" "$want_src" "$cni_dir" flannel; then
	log "flannel ${FLANNEL_VERSION} already in ${cni_dir}"
	exit 0
fi

work="$(mktemp -d /tmp/catena-install-flannel.XXXXXX)"
trap 'rm -rf "$work"' EXIT
ldflags="-X main.Program=flannel -X main.Version=${FLANNEL_VERSION} -X main.Commit=${FLANNEL_COMMIT}"

# install_built BIN WANT checks the version line of the flannel binary BIN,
# moves it to ${cni_dir}/flannel through a rename and writes the version file WANT.
install_built() {
	local bin="$1" want="$2" about
	# Without CNI_COMMAND, the plugin prints its version line and exits 0.
	about="$("$bin" 2>&1 || true)"
	[[ "$about" == *"version ${FLANNEL_VERSION} "*"commit ${FLANNEL_COMMIT}"* ]] || die "the built flannel says ${about@Q}"
	mkdir -p "$cni_dir"
	rm -f "$vfile"
	mv -f "$bin" "${cni_dir}/flannel.tmp"
	mv -f "${cni_dir}/flannel.tmp" "${cni_dir}/flannel"
	write_version "$vfile" "$want"
}

# --- 1. the Go module proxy ---------------------------------------------------
start=$SECONDS
goproxy="$(go env GOPROXY)"
rc=0
probe="$(cd / && timeout "$probe_timeout" go list -m "${module}@${FLANNEL_VERSION}" 2>&1)" || rc=$?
if ((rc == 0)); then
	log "building flannel ${FLANNEL_VERSION} from the Go module proxy (${goproxy}) into ${cni_dir}"
	go_install_pinned --ldflags="$ldflags" "${work}/gobin" "${module}@${FLANNEL_VERSION}"
	install_built "${work}/gobin/cni-plugin" "$want_proxy"
	log "flannel ${FLANNEL_VERSION} built in $((SECONDS - start)) s"
	exit 0
fi
if ((rc == 124)); then
	proxy_err="no answer in ${probe_timeout} s"
else
	# go's error on one line: "go: <module>: reading <url>: 403 Forbidden ..."
	proxy_err="$(printf '%s' "$probe" | tr -s '\n\t' '  ')"
fi

# --- 2. the pinned source beside the repo -------------------------------------
# The shared dir (vendor_src_dir, scripts/lib.sh): beside the repo's checkout, or
# beside the main checkout of a linked git worktree.
vendor_src="$(vendor_src_dir "$repo")"
src="${vendor_src}/flannel-cni-plugin"
if [[ ! -f "${src}/go.mod" || ! -f "${vendor_src}/README.md" ]]; then
	die "flannel's CNI plugin ${FLANNEL_VERSION} has no source to build from:
  - the Go module proxy (GOPROXY=${goproxy}) gave no ${module}@${FLANNEL_VERSION}: ${proxy_err}
  - its pinned source is not at ${src} (no go.mod there, or no README.md in ${vendor_src})
Provide one of them, then run this again:
  - CATENA_VENDOR_SRC=/path/to/vendor-src: a dir holding flannel-cni-plugin/ at the pinned release ${FLANNEL_VERSION} (commit ${FLANNEL_COMMIT}) and a README.md whose row names that release and commit;
  - a network whose Go module proxy serves ${module}@${FLANNEL_VERSION}."
fi
log "the Go module proxy gave no ${module}@${FLANNEL_VERSION} (${proxy_err}): building from the pinned source"

why="$(check_pinned_source "$vendor_src" flannel-cni-plugin flannel "$module" "${FLANNEL_VERSION}" "${FLANNEL_COMMIT}" "${FLANNEL_SRC_SHA256}" FLANNEL)" || die "$why"

log "building flannel ${FLANNEL_VERSION} from ${src} into ${cni_dir}"
cp -R "$src" "${work}/src"
chmod -R u+w "${work}/src"
(cd "${work}/src" && CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags="-s -w ${ldflags}" -o "${work}/flannel" .)
install_built "${work}/flannel" "$want_src"
log "flannel ${FLANNEL_VERSION} built in $((SECONDS - start)) s"
