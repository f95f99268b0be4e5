#!/usr/bin/env bash
# Builds CRI-O, pinned in scripts/versions.env, for the CRI-O integration
# tests (integration/crio_*_test.go), as root on Debian 12, into bin/crio/
# (CATENA_CRIO_OUT names another output dir):
#
#   crio      the daemon (cgo: libseccomp, Debian's libsqlite3)
#   pinns     its helper that pins namespaces (a small static C program)
#   copyimg   its test/copyimg, which copies an OCI archive into its
#             storage: the tests load their own pause image, no registry
#
# and installs from apt what they need to build and run: libseccomp-dev
# libsqlite3-dev libbtrfs-dev pkg-config gcc make, and conmon and runc.
# The source is the first of:
#
#   1. the Go module proxy (GOPROXY): `go mod download -json` of
#      github.com/cri-o/cri-o at CRIO_VERSION (checked against the checksum
#      database as GOSUMDB says), the module's dir copied to a temp dir and
#      built there, its dependencies from the module proxy (a module zip
#      holds no vendor/). On the project's network proxy.golang.org answers
#      403 at once; the download is bounded by CATENA_CRIO_PROBE_TIMEOUT (60 s);
#   2. the pinned source in the shared vendor-src dir beside the repo
#      (../shared/vendor-src; for a git worktree, beside the main checkout;
#      or $CATENA_VENDOR_SRC), whose README pins the release and commit. The
#      script checks that README's row and the tree's sha256 against
#      versions.env, copies the tree to a temp dir (never writing to the
#      source) and builds it there offline with its own vendor/.
#
# With neither, it stops with one message naming both. Idempotent: apt runs
# only when a package is missing, and the build only when the version file in the
# output dir does not name the pinned release. 13 min cold on a loaded
# 2-core machine (it prints its time); seconds warm.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/versions.env
. "${repo}/scripts/versions.env"
# shellcheck source=scripts/lib.sh
. "${repo}/scripts/lib.sh"

log() { printf 'install-crio: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

module=github.com/cri-o/cri-o
probe_timeout="${CATENA_CRIO_PROBE_TIMEOUT:-60}"
# What CRI-O's Makefile picks on Debian 12 with the packages above, but
# containers_image_openpgp set by hand (Debian has no gpgme-config: gpgme is
# not linked) and libsqlite3 (Debian's libsqlite3, not the bundled copy).
tags='containers_image_ostree_stub seccomp containers_image_openpgp libsqlite3'

ensure_apt_pkgs libseccomp-dev libsqlite3-dev libbtrfs-dev pkg-config gcc libc6-dev make conmon runc
use_local_go

dest="${CATENA_CRIO_OUT:-${repo}/bin/crio}"
vfile="${dest}/.version"
built="crio=${CRIO_VERSION} commit=${CRIO_COMMIT} tags=${tags// /,}"
want_proxy="${built} module=${module}"
want_src="${built} src=${CRIO_SRC_SHA256}"
if version_current "$vfile" "$want_proxy" "$dest" crio pinns copyimg ||
	version_current "$vfile" "$want_src" "$dest" crio pinns copyimg; then
	log "CRI-O ${CRIO_VERSION} already in ${dest}"
	exit 0
fi

work="$(mktemp -d /tmp/catena-install-crio.XXXXXX)"
trap 'chmod -R u+w "$work" 2>/dev/null || true; rm -rf "$work"' EXIT
start=$SECONDS

# build SRCDIR MODFLAG WANT builds crio, copyimg and pinns in the writable
# tree SRCDIR, checks crio's version and installs the three into $dest
# through renames, then writes the version file WANT.
build() {
	local src="$1" modflag="$2" want="$3" about b
	log "building crio and copyimg (${tags}) into ${dest} (13 min cold on 2 cores; 25 s warm)"
	mkdir -p "${work}/out"
	(cd "$src" && CGO_ENABLED=1 GOFLAGS="$modflag" go build -trimpath -buildvcs=false -ldflags='-s -w' \
		-tags "$tags" -o "${work}/out/" ./cmd/crio ./test/copyimg)
	log "building pinns"
	make -C "${src}/pinns" >&2
	cp "${src}/bin/pinns" "${work}/out/pinns"
	about="$("${work}/out/crio" --version 2>&1 || true)"
	[[ "$about" == *"${CRIO_VERSION#v}"* ]] || die "the built crio says ${about@Q}, not ${CRIO_VERSION#v}"
	mkdir -p "$dest"
	rm -f "$vfile"
	for b in crio pinns copyimg; do
		mv -f "${work}/out/${b}" "${dest}/${b}.tmp"
		mv -f "${dest}/${b}.tmp" "${dest}/${b}"
	done
	write_version "$vfile" "$want"
	log "CRI-O ${CRIO_VERSION} built in $((SECONDS - start)) s"
}

# --- 1. the Go module proxy ---------------------------------------------------
goproxy="$(go env GOPROXY)"
rc=0
# -json prints the module's Dir, or its Error (and exits non-zero).
dl="$(cd / && timeout "$probe_timeout" go mod download -json "${module}@${CRIO_VERSION}" 2>&1)" || rc=$?
moddir="$(printf '%s' "$dl" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
if ((rc == 0)) && [[ -n "$moddir" && -f "${moddir}/go.mod" ]]; then
	log "building CRI-O ${CRIO_VERSION} from the Go module proxy (${goproxy}): ${moddir}"
	cp -R "$moddir" "${work}/src"
	chmod -R u+w "${work}/src"
	build "${work}/src" -mod=readonly "$want_proxy"
	exit 0
fi
if ((rc == 124)); then
	proxy_err="no answer in ${probe_timeout} s"
else
	# the Error field on one line: "...: reading <url>: 403 Forbidden ..."
	proxy_err="$(printf '%s' "$dl" | sed -n 's/^[[:space:]]*"Error": "\(.*\)"$/\1/p' | sed 's/\\n\\t/ /g; s/\\n/ /g; s/\\"/"/g')"
	[[ -n "$proxy_err" ]] || proxy_err="$(printf '%s' "$dl" | tr -s '\n\t' '  ')"
fi

# --- 2. the pinned source beside the repo -------------------------------------
vendor_src="$(vendor_src_dir "$repo")"
src="${vendor_src}/cri-o"
if [[ ! -f "${src}/go.mod" || ! -f "${src}/vendor/modules.txt" || ! -f "${vendor_src}/README.md" ]]; then
	die "CRI-O ${CRIO_VERSION} has no source to build from:
  - the Go module proxy (GOPROXY=${goproxy}) gave no ${module}@${CRIO_VERSION}: ${proxy_err}
  - its pinned source is not at ${src} (no go.mod or vendor/modules.txt there, or no README.md in ${vendor_src})
Provide one of them, then run this again:
  - CATENA_VENDOR_SRC=/path/to/vendor-src: a dir holding cri-o/ at the pinned release ${CRIO_VERSION} (commit ${CRIO_COMMIT}) with its vendor/, and a README.md whose row names that release and commit;
  - a network whose Go module proxy serves ${module}@${CRIO_VERSION}."
fi
log "the Go module proxy gave no ${module}@${CRIO_VERSION} (${proxy_err}): building from the pinned source"

why="$(check_pinned_source "$vendor_src" cri-o CRI-O "$module" "${CRIO_VERSION}" "${CRIO_COMMIT}" "${CRIO_SRC_SHA256}" CRIO)" || die "$why"

log "building CRI-O ${CRIO_VERSION} from ${src}"
cp -R "$src" "${work}/src"
chmod -R u+w "${work}/src"
build "${work}/src" -mod=vendor "$want_src"
